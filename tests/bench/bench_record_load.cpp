// Benchmark (not a test): how long a long run's record takes to open. Writes a record of `steps`
// steps (default 2,000,000: an hour of the default digits run at 555 steps a second on the CPU)
// through RunRecord itself (steps.bin's column blocks, metrics.jsonl lines for step 1, a system
// sample every 555 steps and a validation every 1,000), then reads it back as the window does
// (load_run with 100,000 rows: thinned for plots, main_window.cpp's kPlotRows) and whole (reports,
// CSV), and prints one JSON line: steps, bytes of each file, bytes a step, seconds of each read
// and rows read.
// Each read also reports its CPU seconds (std::clock: this process's CPU time), which a machine
// shared with other work does not inflate the way it inflates the wall-clock seconds.
//   bench_record_load [steps] [folder]     (the folder is kept when given)
//   bench_record_load 0 folder             (reads the record already in the folder, writes nothing)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>

#include "train/run_record.h"

using namespace trainlab;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 2000000;
  const bool keep = argc > 2;
  const std::string dir = keep ? argv[2] : (fs::temp_directory_path() / "trainlab-bench-record").string();
  if (!keep) fs::remove_all(dir);  // a folder given must be new or empty (RunRecord's rules)
  if (steps > 0) {
    Config config;
    config.set("run.out", dir);
    RunRecord record(dir, config);
    std::mt19937 rng(1);
    std::normal_distribution<double> noise(0.0, 0.05);
    StepMetrics m;
    m.precision = "fp32";
    m.lr = 1e-4;
    m.mem_current.by_category[0] = 340008;
    m.mem_current.by_category[1] = 340008;
    m.mem_current.by_category[2] = 680016;
    m.mem_current.by_category[3] = 133120;
    m.mem_peak = m.mem_predicted = m.mem_current;
    for (long s = 1; s <= steps; ++s) {
      m.step = s;
      m.epoch = s / 44.0;
      m.loss = static_cast<float>(2.3 * std::exp(-s / 3000.0) + 0.02 + std::abs(noise(rng)));
      m.train_accuracy = std::min(1.0, 0.1 + s / 2000.0) - (s % 7) / 32.0;
      m.step_ms = 1.2 + std::abs(noise(rng));
      m.samples_per_s = 32 / (m.step_ms / 1e3);
      m.wall_s = s / 555.0;
      m.system = s % 555 == 0 ? std::optional<SystemSample>(SystemSample{37.5, {}, {}, {}, {}, {}}) : std::nullopt;
      m.val_loss = s % 1000 == 0 ? std::optional<double>(m.loss * 1.1) : std::nullopt;
      m.val_accuracy = s % 1000 == 0 ? std::optional<double>(0.97) : std::nullopt;
      record.append(m);
    }
  }
  const double lines = static_cast<double>(fs::file_size(dir + "/metrics.jsonl"));
  const double columns = static_cast<double>(fs::file_size(dir + "/steps.bin"));
  const double bytes = lines + columns;
  using Clock = std::chrono::steady_clock;
  double cpu = 0;
  auto time = [&](size_t max_rows, size_t& rows) {
    const auto t0 = Clock::now();
    const std::clock_t c0 = std::clock();
    rows = load_run(dir, max_rows).steps.size();
    cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  size_t thinned_rows = 0, full_rows = 0;
  const double thinned = time(100000, thinned_rows);
  const double thinned_cpu = cpu;
  const double full = time(0, full_rows);
  const double full_cpu = cpu;
  std::printf(
      "{\"bench\": \"record_load\", \"steps\": %ld, \"bytes\": %.0f, \"metrics_jsonl_bytes\": %.0f, "
      "\"steps_bin_bytes\": %.0f, \"bytes_per_step\": %.1f, \"thinned_s\": %.3f, \"thinned_cpu_s\": %.3f, "
      "\"thinned_rows\": %zu, \"full_s\": %.3f, \"full_cpu_s\": %.3f, \"full_rows\": %zu}\n",
      static_cast<long>(full_rows), bytes, lines, columns, bytes / static_cast<double>(full_rows), thinned, thinned_cpu,
      thinned_rows, full, full_cpu, full_rows);
  if (!keep) fs::remove_all(dir);
  return 0;
}
