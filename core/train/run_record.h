// RunRecord: one folder per run. config.json (the full resolved config), metrics.jsonl (one JSON
// object per step, appended and flushed as it goes, so a crash loses nothing written),
// summary.json, and model.safetensors (names and layouts of the PyTorch peer's module).
// A run resumed from its checkpoint (train/run_checkpoint.h) reopens its folder: RunRecord(dir,
// ResumeAt{step}) keeps config.json, cuts metrics.jsonl back to the checkpoint's step and appends.
#pragma once
#include <fstream>
#include <string>
#include <vector>

#include "nn/model.h"
#include "config/config.h"
#include "train/metrics.h"

namespace trainlab {

class RunRecord {
 public:
  // Creates `dir` (and parents). Throws Error naming the folder when it cannot be written.
  RunRecord(const std::string& dir, const Config& config);
  // Reopens the folder of a run to continue it after step `step` (its checkpoint): metrics.jsonl
  // is cut after that step's line (truncate_metrics, train/run_checkpoint.h: later lines and a torn
  // last line go), summary.json of an earlier stop is removed, config.json is kept as it is, and
  // append() continues the file. Throws Error naming the folder or file that cannot be written.
  struct ResumeAt {
    long step = 0;
  };
  RunRecord(const std::string& dir, ResumeAt at);
  // After RunRecord(dir, ResumeAt): the step of the last metrics line kept (below at.step when the
  // file had lost lines, e.g. after a power cut); 0 for a new record.
  long resumed_metrics_step() const { return m_resumed_metrics_step; }
  const std::string& dir() const { return m_dir; }
  void append(const StepMetrics& m);
  void write_summary(const RunSummary& s);
  std::string weights_path() const { return m_dir + "/model.safetensors"; }

  // A fresh folder name under `root`: <root>/<YYYYmmdd-HHMMSS>-<tag>, made unique with -2, -3...
  static std::string default_dir(const std::string& root, const std::string& tag);

 private:
  std::string m_dir;
  std::ofstream m_metrics;
  long m_resumed_metrics_step = 0;
};

// Reads a run folder back: config, every metrics line, summary (when present).
struct LoadedRun {
  std::string dir;
  Json config;
  std::vector<StepMetrics> steps;
  Json summary;  // null while a run is unfinished
};
LoadedRun load_run(const std::string& dir);

}  // namespace trainlab
