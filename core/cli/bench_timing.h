// The timing loop both benchmark cases share: `warmup` untimed steps, then the mean wall time of
// `steps` whole training steps (the backend's step capture on), synchronised at both ends so
// asynchronous devices are timed properly. Peaks in the ledger restart after the warm-up.
#pragma once
#include <chrono>
#include <string>

#include "backend/backend.h"
#include "train/training_step.h"

namespace trainlab::cli {

inline double seconds_per_training_step(Backend& be, TrainingStep& step, float lr, const std::string& key, long warmup,
                                        long steps) {
  StepScalars sc;
  sc.lr = lr;
  long t = 0;
  auto one = [&] {
    sc.step = static_cast<float>(++t);
    be.set_step_scalars(sc);
    be.run_step(key, [&] { step.full_step(); });
  };
  for (long i = 0; i < warmup; ++i) one();
  be.synchronize();
  be.ledger().reset_peaks();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < steps; ++i) one();
  be.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(steps);
}

}  // namespace trainlab::cli
