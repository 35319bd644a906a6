#include "cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>

#include "train/eta.h"

namespace trainlab::cli {

namespace {
// A loss or accuracy as the progress shows it: "no value" where it is NaN or infinite (the step
// at which a run diverges), never printf's "nan".
std::string metric_text(double v) {
  if (!std::isfinite(v)) return "no value";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}
}  // namespace

Progress::Progress(bool quiet, std::string unit)
    : m_tty(isatty(fileno(stderr)) != 0), m_quiet(quiet), m_last(std::chrono::steady_clock::now()), m_unit(std::move(unit)) {}

void Progress::update(const StepMetrics& m) {
  if (m.val_accuracy) m_last_val_acc = *m.val_accuracy;
  if (m_quiet) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - m_last).count();
  const double frac = m.total_steps ? static_cast<double>(m.step) / static_cast<double>(m.total_steps) : 0.0;
  const double eta = eta_seconds(m.step, m.total_steps, m.wall_s);
  char val[48] = "";
  if (m_last_val_acc >= 0) std::snprintf(val, sizeof val, "  test acc %.4f", m_last_val_acc);
  // A step whose loss is not finite is always shown: the run diverges there (or, with fp16 loss
  // scaling, skips the step).
  const bool diverging = !std::isfinite(m.loss);
  if (m_tty) {
    if (since < 0.1 && m.step != m.total_steps && m.event.empty() && !diverging) return;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '-');
    std::fprintf(stderr, "\r[%s] %3.0f%%  step %ld/%ld  epoch %.2f  loss %s%s  %.0f %s  ETA %s   ", bar.c_str(),
                 frac * 100, m.step, m.total_steps, m.epoch, metric_text(m.loss).c_str(), val, m.samples_per_s,
                 m_unit.c_str(), duration_text(eta).c_str());
    m_drawn = true;
  } else {
    // Plain lines: at most one every 2 s, plus every eval, event and the last step.
    if (since < 2.0 && !m.val_accuracy && m.event.empty() && m.step != m.total_steps && m.step != 1 && !diverging)
      return;
    std::fprintf(stderr, "step %ld/%ld  epoch %.2f  loss %s  train acc %s%s  lr %.3g  %.0f %s  ETA %s%s%s\n",
                 m.step, m.total_steps, m.epoch, metric_text(m.loss).c_str(), metric_text(m.train_accuracy).c_str(), val,
                 m.lr, m.samples_per_s, m_unit.c_str(), duration_text(eta).c_str(), m.event.empty() ? "" : "  event: ", m.event.c_str());
  }
  if (!m.event.empty() && m_tty) std::fprintf(stderr, "\n  %s\n", m.event.c_str());
  m_last = now;
  m_last_step = m.step;
}

void Progress::notice(const std::string& line) {
  if (m_drawn) std::fprintf(stderr, "\n");
  m_drawn = false;
  std::fprintf(stderr, "notice: %s\n", line.c_str());
}

void Progress::finish() {
  if (m_drawn) std::fprintf(stderr, "\n");
  m_drawn = false;
}

}  // namespace trainlab::cli
