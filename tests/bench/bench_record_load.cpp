// Benchmark (not a test): how long a long run's record takes to open. Writes a metrics.jsonl of
// `steps` steps (default 2,520,000: an hour at the 700 steps a second) through the run
// record's own writer (MetricsLineWriter: per-step scalars every line, slow fields where they
// change, a system sample every 700 steps, a validation every 1,000), then reads it back as the
// window does (load_run with 100,000 rows: thinned for plots) and whole (reports, CSV), and prints
// one JSON line: steps, bytes, bytes a step, seconds of each read and rows read.
//   bench_record_load [steps] [folder]     (the folder is kept when given)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "train/run_record.h"

using namespace trainlab;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 2520000;
  const bool keep = argc > 2;
  const std::string dir = keep ? argv[2] : (fs::temp_directory_path() / "trainlab-bench-record").string();
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << "{\"model\": {\"name\": \"digits-mlp\"}}\n";
  {
    std::ofstream out(dir + "/metrics.jsonl", std::ios::trunc);
    MetricsLineWriter w;
    std::mt19937 rng(1);
    std::normal_distribution<double> noise(0.0, 0.05);
    StepMetrics m;
    m.precision = "fp32";
    m.lr = 1e-3;
    m.mem_current.by_category[0] = 340008;
    m.mem_current.by_category[1] = 340008;
    m.mem_current.by_category[2] = 680016;
    m.mem_current.by_category[3] = 133120;
    m.mem_peak = m.mem_predicted = m.mem_current;
    for (long s = 1; s <= steps; ++s) {
      m.step = s;
      m.epoch = s / 22.45;
      m.loss = static_cast<float>(2.3 * std::exp(-s / 3000.0) + 0.02 + std::abs(noise(rng)));
      m.train_accuracy = std::min(1.0, 0.1 + s / 2000.0) - (s % 7) / 64.0;
      m.step_ms = 1.2 + std::abs(noise(rng));
      m.samples_per_s = 64 / (m.step_ms / 1e3);
      m.wall_s = s * 1.43e-3;
      m.system = s % 700 == 0 ? std::optional<SystemSample>(SystemSample{37.5, {}, {}, {}, {}, {}}) : std::nullopt;
      m.val_loss = s % 1000 == 0 ? std::optional<double>(m.loss * 1.1) : std::nullopt;
      m.val_accuracy = s % 1000 == 0 ? std::optional<double>(0.97) : std::nullopt;
      out << w.line(m) << '\n';
    }
  }
  const double bytes = static_cast<double>(fs::file_size(dir + "/metrics.jsonl"));
  using Clock = std::chrono::steady_clock;
  auto time = [&](size_t max_rows, size_t& rows) {
    const auto t0 = Clock::now();
    rows = load_run(dir, max_rows).steps.size();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  size_t thinned_rows = 0, full_rows = 0;
  const double thinned = time(100000, thinned_rows);
  const double full = time(0, full_rows);
  std::printf(
      "{\"bench\": \"record_load\", \"steps\": %ld, \"bytes\": %.0f, \"bytes_per_step\": %.1f, "
      "\"thinned_s\": %.3f, \"thinned_rows\": %zu, \"full_s\": %.3f, \"full_rows\": %zu}\n",
      steps, bytes, bytes / steps, thinned, thinned_rows, full, full_rows);
  if (!keep) fs::remove_all(dir);
  return 0;
}
