#include "train/eta.h"

#include <cmath>
#include <cstdio>

namespace trainlab {

double eta_seconds(long step, long total_steps, double elapsed_s) {
  if (step <= 0 || total_steps <= 0 || !std::isfinite(elapsed_s)) return NAN;
  const double frac = static_cast<double>(step) / static_cast<double>(total_steps);
  return elapsed_s * (1.0 - frac) / frac;
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace trainlab
