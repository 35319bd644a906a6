// RunRecord: one folder per run. config.json (the full resolved config), steps.bin (every step's
// scalars in checked column blocks: train/step_columns.h), metrics.jsonl (a JSON line, appended
// with a checked write, for each step that carries more: MetricsLineWriter::extras_line; a crash
// loses at most the block in memory and a failed write stops the run), summary.json, and
// model.safetensors (names and layouts of the PyTorch peer's module); run.lock marks the folder as
// a run's and locks it while a run writes. docs/RUN_RECORD.md describes the format and its sizes.
//
// Faults. config.json, summary.json and the weights are written to a temporary file, fsync'd and
// renamed (util/safe_file.h); every append to metrics.jsonl is checked. A failed write throws
// Error naming the path and the reason; the trainer then ends the run with status "failed".
//
// The folder's rules (RunOpenMode):
//  - run.lock is created in the folder and flock'ed (LOCK_EX) for the RunRecord's life: a second
//    writer, in this process or another, is refused ("... is in use by another run").
//  - A folder "holds a run" when it has run.lock and a run's files (config.json, metrics.jsonl,
//    summary.json). Without run.lock no file in the folder is a run's own: config.json there is the
//    user's (e.g. `train --config mydir/config.json --out mydir`) and is never overwritten.
//  - New: the folder must be missing or empty, or hold only a run's leftovers that never got to
//    config.json. A folder that holds a run (finished, or stopped / killed) is refused; so is one
//    with any file that is not a run's own, named in the message.
//  - Overwrite (`trainlab-cli train --overwrite`, the app's dialog): as New, but a folder that holds
//    a run not in use is first cleared of that run's own files (is_run_file); files that are not a
//    run's own are still refused, never removed.
//  - Resume: the one way to write into a folder that holds a run and keep it. The folder must hold
//    a run that did not complete (no summary.json, or status stopped / failed / diverged); it is
//    locked, config.json is kept as it is (not rewritten), summary.json is removed (the run is live
//    again) and metrics.jsonl is appended to (whoever resumes truncates it to the checkpoint's step
//    first). Files that are not a run's own are left alone.
//  - Nothing is written through a symbolic link in the folder: a link with a run file's name (or
//    run.lock) is refused, naming it; writes use O_NOFOLLOW and rename, not open-and-truncate.
//
// A run resumed from its checkpoint (train/run_checkpoint.h) reopens its folder with
// RunRecord(dir, ResumeAt{step}): Resume's rules, and metrics.jsonl cut back to the checkpoint's step.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "nn/model.h"
#include "train/metrics.h"

namespace trainlab {

class AppendFile;
class StepColumnsWriter;

// The lines of metrics.jsonl. Per-step scalars (loss, accuracy, lr, timings) are on every line;
// slow-changing fields (kSlowMetricsFields: memory by category, precision, device bytes, loss
// scale, skipped steps, lr under a constant schedule) only on the first line and where they
// change, which keeps a record near 100 bytes a step instead of 640 (issue 21). Timings are rounded
// to what a host clock resolves (step_ms to 1 us, wall_s to 0.1 ms, samples_per_s to 5 digits),
// the loss to 9 significant digits (an fp32 sum's shortest round trip), the epoch to 7.
// A reader carries the last value of each slow field forward to the lines that omit it; records
// written before this (every field on every line) read the same as before.
extern const std::array<const char*, 10> kSlowMetricsFields;
// `m` rounded as a record stores it (the timings, loss and epoch above).
StepMetrics record_rounding(const StepMetrics& m);
class MetricsLineWriter {
 public:
  // One line of metrics.jsonl for `m` (no newline): the slow fields only where they changed.
  std::string line(const StepMetrics& m);
  // The line of a record whose per-step scalars go to steps.bin (train/step_columns.h): `m`'s line
  // when it carries anything steps.bin does not hold (a slow field that changed, an event,
  // validation, system or kernel values, ranks, a skipped step, a loss or accuracy that is not
  // finite), with lr on it always; "" for a plain step. Use one writer for one way or the other.
  std::string extras_line(const StepMetrics& m);

 private:
  Json m_last = Json::object();  // the slow fields as last written
  Json diffed(const StepMetrics& m, bool keep_lr);
};
class MetricsLineReader {
 public:
  // `line` with the slow fields it omits filled in from the lines before; the fields it has become
  // the carried values. Call it for the lines of one file in order.
  Json expand(Json line);
  // Sets a carried field without a line (a thinned read passing over a line that changes only it).
  void carry(const char* key, Json value) { m_carried[key] = std::move(value); }
  // expand + StepMetrics::from_json; throws Error like from_json (nothing is carried from a bad line).
  StepMetrics read(const Json& line);

