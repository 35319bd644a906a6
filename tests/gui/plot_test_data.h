// Synthetic steps for the plot panel's tests and benchmark: a falling loss, a rising accuracy, a
// fixed learning rate, two memory categories, one validation point every `val_every` steps.
#pragma once
#include <cmath>
#include <memory>

#include "run_series.h"

namespace plot_test {

inline trainlab::StepMetrics fake_step(long i, long total = 1000000, long val_every = 1000) {
  trainlab::StepMetrics m;
  m.step = i;
  m.total_steps = total;
  m.loss = 2.3 * std::exp(-static_cast<double>(i) / (total / 5.0)) + 0.05 * std::sin(i * 0.01);
  m.train_accuracy = 1 - std::exp(-static_cast<double>(i) / (total / 10.0));
  m.lr = 1e-3;
  m.samples_per_s = 5e4 + static_cast<double>(i % 100);
  m.wall_s = 0.1 * static_cast<double>(i);
  m.precision = "fp32";
  m.mem_current.by_category[0] = 340000;
  m.mem_current.by_category[3] = 120000;
  m.mem_predicted.by_category[0] = 340000;
  if (val_every > 0 && i % val_every == 0) {
    m.val_loss = m.loss + 0.1;
    m.val_accuracy = m.train_accuracy;
  }
  return m;
}

// A run of `steps` fake steps named `name`.
inline std::shared_ptr<trainlab::app::RunSeries> fake_run(const QString& name, long steps, long total = 1000,
                                                          long val_every = 100) {
  auto r = std::make_shared<trainlab::app::RunSeries>();
  r->name = name;
  for (long i = 1; i <= steps; ++i) r->append(fake_step(i, total, val_every));
  return r;
}

}  // namespace plot_test
