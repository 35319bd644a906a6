// Dynamic loss scaling for fp16: the loss (hence every gradient) is multiplied by S before
// backward so that small gradients do not underflow; the optimizer divides by S. When any
// gradient is inf or NaN the update is skipped and S halves; after `growth_interval` good steps in
// a row S doubles.
#pragma once
#include "config/optim_options.h"

namespace trainlab {

class LossScaler {
 public:
  LossScaler(double init_scale = 65536.0, long growth_interval = 2000, bool enabled = true);
  // From the run's options: scaling only in fp16 runs (fp16 true) and when o.enabled.
  LossScaler(const LossScaleOptions& o, bool fp16) : LossScaler(o.init, o.growth_interval, fp16 && o.enabled) {}
  double scale() const { return m_enabled ? m_scale : 1.0; }
  bool enabled() const { return m_enabled; }
  // Records the outcome of a step; returns true when the update should be applied.
  bool update(bool grads_finite);
  long skipped() const { return m_skipped; }
  long good_steps() const { return m_good; }
  long consecutive_skips() const { return m_consecutive_skips; }

  // What a checkpoint keeps (train/run_checkpoint.h): the scale and the three counters.
  struct State {
    double scale = 65536.0;
    long good = 0, skipped = 0, consecutive_skips = 0;
  };
  State state() const { return {m_scale, m_good, m_skipped, m_consecutive_skips}; }
  // Throws Error naming the field when the scale is not finite and > 0, or a counter is negative
  // or `good` is not below growth_interval.
  void restore(const State& s);

 private:
  double m_scale;
  long m_growth_interval;
  bool m_enabled;
  long m_good = 0;
  long m_skipped = 0;
  long m_consecutive_skips = 0;
};

}  // namespace trainlab
