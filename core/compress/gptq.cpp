#include "compress/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "tensor/dtype.h"
#include "util/error.h"

// LAPACK's Cholesky factorisation and inverse (OpenBLAS ships LAPACK; column-major).
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info);
}

namespace trainlab {

namespace {

// The lab's scale of a group whose largest |w| is `mx` (quantize_groups' formula).
float group_scale(double mx, float qmax) {
  float s = round_to(DType::F16, static_cast<float>(mx) / qmax);
  if (!std::isfinite(s)) s = 65504.0f;
  return s;
}

int8_t code_of(double w, float s, float qmax) {
  if (!(s > 0.0f)) return 0;
  const float q = std::clamp(std::nearbyint(static_cast<float>(w) / s), -qmax, qmax);
  return static_cast<int8_t>(q);
}

// The scale of a group of `n` weights `stride` apart: the reference implementation's mse grid,
// max|w| shrunk by up to 20 % in steps of 1 %, the one with the smallest sum |w - s q|^2.4 kept
// (at 3 bits, a slightly clipped grid rounds the many small weights more finely).
float search_scale(const double* w, int64_t n, int64_t stride, float qmax) {
  double mx = 0.0;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, std::fabs(w[i * stride]));
  float best = group_scale(mx, qmax);
  double best_err = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= 20; ++k) {
    const float s = group_scale(mx * (1.0 - 0.01 * k), qmax);
    double e = 0.0;
    for (int64_t i = 0; i < n; ++i) e += std::pow(std::fabs(w[i * stride] - static_cast<double>(s) * code_of(w[i * stride], s, qmax)), 2.4);
    if (e < best_err) {
      best_err = e;
      best = s;
    }
  }
  return best;
}

// U upper with H^-1 = U^T U, row-major, from the symmetric positive definite H [n, n] (row-major,
// overwritten). LAPACK works column-major: the lower factor it writes is, read row-major, U.
void inverse_cholesky_upper(std::vector<double>& h, int64_t n64) {
  const int n = static_cast<int>(n64);
  int info = 0;
  const char lo = 'L';
  dpotrf_(&lo, &n, h.data(), &n, &info);
  if (info != 0)
    throw Error("GPTQ: the dampened Hessian is not positive definite (pivot " + std::to_string(info) +
                "): raise --damp (quant.damp)");
  dpotri_(&lo, &n, h.data(), &n, &info);
  if (info != 0) throw Error("GPTQ: the Hessian is singular: raise --damp (quant.damp)");
  for (int64_t j = 0; j < n64; ++j)  // column-major lower (i >= j) -> upper (symmetric H^-1)
    for (int64_t i = j + 1; i < n64; ++i) h[static_cast<size_t>(j + i * n64)] = h[static_cast<size_t>(i + j * n64)];
  dpotrf_(&lo, &n, h.data(), &n, &info);
  if (info != 0) throw Error("GPTQ: H^-1 is not positive definite: raise --damp (quant.damp)");
  for (int64_t j = 0; j < n64; ++j)  // clear the column-major upper part (row-major: below the diagonal)
    for (int64_t i = 0; i < j; ++i) h[static_cast<size_t>(i + j * n64)] = 0.0;
}

// Scales of every group from the (original) weights: per tensor, per row, or static groups.
void static_scales(const std::vector<double>& w, int64_t group, float qmax, std::vector<float>& scales) {
  for (size_t g = 0; g < scales.size(); ++g) {
    const size_t b = g * static_cast<size_t>(group), e = std::min(w.size(), b + static_cast<size_t>(group));
    scales[g] = search_scale(&w[b], static_cast<int64_t>(e - b), 1, qmax);
  }
}

// H = 2/n gram, with dead inputs (H_jj = 0) given H_jj = 1 and their weights zeroed, then dampened.
std::vector<double> dampened_hessian(const std::vector<double>& gram, int64_t samples, int64_t cols, double damp,
                                     std::vector<double>& w, int64_t rows) {
  std::vector<double> h(gram.size());
  const double f = 2.0 / static_cast<double>(samples);
  for (size_t i = 0; i < h.size(); ++i) h[i] = gram[i] * f;
  double mean = 0.0;
  for (int64_t j = 0; j < cols; ++j) {
    double& d = h[static_cast<size_t>(j * cols + j)];
    if (d == 0.0) {
      d = 1.0;
      for (int64_t r = 0; r < rows; ++r) w[static_cast<size_t>(r * cols + j)] = 0.0;
    }
    mean += d;
  }
  const double lambda = damp * mean / static_cast<double>(cols);
  for (int64_t j = 0; j < cols; ++j) h[static_cast<size_t>(j * cols + j)] += lambda;
  return h;
}

}  // namespace

std::vector<float> QuantizedMatrix::dequantized() const {
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = scales[i / static_cast<size_t>(group)] * codes[i];
  return out;
}

QuantizedMatrix rtn_quantize(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec) {
  QuantizedMatrix q;
  q.rows = rows;
  q.cols = cols;
  q.group = spec.group_size(rows, cols);
  const int64_t n = rows * cols;
  q.scales.resize(static_cast<size_t>((n + q.group - 1) / q.group));
  q.codes.resize(static_cast<size_t>(n));
  quantize_groups(w, n, spec.bits, q.group, q.scales.data(), q.codes.data());
  return q;
}

