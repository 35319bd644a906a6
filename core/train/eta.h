// Time left of a run, and a duration as people read it: the CLI's progress line and the app's
// plot panel show the same numbers from these.
#pragma once
#include <string>

namespace trainlab {

// Seconds left after `step` of `total_steps` that took `elapsed_s` (the pace so far kept up);
// NaN when it cannot be known (no step yet, no total).
double eta_seconds(long step, long total_steps, double elapsed_s);

// "00:42", "12:05", "1:02:03"; "--:--" for NaN or a negative value.
std::string duration_text(double seconds);

}  // namespace trainlab
