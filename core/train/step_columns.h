// steps.bin: the per-step scalars of a run record in compact columns (issue 21: an hour of a digits
// run, 2 million steps, in tens of MB where metrics.jsonl alone took 260 MB). metrics.jsonl keeps
// the lines that carry anything else (slow fields where they change, events, validation, system
// samples, kernel times, ranks, a skipped or non-finite step); load_run merges the two.
//
// Layout, all little-endian:
//   file header  "TLSTEPS1", u32 n, n bytes of JSON {"format", "version", "columns": [[name, type]...],
//                "block"}, u32 CRC-32 of those n bytes. Types: "u32", "f32", "f64".
//   blocks       u32 magic 0x4b4c4254 ("TBLK"), u32 rows, u32 payload bytes, u32 CRC-32 of the
//                payload; the payload is zlib (RFC 1950) of the columns one after another, each
//                column's values byte-shuffled (every value's byte 0, then every byte 1...), which
//                lets zlib find the repeats of slowly changing floats.
// A block is written with one checked write(2) (util/safe_file.h) every kBlockRows rows or
// kBlockSeconds, whichever comes first, and on flush(): a kill -9 loses at most the rows of the
// block in memory (the trainer flushes before every checkpoint, so resume never misses a step),
// and leaves at worst a torn last block, which the reader drops silently.
// Values are stored rounded as metrics.jsonl writes them (record_rounding): loss, lr and wall_s in
// f64, the rest in f32 (7 significant digits, more than their rounding keeps). Absent optional
// values (grad_norm, sparsity, bits_per_weight) are NaN; no MFU is 0.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/metrics.h"

namespace trainlab {

class AppendFile;

// The per-step scalars of one step, as stored in steps.bin.
struct StepRow {
  long step = 0;
  double epoch = 0, loss = 0, train_accuracy = 0, lr = 0, samples_per_s = 0, step_ms = 0, wall_s = 0;
  double mfu = 0, grad_norm = 0, sparsity = 0, bits_per_weight = 0;  // NaN: absent (mfu: 0)
  static StepRow of(const StepMetrics& m);
  // Writes these scalars into `m` (the other fields of `m` are kept).
  void apply_to(StepMetrics& m) const;
};

// The names of the StepMetrics JSON fields that steps.bin holds for every step.
bool is_step_column(std::string_view json_key);

class StepColumnsWriter {
 public:
  static constexpr size_t kBlockRows = 512;
  static constexpr double kBlockSeconds = 1.0;
  // Opens `path` for appending (a missing or empty file gets the header; `truncate` empties it
  // first). An existing file whose header is not this format's throws Error naming it.
  StepColumnsWriter(const std::string& path, bool truncate);
  ~StepColumnsWriter();  // writes the rows in memory (errors ignored: call flush() to see them)
  StepColumnsWriter(const StepColumnsWriter&) = delete;
  StepColumnsWriter& operator=(const StepColumnsWriter&) = delete;

  // Adds a step's row; writes a block when kBlockRows rows or kBlockSeconds have gathered.
  void add(const StepMetrics& m);
  // Writes the rows in memory as a block; throws Error (path and reason) when the write fails.
  void flush();

 private:
  std::unique_ptr<AppendFile> m_file;
  std::vector<StepRow> m_rows;
  double m_first_row_time = 0;  // steady clock seconds when the oldest row in memory was added
};

// What a read of steps.bin builds. max_rows >= 2 and a file of more rows: a thinned read for plots
// (load_run's): the rows are cut into max_rows / 2 buckets of consecutive rows (by their place in the
// file), and of each bucket only the lowest- and highest-loss row is built (min/max, so a one-step
// spike survives), with the last row and the row of every step in keep_steps (sorted). Else every row.
struct StepRowsWanted {
  size_t max_rows = 0;
  std::vector<long> keep_steps;
};

// The bytes of a steps.bin: the rows `want` asks for of every whole block whose checksum matches, in
// file order. A torn last block (a short header or payload: a write cut by a kill) is dropped
// silently; a block that fails its CRC or does not inflate is skipped with a warning "<origin> block
// at byte N: ..."; a bad file header reads no rows, with a warning. The blocks are checked, inflated
// and decoded on several threads (util/parallel.h); a thinned read builds only the rows it keeps
// (bench_record_load: an hour's 2 million steps). Never throws for the bytes' sake (fuzz target
// tests/fuzz/fuzz_steps.cpp). `end_of_whole` gets the byte just after the last whole block.
struct StepColumnsRead {
  std::vector<StepRow> rows;
  std::vector<std::string> warnings;
  size_t end_of_whole = 0;
  bool has_header = false;
};
StepColumnsRead parse_step_columns(std::string_view bytes, const std::string& origin, const StepRowsWanted& want = {});

// The rows of a record with a steps.bin (load_run): every metrics.jsonl row (its scalars taken from
// steps.bin where that has the step, so that a step reads the same whichever file carries it), and
// the steps.bin rows between them with the slow fields of the line before. `lines` and `rows` in
// step order; a row whose step is not after the one before it is passed over.
std::vector<StepMetrics> merge_step_rows(std::vector<StepMetrics> lines, const std::vector<StepRow>& rows);

// One block's bytes (header + payload) for `rows`; a file's header. Exposed for tests and the
// benchmark, which write records without a trainer.
std::string encode_step_block(const std::vector<StepRow>& rows);
std::string step_columns_file_header();

// Cuts the steps.bin at `path` after the row of step `step` (rows of later steps and a torn last
// block go; a block that straddles `step` is written again with its first rows). The file is
// replaced atomically. Returns the step of the last row kept (0 when none); a missing file stays
// missing.
long truncate_step_columns(const std::string& path, long step);

}  // namespace trainlab
