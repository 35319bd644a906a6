// The compression sweep with training points: compress/sweep.h's run_sweep (which sits below
// train/ and so takes its training runs as a callback) with the trainer behind that callback. A
// point's training run is the baseline config with the point's keys set, run by Trainer as
// `trainlab-cli train` would run it. `trainlab-cli sweep` calls this and prints.
#pragma once
#include "compress/sweep.h"
#include "config/config.h"

namespace trainlab {

// `base` is the baseline's config (model, device and any --set keys); o's seed, batch,
// calibration batches and include_output are taken from it. Throws Error for a bad config or an
// unusable device before anything trains.
SweepTable run_training_sweep(const Config& base, SweepOptions o, const SweepLog& log);

}  // namespace trainlab
