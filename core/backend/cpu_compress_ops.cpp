// CpuBackend's compression operations (declared in backend/cpu_backend.h, numerics in
// backend/backend.h): fake quantization, int8 quantization of activations, the int8 x int8 ->
// int32 matrix product, the W8A8 linear layer and the distillation gradient.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/compress_checks.h"
#include "tensor/quant_format.h"
#include "util/error.h"

namespace trainlab {

namespace {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TL_I8_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TL_I8_CLONES
#endif

// Exact: |a*b| <= 128*128 and K < 2^17 keeps every partial sum inside int32.
TL_I8_CLONES int32_t dot_i8(const int8_t* __restrict a, const int8_t* __restrict b, int64_t k) {
  int32_t acc = 0;
  for (int64_t i = 0; i < k; ++i) acc += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  return acc;
}

void gemm_i8_host(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k) {
  // Blocked over rows of b so a tile of the weights stays in cache while the rows of a stream by.
  const int64_t nb = 64;
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t j1 = std::min(n, j0 + nb);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = j0; j < j1; ++j) c[i * n + j] = dot_i8(a + i * k, b + j * k, k);
  }
}

}  // namespace

void CpuBackend::fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) {
  compress_checks::fake_quantize(w, out, bits, group);
  const size_t n = static_cast<size_t>(w.numel());
  const float* pw = read_f32(w, 1);
  float* po = write_f32(out, 2, false);
  fake_quantize_host(pw, po, static_cast<int64_t>(n), bits, group);
  finish_write(out, po);
}

void CpuBackend::quantize_i8(const Tensor& x, float scale, Tensor& q) {
  compress_checks::quantize_i8(x, q);
  const size_t n = static_cast<size_t>(x.numel());
  const float* px = read_f32(x, 1);
  int8_t* pq = q.data<int8_t>();
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (size_t i = 0; i < n; ++i) pq[i] = static_cast<int8_t>(std::clamp(std::nearbyint(px[i] * inv), -127.0f, 127.0f));
}

void CpuBackend::gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) {
  const auto [m, n, k] = compress_checks::gemm_i8(a, b, c);
  gemm_i8_host(a.data<int8_t>(), b.data<int8_t>(), c.data<int32_t>(), m, n, k);
}

void CpuBackend::int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales,
                             const Tensor* bias, Activation act, Tensor& y) {
  const auto [m, n, k] = compress_checks::int8_linear(xq, wq, w_scales, bias, y);
  std::vector<int32_t> acc(static_cast<size_t>(m * n));
  gemm_i8_host(xq.data<int8_t>(), wq.data<int8_t>(), acc.data(), m, n, k);
  const float* ws = read_f32(w_scales, 4);
  const float* pb = bias ? read_f32(*bias, 5) : nullptr;
  float* py = write_f32(y, 3, false);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float s = x_scale * ws[w_scales.numel() == 1 ? 0 : j];
      float v = static_cast<float>(acc[static_cast<size_t>(i * n + j)]) * s + (pb ? pb[j] : 0.0f);
      if (act == Activation::ReLU) v = v > 0.0f ? v : 0.0f;
      else if (act == Activation::GELU) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
      py[i * n + j] = v;
    }
  finish_write(y, py);
}

void CpuBackend::distill_backward(const Tensor& zs_t, const Tensor& zt_t, float temperature, float alpha,
                                  float grad_multiplier, Tensor& dlogits, Tensor* kl_sum, bool accumulate) {
  compress_checks::distill(zs_t, zt_t, dlogits, temperature, kl_sum);
  const int64_t b = zs_t.dim(0), c = zs_t.dim(1);
  // Copies: read_f32 slots may alias between the two inputs' conversions otherwise.
  std::vector<float> zs(static_cast<size_t>(b * c)), zt(static_cast<size_t>(b * c));
  convert_to_f32(zs_t.dtype(), zs_t.raw(), zs.data(), zs.size());
  convert_to_f32(zt_t.dtype(), zt_t.raw(), zt.data(), zt.size());
  float* g = write_f32(dlogits, 2, true);
  const float scale = alpha * temperature * grad_multiplier * step_scalars().loss_scale;
  const float inv_t = 1.0f / temperature;
  double kl_total = 0.0;
  std::vector<float> ps(static_cast<size_t>(c)), pt(static_cast<size_t>(c));
  for (int64_t i = 0; i < b; ++i) {
    const float* s = zs.data() + i * c;
    const float* t = zt.data() + i * c;
    float ms = s[0] * inv_t, mt = t[0] * inv_t;
    for (int64_t j = 1; j < c; ++j) ms = std::max(ms, s[j] * inv_t), mt = std::max(mt, t[j] * inv_t);
    float ss = 0.0f, st = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      ps[j] = std::exp(s[j] * inv_t - ms);
      pt[j] = std::exp(t[j] * inv_t - mt);
      ss += ps[j];
      st += pt[j];
    }
    const float lss = std::log(ss) + ms, lst = std::log(st) + mt;  // log-sum-exps
    double kl = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      ps[j] /= ss;
      pt[j] /= st;
      if (pt[j] > 0.0f) kl += static_cast<double>(pt[j]) * ((t[j] * inv_t - lst) - (s[j] * inv_t - lss));
      float* gj = g + i * c + j;
      *gj = (1.0f - alpha) * *gj + scale * (ps[j] - pt[j]);
    }
    kl_total += kl * static_cast<double>(temperature) * temperature;
  }
  finish_write(dlogits, g);
  if (kl_sum) {
    float* k = kl_sum->data<float>();
    k[0] = (accumulate ? k[0] : 0.0f) + static_cast<float>(kl_total);
  }
}

}  // namespace trainlab
