// Learning-rate schedules: constant, and linear warm-up followed by a cosine decay to min_lr.
#pragma once
#include <string>

namespace trainlab {

struct LrSchedule {
  std::string name = "constant";  // "constant" | "warmup-cosine"
  double base_lr = 1e-3;
  long warmup_steps = 0;
  long total_steps = 1;
  double min_lr = 0.0;

  // lr for optimizer step `step` (0-based).
  double at(long step) const;
};

}  // namespace trainlab
