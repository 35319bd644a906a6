// steps.bin (train/step_columns.h): the writer, the reader and resume's cut.
#include "train/step_columns.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "train/run_record.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'S', 'T', 'E', 'P', 'S', '1'};
constexpr uint32_t kBlockMagic = 0x4b4c4254;        // "TBLK" read as little-endian bytes
constexpr uint32_t kMaxBlockRows = 1u << 20;        // a writer's blocks hold kBlockRows
constexpr uint32_t kMaxPayload = 64u << 20;
constexpr uint32_t kMaxHeaderJson = 64u << 10;

enum class ColType { U32, F32, F64 };
struct Column {
  const char* name;
  ColType type;
  double StepRow::*field;  // nullptr: the step
};
constexpr std::array<Column, 12> kColumns = {{
    {"step", ColType::U32, nullptr},
    {"epoch", ColType::F32, &StepRow::epoch},
    {"loss", ColType::F64, &StepRow::loss},
    {"train_accuracy", ColType::F32, &StepRow::train_accuracy},
    {"lr", ColType::F64, &StepRow::lr},
    {"samples_per_s", ColType::F32, &StepRow::samples_per_s},
    {"step_ms", ColType::F32, &StepRow::step_ms},
    {"wall_s", ColType::F64, &StepRow::wall_s},
    {"mfu", ColType::F32, &StepRow::mfu},
    {"grad_norm", ColType::F32, &StepRow::grad_norm},
    {"sparsity", ColType::F32, &StepRow::sparsity},
    {"bits_per_weight", ColType::F32, &StepRow::bits_per_weight},
}};

const char* type_name(ColType t) { return t == ColType::U32 ? "u32" : t == ColType::F32 ? "f32" : "f64"; }
size_t width(ColType t) { return t == ColType::F64 ? 8 : 4; }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}
uint32_t crc_of(std::string_view b) {
  return static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size())));
}

// A column's value `i` as little-endian bytes of its type.
uint64_t column_bits(const Column& c, const StepRow& r) {
  if (!c.field) return static_cast<uint32_t>(r.step);
  const double v = r.*c.field;
  return c.type == ColType::F64 ? std::bit_cast<uint64_t>(v) : std::bit_cast<uint32_t>(static_cast<float>(v));
}
void set_column(const Column& c, StepRow& r, uint64_t bits) {
  if (!c.field) {
    r.step = static_cast<long>(static_cast<uint32_t>(bits));
    return;
  }
  if (c.type == ColType::F64) r.*c.field = std::bit_cast<double>(bits);
  else if (c.type == ColType::F32) r.*c.field = std::bit_cast<float>(static_cast<uint32_t>(bits));
  else r.*c.field = static_cast<double>(static_cast<uint32_t>(bits));
}

// The layout a file's header names: each column's type and, where this reader knows it, its field.
struct FileColumn {
  ColType type = ColType::F32;
  const Column* known = nullptr;  // nullptr: a column of a later version, passed over
};

bool parse_header(std::string_view bytes, size_t& pos, std::vector<FileColumn>& cols, std::string& why) {
  if (bytes.size() < 12 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    why = bytes.size() < 12 ? "shorter than its header" : "not a steps file (no TLSTEPS1 header)";
    return false;
  }
  const uint32_t n = get_u32(bytes, 8);
  if (n > kMaxHeaderJson || bytes.size() < 16 + size_t{n}) {
    why = n > kMaxHeaderJson ? "header larger than 64 KiB" : "shorter than its header";
    return false;
  }
  const std::string_view json = bytes.substr(12, n);
  if (get_u32(bytes, 12 + n) != crc_of(json)) {
    why = "header checksum does not match";
    return false;
  }
  const Json h = Json::parse(json.begin(), json.end(), nullptr, false);
  const auto list = h.is_object() ? h.find("columns") : h.end();
  if (list == h.end() || !list->is_array() || list->empty() || list->size() > 256) {
    why = "header has no list of columns";
    return false;
  }
  bool has_step = false;
  for (const Json& c : *list) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_string()) {
      why = "header's columns: expected [name, type] pairs";
      return false;
    }
    FileColumn f;
    const std::string type = c[1].get<std::string>();
    if (type == "u32") f.type = ColType::U32;
    else if (type == "f32") f.type = ColType::F32;
    else if (type == "f64") f.type = ColType::F64;
    else {
      why = "header's column '" + c[0].get<std::string>() + "': type must be u32, f32 or f64";
      return false;
    }
    for (const Column& k : kColumns)
      if (c[0].get<std::string>() == k.name && (k.field ? f.type != ColType::U32 : f.type == ColType::U32)) f.known = &k;
    has_step = has_step || (f.known && !f.known->field);
    cols.push_back(f);
  }
  if (!has_step) {
    why = "header has no u32 column 'step'";
    return false;
  }
  pos = 16 + n;
  return true;
}

