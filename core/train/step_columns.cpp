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
#include <optional>

#include "train/run_record.h"
#include "util/error.h"
#include "util/huge_pages.h"
#include "util/parallel.h"
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
// The layout a file's header names: each column's type and, where this reader knows it, its field.
struct FileColumn {
  ColType type = ColType::F32;
  const Column* known = nullptr;  // nullptr: a column of a later version, passed over
};

// A column value's bits read as the file's type says (a later version may narrow or widen one).
double file_value(ColType t, uint64_t bits) {
  if (t == ColType::F64) return std::bit_cast<double>(bits);
  if (t == ColType::F32) return std::bit_cast<float>(static_cast<uint32_t>(bits));
  return static_cast<double>(static_cast<uint32_t>(bits));
}
void set_column(const FileColumn& c, StepRow& r, uint64_t bits) {
  if (c.known->field) r.*c.known->field = file_value(c.type, bits);
  else r.step = static_cast<long>(static_cast<uint32_t>(bits));
}

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

// Where each column of an inflated payload of `rows` rows starts, and the bytes the payload has.
struct BlockLayout {
  std::vector<size_t> at;  // per file column
  size_t bytes = 0;
  BlockLayout(const std::vector<FileColumn>& cols, size_t rows) {
    for (const FileColumn& c : cols) {
      at.push_back(bytes);
      bytes += width(c.type) * rows;
    }
  }
};

// Value `i` of the byte-shuffled column at `col` (byte b of value i at col[b * rows + i]).
uint64_t gather(const unsigned char* col, size_t w, size_t rows, size_t i) {
  uint64_t bits = 0;
  for (size_t b = 0; b < w; ++b) bits |= static_cast<uint64_t>(col[b * rows + i]) << (8 * b);
  return bits;
}

// What a row reads as before its columns are set: a column the file lacks stays so.
StepRow absent_row() {
  StepRow r;
  r.mfu = 0;
  r.grad_norm = r.sparsity = r.bits_per_weight = std::numeric_limits<double>::quiet_NaN();
  return r;
}

// Rows [0, rows) of an inflated payload into out[0, rows), column by column.
void decode_all(const unsigned char* raw, size_t rows, const std::vector<FileColumn>& cols, StepRow* out) {
  const BlockLayout l(cols, rows);
  std::fill(out, out + rows, absent_row());
  for (size_t c = 0; c < cols.size(); ++c)
    if (cols[c].known)
      for (size_t i = 0; i < rows; ++i)
        set_column(cols[c], out[i], gather(raw + l.at[c], width(cols[c].type), rows, i));
}

