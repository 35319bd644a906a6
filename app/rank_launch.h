// A run over several ranks from the window (dist.ranks > 1): the ranks are processes, started
// through the same launcher as the command line's (trainlab-cli train --config FILE, which runs
// mpirun -np N of itself), and the window follows the run record that rank 0 writes: each new
// line of metrics.jsonl becomes a step for the plots, summary.json the end. Stop ends the
// launcher with SIGTERM (mpirun passes it on to the ranks, which stop at a step boundary); pause,
// resume and mid-run changes cannot reach the ranks (every rank would have to apply them at the
// same step), and say so.
#pragma once
#include <QString>
#include <atomic>
#include <functional>
#include <string>

#include "config/config.h"
#include "train/metrics.h"

namespace trainlab::app {

struct LaunchedRun {
  QString status = "failed";  // completed | stopped | diverged | failed
  QString message, run_dir;
};

// trainlab-cli beside the app (the build tree's core/ or the same bin/), else on the PATH; empty
// when none is found.
QString find_trainlab_cli();

// Runs `config` (run.out set) through trainlab-cli and follows its record until it ends; `stop`
// is polled. Blocks: call it on a worker thread.
LaunchedRun run_through_launcher(const Config& config, const std::function<void(const StepMetrics&)>& on_step,
                                 const std::atomic<bool>& stop);

}  // namespace trainlab::app
