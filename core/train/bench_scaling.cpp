// The scaling benchmark (train/benchmark.h, bench_scaling): the same digits training through
// trainlab-cli train at one rank and at N, each a process of its own (N through mpirun, as
// `train --ranks N` starts them), timed from their run records.
#include <cstdlib>
#include <filesystem>

#include "config/dist_options.h"
#include "dist/launch.h"
#include "train/benchmark.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab {

namespace {

struct TimedRun {
  double ms_per_step = 0.0;  // mean step_ms of steps 2.. (rank 0's clock)
  double efficiency_estimate = 0.0;
};

TimedRun timed_run(const std::string& device, const std::string& strategy, int ranks, long steps,
                   const std::string& out) {
  std::vector<std::string> argv{dist::self_executable(), "train", "--quiet", "--device", device, "--model", "digits-mlp",
                                "--steps", std::to_string(steps), "--batch", std::to_string(kScalingBatch),
                                "--seed", "1", "--out", out, "--ranks", std::to_string(ranks),
                                "--set", "run.save_weights=false", "--set", "train.eval_every=0",
                                "--set", "dist.strategy=" + (ranks > 1 ? strategy : std::string("ddp"))};
  if (const int code = dist::run_and_wait(argv); code != 0)
    throw Error("the scaling benchmark's run at " + std::to_string(ranks) + " rank(s) ended with status " +
                std::to_string(code) + " (its run record: " + out + ")");
  const LoadedRun run = load_run(out);
  TimedRun t;
  long n = 0;
  for (const StepMetrics& m : run.steps)
    if (m.step > 1) {
      t.ms_per_step += m.step_ms;
      ++n;
    }
  if (n == 0) throw Error("the scaling benchmark needs at least 2 steps (--steps)");
  t.ms_per_step /= static_cast<double>(n);
  DistTimeTotals totals;
  for (const StepMetrics& m : run.steps) totals.add(m);
  t.efficiency_estimate = totals.efficiency_estimate();
  return t;
}

}  // namespace

Json bench_scaling(const std::string& device, const std::string& strategy, int ranks, long steps) {
  dist_strategy_from_name(strategy);  // a mode that is not a strategy fails here, naming the four
  if (ranks < 2) throw Error("bench --case scaling: --ranks " + std::to_string(ranks) + ": expected 2 or more");
  if (kScalingBatch % ranks != 0)
    throw Error("bench --case scaling: --ranks " + std::to_string(ranks) + " does not divide the global batch of " +
                std::to_string(kScalingBatch));
  char dir[] = "/tmp/trainlab-scaling-XXXXXX";
  if (!mkdtemp(dir)) throw Error("cannot create a temporary folder for the scaling benchmark's run records");
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  const TimedRun one = timed_run(device, strategy, 1, steps, std::string(dir) + "/one");
  const TimedRun many = timed_run(device, strategy, ranks, steps, std::string(dir) + "/many");
  const double speedup = one.ms_per_step / many.ms_per_step;
  return {{"case", "scaling"},
          {"mode", strategy},
          {"device", device},
          {"ranks", ranks},
          {"global_batch", kScalingBatch},
          {"steps", steps},
          {"ms_per_step_1", one.ms_per_step},
          {"ms_per_step_n", many.ms_per_step},
          {"speedup", speedup},
          {"scaling_efficiency", speedup / ranks},
          {"efficiency_estimate", many.efficiency_estimate}};
}

}  // namespace trainlab
