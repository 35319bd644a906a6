#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace trainlab {

double LrSchedule::at(long step) const {
  if (name == "constant") return step < warmup_steps ? base_lr * (step + 1) / warmup_steps : base_lr;
  // warmup-cosine: lr rises linearly to base_lr over warmup_steps, then follows half a cosine
  // from base_lr down to min_lr at total_steps.
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const long decay = std::max(1L, total_steps - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay), 0.0, 1.0);
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

LrSchedule make_lr_schedule(const ScheduleOptions& o, double base_lr, long total_steps) {
  if (o.name != "constant" && o.name != "warmup-cosine")
    throw Error("schedule.name '" + o.name + "': expected constant or warmup-cosine");
  LrSchedule s;
  s.name = o.name;
  s.base_lr = base_lr;
  s.warmup_steps = o.warmup_steps;
  s.total_steps = total_steps;
  s.min_lr = o.min_lr;
  return s;
}

}  // namespace trainlab