void accumulate_gram(const float* x, int64_t n, int64_t cols, std::vector<double>& h) {
  if (h.size() != static_cast<size_t>(cols * cols)) h.assign(static_cast<size_t>(cols * cols), 0.0);
  // In double, a chunk of rows at a time (a Hessian over many thousand inputs keeps its digits).
  const int64_t chunk = 256;
  std::vector<double> xd(static_cast<size_t>(chunk * cols));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    for (int64_t i = 0; i < m * cols; ++i) xd[static_cast<size_t>(i)] = x[r0 * cols + i];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(cols), static_cast<int>(m), 1.0, xd.data(),
                static_cast<int>(cols), 1.0, h.data(), static_cast<int>(cols));
  }
  for (int64_t i = 0; i < cols; ++i)  // the upper triangle mirrored
    for (int64_t j = 0; j < i; ++j) h[static_cast<size_t>(i * cols + j)] = h[static_cast<size_t>(j * cols + i)];
}

QuantizedMatrix gptq_quantize(const float* w_in, int64_t rows, int64_t cols, const std::vector<double>& gram,
                              int64_t samples, const QuantSpec& spec, const GptqOptions& o) {
  if (samples < 1 || gram.size() != static_cast<size_t>(cols * cols))
    throw Error("GPTQ needs calibration inputs of the layer (a Hessian of " + std::to_string(cols) + " x " +
                std::to_string(cols) + ")");
  if (!(o.damp > 0.0 && o.damp <= 1.0)) throw Error("GPTQ: damp must be in (0, 1], got " + std::to_string(o.damp));
  QuantizedMatrix q;
  q.rows = rows;
  q.cols = cols;
  q.group = spec.group_size(rows, cols);
  q.scales.assign(static_cast<size_t>(rows * cols / q.group), 0.0f);
  q.codes.assign(static_cast<size_t>(rows * cols), 0);
  const float qmax = static_cast<float>(spec.qmax());
  std::vector<double> w(w_in, w_in + rows * cols);
  for (double v : w)
    if (std::isnan(v)) throw Error("GPTQ: a weight is NaN: only finite weights can be quantized");
  std::vector<double> h = dampened_hessian(gram, samples, cols, o.damp, w, rows);
  // Dynamic group scales only for groups inside a row, in column order.
  const bool dynamic = spec.granularity == QuantGranularity::Group && !o.act_order;
  if (!dynamic) static_scales(w, q.group, qmax, q.scales);
  std::vector<int64_t> perm(static_cast<size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  if (o.act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return h[static_cast<size_t>(a * cols + a)] > h[static_cast<size_t>(b * cols + b)];
    });
    std::vector<double> wp(w.size()), hp(h.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) wp[static_cast<size_t>(r * cols + j)] = w[static_cast<size_t>(r * cols + perm[j])];
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j)
        hp[static_cast<size_t>(i * cols + j)] = h[static_cast<size_t>(perm[i] * cols + perm[j])];
    w.swap(wp);
    h.swap(hp);
  }
  inverse_cholesky_upper(h, cols);  // h is now U
  const std::vector<double>& u = h;
  // A block holds whole groups, so that a group's scale is taken from its updated columns.
  int64_t block = std::max<int64_t>(1, o.block);
  if (dynamic) block = q.group <= block ? block / q.group * q.group : q.group;
  std::vector<double> err(static_cast<size_t>(rows * block));
  for (int64_t i1 = 0; i1 < cols; i1 += block) {
    const int64_t i2 = std::min(cols, i1 + block), cnt = i2 - i1;
    for (int64_t j = i1; j < i2; ++j) {
      if (dynamic && j % q.group == 0)
        for (int64_t r = 0; r < rows; ++r)
          q.scales[static_cast<size_t>((r * cols + j) / q.group)] = search_scale(&w[static_cast<size_t>(r * cols + j)], q.group, 1, qmax);
      const double d = u[static_cast<size_t>(j * cols + j)];
      const double* uj = &u[static_cast<size_t>(j * cols)];
      for (int64_t r = 0; r < rows; ++r) {
        double* wr = &w[static_cast<size_t>(r * cols)];
        const int64_t idx = r * cols + perm[static_cast<size_t>(j)];  // the weight's place in the file
        const float s = q.scales[static_cast<size_t>(idx / q.group)];
        const int8_t c = code_of(wr[j], s, qmax);
        q.codes[static_cast<size_t>(idx)] = c;
        const double e = (wr[j] - static_cast<double>(s) * c) / d;
        err[static_cast<size_t>(r * cnt + (j - i1))] = e;
        for (int64_t k = j + 1; k < i2; ++k) wr[k] -= e * uj[k];
      }
    }
    if (i2 < cols)  // the lazy batch update: W[:, i2:] -= E U[i1:i2, i2:]
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols - i2),
                  static_cast<int>(cnt), -1.0, err.data(), static_cast<int>(cnt), &u[static_cast<size_t>(i1 * cols + i2)],
                  static_cast<int>(cols), 1.0, &w[static_cast<size_t>(i2)], static_cast<int>(cols));
  }
  return q;
}

double output_error(const float* w, const float* w_new, int64_t rows, int64_t cols, const std::vector<double>& gram,
                    int64_t samples) {
  std::vector<double> d(static_cast<size_t>(rows * cols)), m(d.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<double>(w_new[i]) - static_cast<double>(w[i]);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols),
              static_cast<int>(cols), 1.0, d.data(), static_cast<int>(cols), gram.data(), static_cast<int>(cols), 0.0,
              m.data(), static_cast<int>(cols));
  double t = 0.0;
  for (size_t i = 0; i < d.size(); ++i) t += d[i] * m[i];
  return t / (static_cast<double>(samples) * static_cast<double>(rows));
}

}  // namespace trainlab
