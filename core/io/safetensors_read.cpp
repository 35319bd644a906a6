// Reading safetensors files (io/safetensors.h): the checks of a file nothing in which is trusted.
// The header is parsed once into a layout (names, dtypes, shapes, byte ranges), every range checked
// against the data present; only then are the tensors' bytes copied (from memory) or read (from
// the file, with pread).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/error.h"

namespace trainlab {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;
constexpr size_t kMaxRank = 8;
// The header is {name: {dtype, shape: [...], data_offsets: [...]}, __metadata__: {...}}: values
// at depth 3 at most. Deeper nesting is refused while parsing (nothing recursive runs on it).
constexpr int kMaxHeaderDepth = 4;

struct Entry {
  std::string name, dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Layout {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

uint64_t read_le64(const unsigned char* p) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(p[i]) << (8 * i);
  return n;
}

// The header length of a file of `size` bytes whose first 8 bytes are `len`.
uint64_t header_length(const unsigned char* len, uint64_t size, const std::string& origin) {
  const uint64_t n = read_le64(len);
  if (n > size - 8)
    throw Error(origin + ": not a safetensors file (its header length does not fit the file's " + std::to_string(size) +
                " bytes)");
  if (n > kMaxHeaderBytes) throw Error(origin + ": not a safetensors file (header over the 100 MiB limit)");
  return n;
}

nlohmann::json parse_header_json(std::string_view text, const std::string& origin) {
  // A parse error's own message quotes the last token read: only its position is reported.
  // A key twice in one object (a tensor named twice: JSON parsers keep one of them silently, so
  // two readers could see different files) is refused, as the format's reference reader does.
  std::vector<std::set<std::string>> keys;
  const auto checks = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth > kMaxHeaderDepth)
      throw Error(origin + ": safetensors header is nested deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw Error(origin + ": safetensors header names " + printable_name(parsed.get<std::string>()) +
                  " twice (expected each tensor and key once)");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), checks);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(origin + ": safetensors header is not valid JSON (syntax error at byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {  // out_of_range: a number beyond double's range
    throw Error(origin + ": safetensors header is not valid JSON (a number out of range)");
  }
}

Shape parse_shape(const nlohmann::json& j, const std::string& where) {
  const std::string expected = where + ": shape must be a list of at most " + std::to_string(kMaxRank) +
                               " non-negative integers";
  if (!j.is_array() || j.size() > kMaxRank) throw Error(expected);
  Shape s;
  for (const auto& d : j) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) throw Error(expected);
    s.push_back(d.get<int64_t>());
  }
  return s;
}

Entry parse_entry(const std::string& name, const nlohmann::json& j, uint64_t data_size, const std::string& origin) {
  Entry e;
  e.name = name;
  const std::string where = origin + ": tensor " + printable_name(name);
  if (!j.is_object()) throw Error(where + ": header entry is not a JSON object");
  const auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string() || safetensors_element_size(dtype->get<std::string>()) == 0)
    throw Error(where + " has unknown dtype (expected F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U64, "
                        "U32, U16, U8 or BOOL)");
  e.dtype = dtype->get<std::string>();
  const auto shape = j.find("shape");
  if (shape == j.end()) throw Error(where + " has no shape");
  e.shape = parse_shape(*shape, where);
  const auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    throw Error(where + ": data_offsets must be two non-negative integers [begin, end]");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    throw Error(where + " has data offsets outside the file (its data holds " + std::to_string(data_size) + " bytes)");
  const std::optional<int64_t> n = checked_numel(e.shape);
  const uint64_t es = safetensors_element_size(e.dtype);
  if (!n || static_cast<uint64_t>(*n) > UINT64_MAX / es)
    throw Error(where + ": its shape has more elements than any file holds");
  const uint64_t need = es * static_cast<uint64_t>(*n);
  if (e.end - e.begin != need)
    throw Error(where + " holds " + std::to_string(e.end - e.begin) + " bytes, but " + e.dtype + " " + shape_str(e.shape) +
                " needs " + std::to_string(need));
  return e;
}

