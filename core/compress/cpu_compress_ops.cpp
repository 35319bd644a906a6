// CpuBackend's compression operations (declared in backend/cpu_backend.h, numerics in
// backend/backend.h): fake quantization, int8 quantization of activations, the int8 x int8 ->
// int32 matrix product, the W8A8 linear layer and the distillation gradient.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu_backend.h"
#include "compress/quant.h"
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

void check_i8_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2 || t.dtype() != DType::I8)
    throw Error(std::string(what) + " must be an int8 matrix, got " + dtype_name(t.dtype()) + " " + shape_str(t.shape()));
}
}  // namespace

void CpuBackend::fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) {
  if (bits < 2 || bits > 8) throw Error("fake_quantize: bits must be 2..8, got " + std::to_string(bits));
  if (w.numel() != out.numel()) throw Error("fake_quantize: input and output sizes differ");
  if (group <= 0) throw Error("fake_quantize: group must be positive");
  const size_t n = static_cast<size_t>(w.numel());
  const float* pw = read_f32(w, 1);
  float* po = write_f32(out, 2, false);
  fake_quantize_host(pw, po, static_cast<int64_t>(n), bits, group);
  finish_write(out, po);
}

void CpuBackend::quantize_i8(const Tensor& x, float scale, Tensor& q) {
  if (q.dtype() != DType::I8 || q.numel() != x.numel()) throw Error("quantize_i8: output must be int8 of the input's size");
  const size_t n = static_cast<size_t>(x.numel());
  const float* px = read_f32(x, 1);
  int8_t* pq = q.data<int8_t>();
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (size_t i = 0; i < n; ++i) pq[i] = static_cast<int8_t>(std::clamp(std::nearbyint(px[i] * inv), -127.0f, 127.0f));
}

void CpuBackend::gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) {
  check_i8_matrix(a, "gemm_i8 A");
  check_i8_matrix(b, "gemm_i8 B");
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  if (b.dim(1) != k || c.rank() != 2 || c.dim(0) != m || c.dim(1) != n || c.dtype() != DType::I32)
    throw Error("gemm_i8 shape mismatch: " + shape_str(a.shape()) + " x " + shape_str(b.shape()) + "^T -> " +
                shape_str(c.shape()) + " (int32)");
  if (k >= (1 << 17)) throw Error("gemm_i8: K = " + std::to_string(k) + " could overflow int32 accumulation");
  gemm_i8_host(a.data<int8_t>(), b.data<int8_t>(), c.data<int32_t>(), m, n, k);
}

void CpuBackend::int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales,
                             const Tensor* bias, Activation act, Tensor& y) {
  check_i8_matrix(xq, "int8_linear input");
  check_i8_matrix(wq, "int8_linear weight");
  const int64_t m = xq.dim(0), k = xq.dim(1), n = wq.dim(0);
  if (wq.dim(1) != k || y.rank() != 2 || y.dim(0) != m || y.dim(1) != n)
    throw Error("int8_linear shape mismatch: x " + shape_str(xq.shape()) + ", w " + shape_str(wq.shape()) + ", y " +
                shape_str(y.shape()));
  if (w_scales.numel() != n && w_scales.numel() != 1)
    throw Error("int8_linear: w_scales must have 1 or " + std::to_string(n) + " values");
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
  if (zs_t.rank() != 2 || zs_t.shape() != zt_t.shape() || dlogits.shape() != zs_t.shape())
    throw Error("distill_backward: student " + shape_str(zs_t.shape()) + ", teacher " + shape_str(zt_t.shape()) +
                " and gradient " + shape_str(dlogits.shape()) + " logits must have one shape");
  if (temperature <= 0.0f) throw Error("distill_backward: the temperature must be positive");
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
    if (kl_sum->dtype() != DType::F32) throw Error("distill_backward: kl_sum must be fp32");
    float* k = kl_sum->data<float>();
    k[0] = (accumulate ? k[0] : 0.0f) + static_cast<float>(kl_total);
  }
}

}  // namespace trainlab