// Rows from an inflated payload; false when its size does not fit the layout.
bool decode_rows(std::string_view raw, uint32_t rows, const std::vector<FileColumn>& cols, std::vector<StepRow>& out) {
  size_t row_bytes = 0;
  for (const FileColumn& c : cols) row_bytes += width(c.type);
  if (raw.size() != row_bytes * rows) return false;
  const size_t first = out.size();
  out.resize(first + rows);
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = first; i < out.size(); ++i) {  // what a column the file lacks reads as
    out[i].mfu = 0;
    out[i].grad_norm = out[i].sparsity = out[i].bits_per_weight = kNone;
  }
  size_t at = 0;
  for (const FileColumn& c : cols) {
    const size_t w = width(c.type);
    if (c.known)
      for (uint32_t i = 0; i < rows; ++i) {
        uint64_t bits = 0;
        for (size_t b = 0; b < w; ++b)
          bits |= static_cast<uint64_t>(static_cast<unsigned char>(raw[at + b * rows + i])) << (8 * b);
        set_column(*c.known, out[first + i], bits);
      }
    at += w * rows;
  }
  return true;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_all(const std::string& path, bool& found) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  found = static_cast<bool>(in);
  if (!found) return {};
  std::string out(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

}  // namespace

StepRow StepRow::of(const StepMetrics& m) {
  const StepMetrics r = record_rounding(m);
  const double none = std::nan("");
  return {r.step,          r.epoch,   r.loss,   r.train_accuracy,
          r.lr,            r.samples_per_s,     r.step_ms,
          r.wall_s,        r.mfu,     r.grad_norm.value_or(none),
          r.sparsity.value_or(none),  r.bits_per_weight.value_or(none)};
}

