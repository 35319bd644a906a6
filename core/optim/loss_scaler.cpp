#include "optim/loss_scaler.h"

#include "util/error.h"

namespace trainlab {

LossScaler::LossScaler(double init_scale, long growth_interval, bool enabled)
    : m_scale(init_scale), m_growth_interval(growth_interval), m_enabled(enabled) {
  if (!(init_scale > 0)) throw Error("precision.loss_scale.init must be > 0");
  if (growth_interval < 1) throw Error("precision.loss_scale.growth_interval must be >= 1");
}

bool LossScaler::update(bool finite) {
  if (!m_enabled) return true;
  if (!finite) {
    m_scale *= 0.5;
    m_good = 0;
    ++m_skipped;
    ++m_consecutive_skips;
    return false;
  }
  m_consecutive_skips = 0;
  if (++m_good >= m_growth_interval) {
    m_scale *= 2.0;
    m_good = 0;
  }
  return true;
}

}  // namespace trainlab
