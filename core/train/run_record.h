// RunRecord: one folder per run. config.json (the full resolved config), metrics.jsonl (one JSON
// object per step, appended and flushed as it goes, so a crash loses nothing written),
// summary.json, and model.safetensors (names and layouts of the PyTorch peer's module).
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
  const std::string& dir() const { return m_dir; }
  void append(const StepMetrics& m);
  void write_summary(const RunSummary& s);
  std::string weights_path() const { return m_dir + "/model.safetensors"; }

  // A fresh folder name under `root`: <root>/<YYYYmmdd-HHMMSS>-<tag>, made unique with -2, -3...
  static std::string default_dir(const std::string& root, const std::string& tag);

 private:
  std::string m_dir;
  std::ofstream m_metrics;
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
