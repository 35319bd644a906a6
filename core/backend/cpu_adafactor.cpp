// CpuBackend::adafactor_step (backend.h states the numerics). Per parameter: the gradient in fp32
// (workspace slot 0, converted when 16-bit), the second-moment statistics updated, then two passes
// over the elements: RMS of the unclipped update, then the update itself. Sums in double.
#include <algorithm>
#include <cmath>

#include "backend/cpu_backend.h"
#include "backend/cpu_numeric.h"
#include "backend/cpu_panels.h"
#include "util/error.h"

namespace trainlab {

namespace {

double mean_square(const float* x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return n ? s / static_cast<double>(n) : 0.0;
}

// The factored statistics of g [R, C]: row = b row + (1-b) mean_j u, col = b col + (1-b) mean_i u
// (u = g^2 + eps1); then rfac_i = 1 / sqrt(row_i / mean(row)) into rfac, cfac_j = 1 / sqrt(col_j)
// into cfac.
void factored_stats(const float* g, int64_t R, int64_t C, float beta, float eps1, float* row, float* col, float* rfac,
                    float* cfac) {
  std::fill(cfac, cfac + C, 0.0f);  // column sums first
  for (int64_t i = 0; i < R; ++i) {
    const float* gr = g + i * C;
    double rs = 0.0;
    for (int64_t j = 0; j < C; ++j) {
      const float u = gr[j] * gr[j] + eps1;
      rs += u;
      cfac[j] += u;
    }
    row[i] = beta * row[i] + (1.0f - beta) * static_cast<float>(rs / static_cast<double>(C));
  }
  double row_sum = 0.0;
  for (int64_t i = 0; i < R; ++i) row_sum += row[i];
  const float row_mean = static_cast<float>(row_sum / static_cast<double>(R));
  for (int64_t i = 0; i < R; ++i) rfac[i] = 1.0f / std::sqrt(row[i] / row_mean);
  for (int64_t j = 0; j < C; ++j) {
    col[j] = beta * col[j] + (1.0f - beta) * (cfac[j] / static_cast<float>(R));
    cfac[j] = 1.0f / std::sqrt(col[j]);
  }
}

// The unclipped update of element e (factored: g * rfac[row] * cfac[col]; else g / sqrt(v)).
struct UpdateOf {
  const float* g;
  const float* rfac;
  const float* cfac;
  const float* v;
  int64_t C;
  float operator()(int64_t e) const { return v ? g[e] / std::sqrt(v[e]) : g[e] * rfac[e / C] * cfac[e % C]; }
};

}  // namespace

void CpuBackend::adafactor_step(std::span<ParamSlot> params, std::span<const FactoredState> state,
                                const AdafactorHyper& h) {
  if (state.size() != params.size()) throw Error("adafactor_step: one state per parameter expected");
  const float t = m_scalars.step, unscale = m_scalars.grad_unscale;
  const float beta = 1.0f - std::pow(t, -h.decay_rate);
  const float rel = std::min(1e-2f, 1.0f / std::sqrt(t));
  for (size_t pi = 0; pi < params.size(); ++pi) {
    ParamSlot& p = params[pi];
    const FactoredState& s = state[pi];
    const int64_t n = p.master->numel();
    const bool factored = s.rows > 0;
    if ((factored && (s.rows * s.cols != n || !s.row || !s.col)) || (!factored && (!s.v || s.v->numel() != n)) ||
        (h.beta1 > 0.0f && (!s.m || s.m->numel() != n)))
      throw Error("adafactor_step: state of parameter " + std::to_string(pi) + " does not match it");
    float* g = slot_buffer(0, static_cast<size_t>(n));
    cpu::to_f32(p.grad->dtype(), p.grad->raw(), g, static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) g[e] *= unscale;
    float* w = p.master->data<float>();
    UpdateOf upd{g, nullptr, nullptr, nullptr, 1};
    if (factored) {
      float* fac = slot_buffer(2, static_cast<size_t>(s.rows + s.cols));
      factored_stats(g, s.rows, s.cols, beta, h.eps1, s.row->data<float>(), s.col->data<float>(), fac, fac + s.rows);
      upd = UpdateOf{g, fac, fac + s.rows, nullptr, s.cols};
    } else {
      float* v = s.v->data<float>();
      for (int64_t e = 0; e < n; ++e) v[e] = beta * v[e] + (1.0f - beta) * (g[e] * g[e] + h.eps1);
      upd.v = v;
    }
    double sq = 0.0;
    for (int64_t e = 0; e < n; ++e) {
      const double u = upd(e);
      sq += u * u;
    }
    const float inv_clip = 1.0f / std::max(1.0f, static_cast<float>(std::sqrt(sq / static_cast<double>(n))) / h.clip);
    const float a = h.relative_step
                        ? rel * std::max(h.eps2, static_cast<float>(std::sqrt(mean_square(w, static_cast<size_t>(n)))))
                        : m_scalars.lr;
    const float decay = p.decay ? 1.0f - a * h.weight_decay : 1.0f;
    float* m = h.beta1 > 0.0f ? s.m->data<float>() : nullptr;
    const float* mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    for (int64_t e = 0; e < n; ++e) {
      float u = upd(e) * inv_clip;
      if (m) u = m[e] = h.beta1 * m[e] + (1.0f - h.beta1) * u;
      const float wi = w[e] * decay - a * u;
      w[e] = mask ? wi * mask[e] : wi;
    }
    if (p.value && p.value->defined() && !p.value->same_storage(*p.master))
      cpu::from_f32(w, p.value->dtype(), p.value->raw(), static_cast<size_t>(n));
  }
}

}  // namespace trainlab
