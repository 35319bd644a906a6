#include "io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab {

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I8: return "I8";
    case DType::F8E4M3: return "F8_E4M3";
    case DType::F8E5M2: return "F8_E5M2";
    case DType::I4: break;
  }
  throw Error("int4 tensors are stored packed as U8 in safetensors files");
}

DType dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "I32") return DType::I32;
  if (s == "I8") return DType::I8;
  if (s == "F8_E4M3") return DType::F8E4M3;
  if (s == "F8_E5M2") return DType::F8E5M2;
  throw Error("unsupported safetensors dtype '" + s + "'");
}

namespace {
size_t element_size(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}
}  // namespace

void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto& [k, v] : file.metadata) md[k] = v;
    header["__metadata__"] = md;
  }
  uint64_t offset = 0;
  for (const auto& t : file.tensors) {
    const size_t es = element_size(t.dtype);
    if (es && t.bytes.size() != es * static_cast<size_t>(shape_numel(t.shape)))
      throw Error("tensor '" + t.name + "': " + std::to_string(t.bytes.size()) + " bytes do not match " + t.dtype + " " +
                  shape_str(t.shape));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  // Temporary file, every write checked, fsync, rename (util/safe_file.h): a full disk or a crash
  // never leaves a torn weights file in place of a whole one, and a link at `path` is not followed.
  AtomicFile out(path);
  const uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
  out.write(len, 8);
  out.write(h);
  for (const auto& t : file.tensors) out.write(t.bytes.data(), t.bytes.size());
  out.commit();
}

SafeTensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the weights file");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) throw Error(path + ": not a safetensors file (shorter than its 8-byte header length)");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > size - 8 || n > (100u << 20)) throw Error(path + ": not a safetensors file (header length " + std::to_string(n) + " does not fit the file)");
  std::string h(n, '\0');
  in.read(h.data(), static_cast<std::streamsize>(n));
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(h);
  } catch (const std::exception& e) {
    throw Error(path + ": safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
  const uint64_t data_size = size - 8 - n;
  SafeTensorsFile f;
  struct Span {
    uint64_t b, e;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m)
        f.metadata[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    SafeTensor t;
    t.name = it.key();
    try {
      t.dtype = it->at("dtype").get<std::string>();
      t.shape = it->at("shape").get<Shape>();
      const auto off = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
        throw Error(path + ": tensor '" + t.name + "' has data offsets outside the file");
      const size_t es = element_size(t.dtype);
      if (es == 0) throw Error(path + ": tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
      if (off[1] - off[0] != es * static_cast<uint64_t>(shape_numel(t.shape)))
        throw Error(path + ": tensor '" + t.name + "' holds " + std::to_string(off[1] - off[0]) + " bytes, but " +
                    t.dtype + " " + shape_str(t.shape) + " needs " + std::to_string(es * shape_numel(t.shape)));
      t.bytes.resize(off[1] - off[0]);
      in.seekg(static_cast<std::streamoff>(8 + n + off[0]));
      in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
      if (!in) throw Error(path + ": truncated while reading tensor '" + t.name + "'");
      spans.push_back({off[0], off[1]});
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": tensor '" + t.name + "' has a malformed header entry (" + e.what() + ")");
    }
    f.tensors.push_back(std::move(t));
  }
  // The format requires the data to be covered exactly, without holes or overlaps.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.b < b.b; });
  uint64_t pos = 0;
  for (const auto& s : spans) {
    if (s.b != pos) throw Error(path + ": tensor data has a hole or an overlap at byte " + std::to_string(pos));
    pos = s.e;
  }
  if (pos != data_size) throw Error(path + ": " + std::to_string(data_size - pos) + " trailing bytes after the last tensor");
  return f;
}

}  // namespace trainlab