void StepRow::apply_to(StepMetrics& m) const {
  auto opt = [](double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
  m.step = step;
  m.epoch = epoch;
  m.loss = loss;
  m.train_accuracy = train_accuracy;
  m.lr = lr;
  m.samples_per_s = samples_per_s;
  m.step_ms = step_ms;
  m.wall_s = wall_s;
  m.mfu = mfu;
  m.grad_norm = opt(grad_norm);
  m.sparsity = opt(sparsity);
  m.bits_per_weight = opt(bits_per_weight);
}

bool is_step_column(std::string_view key) {
  for (const Column& c : kColumns)
    if (key == c.name) return true;
  return false;
}

std::string step_columns_file_header() {
  Json cols = Json::array();
  for (const Column& c : kColumns) cols.push_back({c.name, type_name(c.type)});
  const std::string json = Json{{"format", "trainlab step columns"},
                                {"version", 1},
                                {"columns", cols},
                                {"block", "u32 magic TBLK, rows, payload bytes, CRC-32; zlib of byte-shuffled "
                                          "little-endian columns"}}
                               .dump();
  std::string out(kMagic, 8);
  put_u32(out, static_cast<uint32_t>(json.size()));
  out += json;
  put_u32(out, crc_of(json));
  return out;
}

std::string encode_step_block(const std::vector<StepRow>& rows) {
  const size_t n = rows.size();
  std::string raw;
  for (const Column& c : kColumns) {
    const size_t w = width(c.type), at = raw.size();
    raw.resize(at + w * n);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t bits = column_bits(c, rows[i]);
      for (size_t b = 0; b < w; ++b) raw[at + b * n + i] = static_cast<char>((bits >> (8 * b)) & 0xff);
    }
  }
  uLongf size = ::compressBound(static_cast<uLong>(raw.size()));
  std::string payload(size, '\0');
  if (::compress2(reinterpret_cast<Bytef*>(payload.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                  static_cast<uLong>(raw.size()), Z_DEFAULT_COMPRESSION) != Z_OK)
    throw Error("steps.bin: zlib could not compress a block of " + std::to_string(n) + " rows");
  payload.resize(size);
  std::string out;
  put_u32(out, kBlockMagic);
  put_u32(out, static_cast<uint32_t>(n));
  put_u32(out, static_cast<uint32_t>(payload.size()));
  put_u32(out, crc_of(payload));
  return out + payload;
}

StepColumnsRead parse_step_columns(std::string_view bytes, const std::string& origin) {
  StepColumnsRead r;
  std::vector<FileColumn> cols;
  size_t pos = 0;
  std::string why;
  if (!parse_header(bytes, pos, cols, why)) {
    if (!bytes.empty()) r.warnings.push_back(origin + ": " + why + "; no steps read from it");
    return r;
  }
  r.has_header = true;
  r.end_of_whole = pos;
  size_t total = 0;  // the rows the block headers announce: one allocation for a long run's rows
  for (size_t at = pos; at + 16 <= bytes.size() && total < (size_t{1} << 32); at += 16 + get_u32(bytes, at + 8))
    total += std::min(get_u32(bytes, at + 4), kMaxBlockRows);
  r.rows.reserve(std::min(total, (bytes.size() - pos) * 8));  // a block holds no fewer than a row per 1/8 byte
  std::string raw;
  while (pos + 16 <= bytes.size()) {
    const uint32_t magic = get_u32(bytes, pos), rows = get_u32(bytes, pos + 4), len = get_u32(bytes, pos + 8);
    const std::string where = origin + " block at byte " + std::to_string(pos);
    if (magic != kBlockMagic || rows > kMaxBlockRows || len > kMaxPayload) {
      r.warnings.push_back(where + ": not a block header; the rest of the file skipped");
      return r;
    }
    if (pos + 16 + len > bytes.size()) break;  // torn: the write was cut
    const std::string_view payload = bytes.substr(pos + 16, len);
    if (get_u32(bytes, pos + 12) != crc_of(payload)) {
      r.warnings.push_back(where + ": checksum does not match; its rows skipped");
    } else {
      uLongf size = 0;
      for (const FileColumn& c : cols) size += static_cast<uLongf>(width(c.type) * rows);
      raw.assign(size, '\0');
      const int z = ::uncompress(reinterpret_cast<Bytef*>(raw.data()), &size,
                                 reinterpret_cast<const Bytef*>(payload.data()), static_cast<uLong>(len));
      if (z != Z_OK || !decode_rows(std::string_view(raw.data(), size), rows, cols, r.rows))
        r.warnings.push_back(where + ": not a zlib block of " + std::to_string(rows) + " rows; its rows skipped");
    }
    pos += 16 + len;
    r.end_of_whole = pos;
  }
  return r;
}

StepColumnsWriter::StepColumnsWriter(const std::string& path, bool truncate)
    : m_file(std::make_unique<AppendFile>(path, truncate)) {
  if (m_file->size() == 0) {
    m_file->append(step_columns_file_header());
    return;
  }
  bool found = false;
  const std::string head = read_all(path, found).substr(0, 16 + kMaxHeaderJson);
  std::vector<FileColumn> cols;
  size_t pos = 0;
  std::string why;
  if (!parse_header(head, pos, cols, why) || head.compare(0, pos, step_columns_file_header()) != 0)
    throw Error(path + ": cannot append to it (" + (why.empty() ? "another version's columns" : why) +
                "); move it away to start the steps file afresh");
}

StepColumnsWriter::~StepColumnsWriter() {
  try {
    flush();
  } catch (const Error&) {  // a destructor does not throw; flush() reports the same error when called
  }
}

void StepColumnsWriter::add(const StepMetrics& m) {
  if (m_rows.empty()) m_first_row_time = now_s();
  m_rows.push_back(StepRow::of(m));
  if (m_rows.size() >= kBlockRows || now_s() - m_first_row_time >= kBlockSeconds) flush();
}

void StepColumnsWriter::flush() {
  if (m_rows.empty()) return;
  const std::string block = encode_step_block(m_rows);
  m_rows.clear();  // a failed write ends the run; its rows are not written twice
  m_file->append(block);
}

long truncate_step_columns(const std::string& path, long step) {
  bool found = false;
  const std::string bytes = read_all(path, found);
  if (!found) return 0;
  const StepColumnsRead r = parse_step_columns(bytes, path);
  if (!r.has_header) throw Error(path + ": not a steps file (" + (r.warnings.empty() ? "empty" : r.warnings[0]) +
                                 "); move it away and resume again");
  // Keep the whole blocks that end at or before `step`, then the straddling block's first rows.
  std::vector<StepRow> tail;
  std::string kept;
  {
    std::vector<FileColumn> cols;
    size_t pos = 0;
    std::string why;
    parse_header(bytes, pos, cols, why);
    kept = bytes.substr(0, pos);
    while (pos < r.end_of_whole) {
      const uint32_t len = get_u32(bytes, pos + 8);
      const StepColumnsRead one = parse_step_columns(kept.substr(0, 16 + get_u32(bytes, 8)) +
                                                          std::string(bytes.substr(pos, 16 + len)), path);
      pos += 16 + len;
      if (one.rows.empty()) continue;  // a bad block: dropped, as the reader skips it
      if (one.rows.back().step <= step) {
        kept += bytes.substr(pos - 16 - len, 16 + len);
        continue;
      }
      for (const StepRow& s : one.rows)
        if (s.step <= step) tail.push_back(s);
      break;
    }
  }
  if (!tail.empty()) kept += encode_step_block(tail);
  if (kept.size() != bytes.size()) write_file_atomic(path, kept);
  const StepColumnsRead after = parse_step_columns(kept, path);
  return after.rows.empty() ? 0 : after.rows.back().step;
}

}  // namespace trainlab
