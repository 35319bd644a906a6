// AWQ's scale search (compress/gptq.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "compress/gptq.h"
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

}  // namespace trainlab
