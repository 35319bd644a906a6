// Progress display for trainlab-cli train: a bar with ETA on a terminal, plain periodic lines
// otherwise (logs, CI).
#pragma once
#include <chrono>
#include <string>

#include "train/metrics.h"

namespace trainlab::cli {

class Progress {
 public:
  // unit: what samples_per_s counts, as the window names it ("tokens/s" for char-gpt, whose
  // trainer counts tokens; "samples/s" otherwise).
  Progress(bool quiet, std::string unit);
  void update(const StepMetrics& m);
  void notice(const std::string& line);
  void finish();

 private:
  bool m_tty;
  bool m_quiet;
  bool m_drawn = false;
  std::chrono::steady_clock::time_point m_last;
  std::string m_unit;
  long m_last_step = 0;
  double m_last_val_acc = -1;
};

}  // namespace trainlab::cli