// The header's layout, every tensor checked against the `data_size` bytes after the header.
Layout parse_layout(std::string_view header, uint64_t data_size, const std::string& origin) {
  const nlohmann::json h = parse_header_json(header, origin);
  if (!h.is_object()) throw Error(origin + ": safetensors header is not a JSON object");
  Layout l;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() != "__metadata__") {
      l.entries.push_back(parse_entry(it.key(), it.value(), data_size, origin));
      continue;
    }
    if (!it->is_object()) throw Error(origin + ": __metadata__ is not a JSON object of strings");
    for (auto m = it->begin(); m != it->end(); ++m) {
      if (!m->is_string()) throw Error(origin + ": __metadata__ value " + printable_name(m.key()) + " is not a string");
      l.metadata[m.key()] = m->get<std::string>();
    }
  }
  // The format requires the data to be covered exactly, without holes or overlaps.
  std::sort(l.entries.begin(), l.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  uint64_t pos = 0;
  for (const Entry& e : l.entries) {
    if (e.begin != pos) throw Error(origin + ": tensor data has a hole or an overlap at byte " + std::to_string(pos));
    pos = e.end;
  }
  if (pos != data_size) throw Error(origin + ": " + std::to_string(data_size - pos) + " trailing bytes after the last tensor");
  return l;
}

SafeTensor make_tensor(Entry&& e) {
  SafeTensor t;
  t.name = std::move(e.name);
  t.dtype = std::move(e.dtype);
  t.shape = std::move(e.shape);
  return t;
}

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : m_fd(fd) {}
  ~Fd() {
    if (m_fd >= 0) ::close(m_fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return m_fd; }

 private:
  int m_fd;
};

// Reads exactly `n` bytes at `offset`; throws naming `what` when the file ends first (it changed
// while being read) or the read fails.
void pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path, const std::string& what) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t(1) << 30));
    const ssize_t got = ::pread(fd, p, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(path + ": cannot read " + what + " (" + std::strerror(errno) + ")");
    if (got == 0) throw Error(path + ": truncated while reading " + what);
    p += got;
    n -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

// Opens `path` for reading if it is a regular file (O_NONBLOCK: opening a pipe does not wait for
// a writer; fstat then refuses it). Returns the descriptor and the file's size.
int open_regular(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw Error(path + ": cannot open the weights file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot read the weights file (" + std::strerror(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file but " + (S_ISDIR(st.st_mode) ? "a folder" : "a device, pipe or socket") +
                ": give a weights file (.safetensors)");
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

size_t safetensors_element_size(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}

std::optional<int64_t> checked_numel(const Shape& shape) {
  int64_t n = 1;
  for (const int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

std::string printable_name(std::string_view name) {
  constexpr size_t kMax = 64;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (name.size() > kMax) out += "...";
  return out + "'";
}

SafeTensorsFile parse_safetensors(std::string_view bytes, const std::string& origin) {
  if (bytes.size() < 8) throw Error(origin + ": not a safetensors file (shorter than its 8-byte header length)");
  const uint64_t size = bytes.size();
  const uint64_t n = header_length(reinterpret_cast<const unsigned char*>(bytes.data()), size, origin);
  Layout l = parse_layout(bytes.substr(8, n), size - 8 - n, origin);
  SafeTensorsFile f;
  f.metadata = std::move(l.metadata);
  for (Entry& e : l.entries) {
    const uint64_t at = 8 + n + e.begin, len = e.end - e.begin;
    SafeTensor t = make_tensor(std::move(e));
    t.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + len));
    f.tensors.push_back(std::move(t));
  }
  return f;
}

SafeTensorsFile read_safetensors(const std::string& path) {
  uint64_t size = 0;
  const Fd fd(open_regular(path, size));
  if (size < 8) throw Error(path + ": not a safetensors file (shorter than its 8-byte header length)");
  unsigned char len[8];
  pread_all(fd.get(), len, 8, 0, path, "the header length");
  const uint64_t n = header_length(len, size, path);
  std::string header(static_cast<size_t>(n), '\0');
  pread_all(fd.get(), header.data(), n, 8, path, "the header");
  Layout l = parse_layout(header, size - 8 - n, path);
  SafeTensorsFile f;
  f.metadata = std::move(l.metadata);
  for (Entry& e : l.entries) {
    const uint64_t at = 8 + n + e.begin, len_bytes = e.end - e.begin;
    SafeTensor t = make_tensor(std::move(e));
    t.bytes.resize(static_cast<size_t>(len_bytes));
    pread_all(fd.get(), t.bytes.data(), len_bytes, at, path, "tensor " + printable_name(t.name));
    f.tensors.push_back(std::move(t));
  }
  return f;
}

}  // namespace trainlab
