#include "train/run_record.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "io/safetensors.h"
#include "train/run_checkpoint.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {
void write_json_file(const std::string& path, const Json& j) {
  const std::string tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(path + ": cannot write");
    out << j.dump(2) << "\n";
    if (!out) throw Error(path + ": write failed (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(path + ": cannot move into place (" + ec.message() + ")");
}
}  // namespace

RunRecord::RunRecord(const std::string& dir, const Config& config) : m_dir(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("run folder '" + dir + "' cannot be created (" + (ec ? ec.message() : "not a folder") +
                "); choose another with --out or run.out");
  const std::string probe = dir + "/metrics.jsonl";
  m_metrics.open(probe, std::ios::trunc);
  if (!m_metrics) throw Error("run folder '" + dir + "' is not writable; choose another with --out or run.out");
  write_json_file(dir + "/config.json", config.to_json());
}

RunRecord::RunRecord(const std::string& dir, ResumeAt at) : m_dir(dir) {
  const std::string metrics = dir + "/metrics.jsonl";
  m_resumed_metrics_step = truncate_metrics(metrics, at.step);
  m_metrics.open(metrics, std::ios::app);
  if (!m_metrics) throw Error("run folder '" + dir + "' is not writable: " + metrics + " cannot be opened to append");
  std::error_code ec;
  fs::remove(dir + "/summary.json", ec);
  if (ec) throw Error(dir + "/summary.json: cannot remove the summary of the stopped run (" + ec.message() + ")");
}

void RunRecord::append(const StepMetrics& m) {
  m_metrics << m.to_json().dump() << '\n';
  m_metrics.flush();
}

void RunRecord::write_summary(const RunSummary& s) { write_json_file(m_dir + "/summary.json", s.to_json()); }

std::string RunRecord::default_dir(const std::string& root, const std::string& tag) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string base = root + "/" + stamp + "-" + tag;
  std::string d = base;
  for (int i = 2; fs::exists(d); ++i) d = base + "-" + std::to_string(i);
  return d;
}

LoadedRun load_run(const std::string& dir) {
  LoadedRun r;
  r.dir = dir;
  std::ifstream c(dir + "/config.json");
  if (!c) throw Error(dir + ": not a run folder (no config.json)");
  try {
    c >> r.config;
  } catch (const std::exception& e) {
    throw Error(dir + "/config.json: not valid JSON (" + e.what() + ")");
  }
  std::ifstream m(dir + "/metrics.jsonl");
  std::string line;
  long n = 0;
  while (std::getline(m, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      r.steps.push_back(StepMetrics::from_json(Json::parse(line)));
    } catch (const std::exception&) {
      // A run killed mid-write can leave a partial last line: keep everything before it.
      break;
    }
  }
  std::ifstream s(dir + "/summary.json");
  if (s) {
    try {
      s >> r.summary;
    } catch (const std::exception&) {
      r.summary = nullptr;
    }
  }
  return r;
}

}  // namespace trainlab
