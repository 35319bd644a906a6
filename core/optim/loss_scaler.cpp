#include "optim/loss_scaler.h"

#include <cmath>
#include <string>

#include "util/error.h"

namespace trainlab {

LossScaler::LossScaler(double init_scale, long growth_interval, bool enabled)
    : m_scale(init_scale), m_growth_interval(growth_interval), m_enabled(enabled) {
  if (!(init_scale > 0)) throw Error("precision.loss_scale.init must be > 0");
  if (growth_interval < 1) throw Error("precision.loss_scale.growth_interval must be >= 1");
}

void LossScaler::restore(const State& s) {
  if (!std::isfinite(s.scale) || !(s.scale > 0)) throw Error("loss scaler state: scale must be a finite number > 0");
  if (s.good < 0 || s.good >= m_growth_interval)
    throw Error("loss scaler state: good steps must be in [0, " + std::to_string(m_growth_interval) +
                ") (precision.loss_scale.growth_interval)");
  if (s.skipped < 0 || s.consecutive_skips < 0 || s.consecutive_skips > s.skipped)
    throw Error("loss scaler state: skipped steps must be >= 0 and at least the consecutive skips");
  m_scale = s.scale;
  m_good = s.good;
  m_skipped = s.skipped;
  m_consecutive_skips = s.consecutive_skips;
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
