// AWQ's scale search (compress/gptq.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "compress/gptq.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

namespace {
// s_j = a_j^alpha over the channels that fire, normalised by sqrt(max s * min s); 1 elsewhere.
std::vector<float> awq_scales(const std::vector<float>& mean_abs, double alpha) {
  std::vector<double> s(mean_abs.size(), 1.0);
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (size_t j = 0; j < s.size(); ++j)
    if (mean_abs[j] > 0.0f) {
      s[j] = std::pow(std::max(static_cast<double>(mean_abs[j]), 1e-4), alpha);
      lo = std::min(lo, s[j]);
      hi = std::max(hi, s[j]);
    }
  const double norm = hi > 0.0 ? std::sqrt(hi * lo) : 1.0;
  std::vector<float> out(s.size(), 1.0f);
  for (size_t j = 0; j < s.size(); ++j)
    if (mean_abs[j] > 0.0f) out[j] = static_cast<float>(s[j] / norm);
  return out;
}
}  // namespace

AwqResult awq_search(const float* w, int64_t rows, int64_t cols, const std::vector<float>& mean_abs,
                     const std::vector<double>& gram, int64_t samples, const QuantSpec& spec, int grid,
                     double fixed_alpha) {
  if (samples < 1 || static_cast<int64_t>(mean_abs.size()) != cols || gram.size() != static_cast<size_t>(cols * cols))
    throw Error("AWQ needs calibration inputs of the layer (" + std::to_string(cols) + " input channels)");
  if (grid < 1) throw Error("AWQ: the alpha grid needs at least one step");
  const int64_t n = rows * cols, group = spec.group_size(rows, cols);
  std::vector<float> scaled(static_cast<size_t>(n));
  AwqResult best;
  const bool fixed = fixed_alpha >= 0.0;
  for (int k = 0; k <= (fixed ? 1 : grid); ++k) {
    const double alpha = fixed ? (k == 0 ? 0.0 : fixed_alpha) : static_cast<double>(k) / grid;
    std::vector<float> s = awq_scales(mean_abs, alpha);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) scaled[static_cast<size_t>(r * cols + j)] = w[r * cols + j] * s[static_cast<size_t>(j)];
    fake_quantize_host(scaled.data(), scaled.data(), n, spec.bits, group);
    for (int64_t r = 0; r < rows; ++r)  // the effective weight Q(W diag(s)) diag(1/s)
      for (int64_t j = 0; j < cols; ++j) scaled[static_cast<size_t>(r * cols + j)] /= s[static_cast<size_t>(j)];
    const double e = output_error(w, scaled.data(), rows, cols, gram, samples);
    if (k == 0) best.rtn_error = e;
    if (k == 0 || e < best.error || fixed) {
      best.error = e;
      best.alpha = alpha;
      best.scales = std::move(s);
    }
  }
  return best;
}

QuantizedMatrix clip_quantize(const float* w, int64_t rows, int64_t cols, const std::vector<double>& gram,
                              const QuantSpec& spec) {
  QuantizedMatrix q = rtn_quantize(w, rows, cols, spec);
  if (spec.granularity == QuantGranularity::Tensor) return q;
  const int64_t g = q.group;
  const float qmax = static_cast<float>(spec.qmax());
  std::vector<double> d(static_cast<size_t>(g));
  std::vector<int8_t> codes(static_cast<size_t>(g));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += g) {
      const float* wg = w + r * cols + c0;
      float mx = 0.0f;
      for (int64_t i = 0; i < g; ++i) mx = std::max(mx, std::fabs(wg[i]));
      const size_t gi = static_cast<size_t>((r * cols + c0) / g);
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < 20; ++k) {  // k = 0 is round-to-nearest's scale
        float s = round_to(DType::F16, mx * static_cast<float>(1.0 - 0.025 * k) / qmax);
        if (!std::isfinite(s)) s = 65504.0f;
        for (int64_t i = 0; i < g; ++i) {
          const float c = s > 0.0f ? std::clamp(std::nearbyint(wg[i] / s), -qmax, qmax) : 0.0f;
          codes[static_cast<size_t>(i)] = static_cast<int8_t>(c);
          d[static_cast<size_t>(i)] = static_cast<double>(s) * c - wg[i];
        }
        double e = 0.0;  // d^T gram[c0:c0+g, c0:c0+g] d
        for (int64_t i = 0; i < g; ++i) {
          const double* gr = &gram[static_cast<size_t>((c0 + i) * cols + c0)];
          double t = 0.0;
          for (int64_t j = 0; j < g; ++j) t += gr[j] * d[static_cast<size_t>(j)];
          e += d[static_cast<size_t>(i)] * t;
        }
        if (e < best) {
          best = e;
          q.scales[gi] = s;
          std::copy(codes.begin(), codes.end(), q.codes.begin() + r * cols + c0);
        }
      }
    }
  return q;
}

}  // namespace trainlab
