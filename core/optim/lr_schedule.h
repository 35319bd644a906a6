// Learning-rate schedules: constant, and linear warm-up followed by a cosine decay to min_lr.
#pragma once
#include <string>

#include "config/optim_options.h"

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

// The schedule of a run of total_steps optimizer steps peaking at base_lr (optim.lr); throws
// Error naming the known schedules for an unknown name.
LrSchedule make_lr_schedule(const ScheduleOptions& o, double base_lr, long total_steps);

}  // namespace trainlab