 private:
  Json m_carried = Json::object();
};

enum class RunOpenMode { New, Overwrite, Resume };

// What a folder holds, as the rules above see it (nothing is created or changed).
struct RunFolderInfo {
  bool exists = false;
  bool holds_run = false;  // run.lock and a run's files
  bool in_use = false;     // run.lock is held by a writer
  std::string status;      // summary.json's "status" ("" when there is none or it is unreadable)
  std::string foreign;     // the first entry (by name) that is not a run's own; "" when none
  std::string link;        // the first run file (or run.lock) that is a symbolic link; "" when none
};
RunFolderInfo inspect_run_folder(const std::string& dir);

// Overwrite's clearing on its own, for a caller that asks the user first and then starts a New run
// (the app's overwrite dialog): locks `dir`, checks Overwrite's rules and removes the run's own
// files (run.lock stays). Throws Error like RunRecord's constructor.
void clear_run_folder(const std::string& dir);

// A name of a run's own file (in a folder marked by run.lock): config.json, metrics.jsonl,
// steps.bin, summary.json, model.safetensors, model.quant.safetensors, compression.json, notes.json (tags and
// notes: train/run_notes.h), run.lock, and the
// temporary "<name>.part" of each. Resume's checkpoint files belong in this list too.
bool is_run_file(const std::string& name);

class RunRecord {
 public:
  // Opens (creating it and its parents when missing) the folder `dir` under `mode`'s rules and
  // locks it; writes config.json (New, Overwrite). Throws Error naming the folder (and the file or
  // link at fault) and what to do instead.
  RunRecord(const std::string& dir, const Config& config, RunOpenMode mode = RunOpenMode::New);
  ~RunRecord();  // releases the lock
  RunRecord(const RunRecord&) = delete;
  RunRecord& operator=(const RunRecord&) = delete;

  // Reopens the folder of a run to continue it after step `step` (its checkpoint) under Resume's
  // rules: metrics.jsonl is cut after that step's line (truncate_metrics, train/run_checkpoint.h:
  // later lines and a torn last line go), summary.json of an earlier stop is removed, config.json
  // is kept as it is, and append() continues the file.
  struct ResumeAt {
    long step = 0;
  };
  RunRecord(const std::string& dir, ResumeAt at);
  // After RunRecord(dir, ResumeAt): the step of the last metrics line kept (below at.step when the
  // file had lost lines, e.g. after a power cut); 0 for a new record.
  long resumed_metrics_step() const { return m_resumed_metrics_step; }
  const std::string& dir() const { return m_dir; }
  // A step: its per-step scalars into steps.bin (in blocks: train/step_columns.h), and a line of
  // metrics.jsonl when it carries more (MetricsLineWriter::extras_line). Every write is checked;
  // throws Error (path and reason) when one fails, leaving what was written before it whole.
  void append(const StepMetrics& m);
  // Writes the steps held in memory (steps.bin's last block); the trainer calls it before a
  // checkpoint so that the record never ends before the checkpoint's step. Throws like append.
  void flush();
  // flush(), then summary.json atomically (written even when flush() fails, whose Error is thrown
  // after it); throws Error (path and reason).
  void write_summary(const RunSummary& s);
  std::string weights_path() const { return m_dir + "/model.safetensors"; }

  // A fresh folder name under `root`: <root>/<YYYYmmdd-HHMMSS>-<tag>, made unique with -2, -3...
  static std::string default_dir(const std::string& root, const std::string& tag);

 private:
  std::string m_dir;
  int m_lock_fd = -1;
  std::unique_ptr<AppendFile> m_metrics;
  std::unique_ptr<StepColumnsWriter> m_columns;
  MetricsLineWriter m_lines;
  long m_resumed_metrics_step = 0;
  void open(const Config* config, RunOpenMode mode, long resume_step);
};

// Reads a run folder back: config, every metrics line that parses, summary (when present), and a
// warning for each thing skipped. Throws Error when the folder has no readable config.json.
struct LoadedRun {
  std::string dir;
  Json config;
  std::vector<StepMetrics> steps;
  Json summary;                       // null while a run is unfinished (or when unreadable: warned)
  std::vector<std::string> warnings;  // e.g. "runs/x/metrics.jsonl line 17: not valid JSON; skipped"
};
// max_rows > 0: a thinned read for plots (steps.bin: parse_step_columns' StepRowsWanted, every
// metrics.jsonl line kept; a record of lines alone: parse_metrics_jsonl's max_rows); 0: every row.
LoadedRun load_run(const std::string& dir, size_t max_rows = 0);

// The bytes of a metrics.jsonl: a row for every line that is a metrics object. A torn last line
// (no newline after it: a run killed mid-write) is skipped silently; any other bad line is skipped
// with a warning "<origin> line N: <what is wrong>; skipped". Blank lines are ignored. Never throws
// for the bytes' sake (the fuzz target tests/fuzz/fuzz_metrics.cpp holds it to that).
struct MetricsRead {
  std::vector<StepMetrics> steps;
  std::vector<std::string> warnings;
};
MetricsRead parse_metrics_jsonl(std::string_view bytes, const std::string& origin);
// A thinned read, for plots of long runs: at most about `max_rows` rows. A file of more lines is cut
// into max_rows / 2 buckets of consecutive lines, and each bucket gives its lowest- and
// highest-loss steps (min/max per bucket, so a plot of them shows every spike); every line with an
// event, validation, system or kernel values, a slow field other than lr, or no finite loss is read
// too. Only those lines are parsed in full (a first pass reads each line's loss with from_chars);
// bench_record_load times it on an hour's steps. A bad line passed over is not warned about
// (the whole read names it). A file of max_rows lines or fewer reads whole.
MetricsRead parse_metrics_jsonl(std::string_view bytes, const std::string& origin, size_t max_rows);

// The bytes of a summary.json as a JSON object whose known fields have their types: "status",
// "message", "device", "precision" strings; the numbers numbers or null (null: no value, e.g. the
// test accuracy of a diverged run); "peak_bytes" an object of numbers. A field of another type is
// dropped with a warning; bytes that are not a JSON object give null and a warning.
Json parse_summary_json(std::string_view bytes, const std::string& origin, std::vector<std::string>& warnings);

}  // namespace trainlab