// Row `i` of an inflated payload (a thinned read builds only the rows it keeps).
StepRow decode_one(const unsigned char* raw, size_t rows, const std::vector<FileColumn>& cols, const BlockLayout& l,
                   size_t i) {
  StepRow r = absent_row();
  for (size_t c = 0; c < cols.size(); ++c)
    if (cols[c].known) set_column(cols[c], r, gather(raw + l.at[c], width(cols[c].type), rows, i));
  return r;
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

namespace {

// Deflate compresses at most 1032:1 (zlib.net/zlib_tech.html): a block announcing more rows than its
// payload could inflate to is not read, and its rows are never allocated.
constexpr size_t kMaxInflateRatio = 1032;

// A whole block of the file: its header's place, rows and payload length, and the place of its
// first row among the rows of the blocks before it (a thinned read's buckets count rows so).
struct BlockRef {
  size_t pos = 0;
  uint32_t rows = 0, len = 0;
  size_t first = 0;
  bool fits = true;  // its rows fit what its payload can inflate to
};

// The lowest- and highest-loss rows of one bucket among the rows seen so far, in file order: a
// lower (higher) loss replaces the one kept, ties keep the first, and a NaN loss gives way to the
// next row (so a bucket of NaN keeps its last row).
struct Extremes {
  size_t bucket = 0, lo = 0, hi = 0;
  double lo_loss = 0, hi_loss = 0;
  void add(size_t place, double loss) { add(Extremes{bucket, place, place, loss, loss}); }
  void add(const Extremes& later) {  // the same bucket's rows after these
    if (later.lo_loss < lo_loss || std::isnan(lo_loss)) lo = later.lo, lo_loss = later.lo_loss;
    if (later.hi_loss > hi_loss || std::isnan(hi_loss)) hi = later.hi, hi_loss = later.hi_loss;
  }
};

// What one block gave: for a thinned read the rows that may be kept, with their places, and each
// bucket's extremes among the block's rows; the choice over the blocks is made after them.
struct BlockRead {
  bool ok = false;
  std::string why;  // when not ok: "checksum does not match; its rows skipped"...
  std::vector<StepRow> rows;
  std::vector<size_t> place;
  std::vector<Extremes> extremes;
};

struct Thinning {
  size_t bucket = 1;                      // rows a bucket
  const std::vector<long>* keep_steps{};  // sorted
};

bool inflate_block(std::string_view bytes, const BlockRef& b, size_t raw_bytes, std::vector<unsigned char>& raw,
                   std::string& why) {
  const std::string_view payload = bytes.substr(b.pos + 16, b.len);
  if (get_u32(bytes, b.pos + 12) != crc_of(payload)) {
    why = "checksum does not match; its rows skipped";
    return false;
  }
  raw.resize(std::max<size_t>(raw_bytes, 1));
  uLongf size = static_cast<uLongf>(raw_bytes);
  if (!b.fits || ::uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(payload.data()),
                              static_cast<uLong>(b.len)) != Z_OK || size != raw_bytes) {
    why = "not a zlib block of " + std::to_string(b.rows) + " rows; its rows skipped";
    return false;
  }
  return true;
}

// A thinned read of one inflated block: the loss and step columns of every row give the buckets'
// extremes and the rows of the steps asked for; only those rows and the block's last are built.
void block_candidates(const unsigned char* raw, const BlockRef& b, const std::vector<FileColumn>& cols,
                      const Thinning& t, BlockRead& out) {
  const BlockLayout l(cols, b.rows);
  size_t step_c = 0, loss_c = cols.size();  // the header has a step column; the loss may be absent (0)
  for (size_t c = 0; c < cols.size(); ++c) {
    if (cols[c].known && !cols[c].known->field) step_c = c;
    if (cols[c].known && cols[c].known->field == &StepRow::loss) loss_c = c;
  }
  std::vector<char> keep(b.rows, 0);
  for (size_t i = 0; i < b.rows; ++i) {
    const auto step = static_cast<long>(static_cast<uint32_t>(gather(raw + l.at[step_c], 4, b.rows, i)));
    keep[i] = std::binary_search(t.keep_steps->begin(), t.keep_steps->end(), step);
    const double loss = loss_c == cols.size()
                            ? 0.0
                            : file_value(cols[loss_c].type, gather(raw + l.at[loss_c], width(cols[loss_c].type), b.rows, i));
    const size_t place = b.first + i, bucket = place / t.bucket;
    if (out.extremes.empty() || out.extremes.back().bucket != bucket)
      out.extremes.push_back({bucket, place, place, loss, loss});
    else
      out.extremes.back().add(place, loss);
  }
  for (const Extremes& e : out.extremes) keep[e.lo - b.first] = keep[e.hi - b.first] = 1;
  if (b.rows > 0) keep.back() = 1;  // where the curve ends, should this block be the last read
  for (size_t i = 0; i < b.rows; ++i)
    if (keep[i]) {
      out.rows.push_back(decode_one(raw, b.rows, cols, l, i));
      out.place.push_back(b.first + i);
    }
}

// A thinned read's rows in file order: each bucket's extremes over all its blocks, the last row
// read, and every row of a step asked for.
std::vector<StepRow> chosen_rows(const std::vector<BlockRead>& reads, const std::vector<long>& keep_steps) {
  std::vector<size_t> chosen;
  std::optional<Extremes> cur;
  for (const BlockRead& b : reads) {
    for (const Extremes& e : b.extremes) {
      if (cur && cur->bucket == e.bucket) {
        cur->add(e);
        continue;
      }
      if (cur) chosen.insert(chosen.end(), {cur->lo, cur->hi});
      cur = e;
    }
  }
  if (cur) chosen.insert(chosen.end(), {cur->lo, cur->hi});
  for (auto b = reads.rbegin(); b != reads.rend(); ++b)
    if (!b->place.empty()) {  // the last row read
      chosen.push_back(b->place.back());
      break;
    }
  std::sort(chosen.begin(), chosen.end());
  std::vector<StepRow> out;
  for (const BlockRead& b : reads)
    for (size_t i = 0; i < b.rows.size(); ++i)
      if (std::binary_search(chosen.begin(), chosen.end(), b.place[i]) ||
          std::binary_search(keep_steps.begin(), keep_steps.end(), b.rows[i].step))
        out.push_back(b.rows[i]);
  return out;
}

}  // namespace

StepColumnsRead parse_step_columns(std::string_view bytes, const std::string& origin, const StepRowsWanted& want) {
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
  const size_t row_bytes = BlockLayout(cols, 1).bytes;
  // The block headers first (cheap, in order), then the blocks' checksums, inflation and rows over
  // the cores: each block is independent of the others.
  std::vector<BlockRef> blocks;
  std::string stop;  // a bad block header ends the file, warned after the blocks before it
  size_t total = 0;
  while (pos + 16 <= bytes.size()) {
    const uint32_t magic = get_u32(bytes, pos), rows = get_u32(bytes, pos + 4), len = get_u32(bytes, pos + 8);
    if (magic != kBlockMagic || rows > kMaxBlockRows || len > kMaxPayload) {
      stop = origin + " block at byte " + std::to_string(pos) + ": not a block header; the rest of the file skipped";
      break;
    }
    if (pos + 16 + len > bytes.size()) break;  // torn: the write was cut
    const bool fits = size_t{rows} * row_bytes <= size_t{len} * kMaxInflateRatio + 64;
    blocks.push_back({pos, rows, len, total, fits});
    total += fits ? rows : 0;
    pos += 16 + len;
    r.end_of_whole = pos;
  }
  const bool thin = want.max_rows >= 2 && total > want.max_rows;
  const Thinning t{(total + want.max_rows / 2 - 1) / std::max<size_t>(1, want.max_rows / 2), &want.keep_steps};
  if (!thin) {  // each block decodes into its place
    r.rows.reserve(total);
    advise_huge_pages(r.rows.data(), total * sizeof(StepRow));
    r.rows.resize(total);
  }
  std::vector<BlockRead> reads(blocks.size());
  const auto n = static_cast<int64_t>(blocks.size());
  parallel_for(n, parallel_threads(n, 64), [&](int, int64_t begin, int64_t end) {
    std::vector<unsigned char> raw;
    for (int64_t k = begin; k < end; ++k) {
      const BlockRef& b = blocks[static_cast<size_t>(k)];
      BlockRead& out = reads[static_cast<size_t>(k)];
      out.ok = inflate_block(bytes, b, b.rows * row_bytes, raw, out.why);
      if (out.ok && thin) block_candidates(raw.data(), b, cols, t, out);
      else if (out.ok) decode_all(raw.data(), b.rows, cols, r.rows.data() + b.first);
    }
  });
  size_t kept = 0;  // a whole read: the rows of blocks not read are closed up
  for (size_t k = 0; k < blocks.size(); ++k) {
    if (!reads[k].ok) {
      r.warnings.push_back(origin + " block at byte " + std::to_string(blocks[k].pos) + ": " + reads[k].why);
      continue;
    }
    if (!thin && kept != blocks[k].first)
      std::move(r.rows.begin() + static_cast<ptrdiff_t>(blocks[k].first),
                r.rows.begin() + static_cast<ptrdiff_t>(blocks[k].first + blocks[k].rows),
                r.rows.begin() + static_cast<ptrdiff_t>(kept));
    kept += blocks[k].rows;
  }
  if (!stop.empty()) r.warnings.push_back(stop);
  if (thin) r.rows = chosen_rows(reads, want.keep_steps);
  else r.rows.resize(kept);
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
