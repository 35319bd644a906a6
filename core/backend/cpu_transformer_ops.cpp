// CpuBackend: the transformer operations (issue 4), the reference the CUDA kernels are checked
// against. Numerics: inputs in any float format are converted to fp32, everything is computed and
// accumulated in fp32, results are rounded once to the output's format (RNE).
//  * LayerNorm: two passes per row (mean, then the biased variance of x - mean), rstd = 1/sqrt(var+eps).
//  * Attention: per (batch, head) and query row i the scores s_j = q_i . k_j / sqrt(hd), j <= i,
//    are formed in an fp32 row buffer (never a stored T x T matrix; only the per-row log-sum-exp
//    is kept for backward), softmax with the row maximum subtracted (exp by exp_vec, ~1 ulp).
//    Backward rebuilds P = exp(S - lse) from q, k and lse, then dV = P^T dY, dP = dY V^T,
//    dS = P (dP - rowdot(dY, Y)), dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd).
//    In MatmulMode::Tf32, q, k, v (and dY in backward) are rounded to tf32 before the products.
//  * Embedding backward: scatter-add in row order in fp32, so it is deterministic.
// Every loop runs in a fixed order: the same inputs give bit-identical outputs (activation
// checkpointing relies on that).
// FP exceptions are never inspected: let the compiler if-convert selects so the loops vectorise.
#pragma GCC optimize("no-trapping-math")
#pragma GCC diagnostic ignored "-Wpsabi"  // 32-byte vector helpers are inline, never an ABI boundary
#include <cblas.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/host_timing.h"
#include "backend/cpu_numeric.h"
#include "tensor/dropout_hash.h"
#include "util/error.h"
#include "util/parallel.h"


namespace trainlab {

namespace {

TL_VECTOR_CLONES void add_rows(float* __restrict out, const float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// y = (x - m) * r * g + b for one row; returns nothing, row statistics given.
TL_VECTOR_CLONES void ln_row(const float* __restrict x, const float* __restrict g, const float* __restrict b, float m,
                             float r, float* __restrict y, int64_t d) {
  for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * r * g[j] + b[j];
}

// Row sum with 8 independent partial sums (vectorisable without reassociation flags; fixed order).
TL_VECTOR_CLONES float row_sum(const float* __restrict x, int64_t d) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= d; j += 8)
    for (int u = 0; u < 8; ++u) acc[u] += x[j + u];
  float s = 0.0f;
  for (int u = 0; u < 8; ++u) s += acc[u];
  for (; j < d; ++j) s += x[j];
  return s;
}

TL_VECTOR_CLONES float row_sq_dev(const float* __restrict x, float m, int64_t d) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= d; j += 8)
    for (int u = 0; u < 8; ++u) {
      const float t = x[j + u] - m;
      acc[u] += t * t;
    }
  float s = 0.0f;
  for (int u = 0; u < 8; ++u) s += acc[u];
  for (; j < d; ++j) s += (x[j] - m) * (x[j] - m);
  return s;
}

TL_VECTOR_CLONES void ln_backward_row(const float* __restrict x, const float* __restrict gamma,
                                      const float* __restrict dy, float m, float r, float* __restrict dx, bool acc_dx,
                                      float* __restrict dg, float* __restrict db, float* __restrict xhat,
                                      float* __restrict g, int64_t d) {
  float s1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < d; ++j) {
    xhat[j] = (x[j] - m) * r;
    g[j] = dy[j] * gamma[j];
    dg[j] += dy[j] * xhat[j];
    db[j] += dy[j];
  }
  int64_t j = 0;
  for (; j + 8 <= d; j += 8)
    for (int u = 0; u < 8; ++u) {
      s1[u] += g[j + u];
      s2[u] += g[j + u] * xhat[j + u];
    }
  float sg = 0.0f, sgx = 0.0f;
  for (int u = 0; u < 8; ++u) sg += s1[u], sgx += s2[u];
  for (; j < d; ++j) sg += g[j], sgx += g[j] * xhat[j];
  const float inv_d = 1.0f / static_cast<float>(d);
  const float mg = sg * inv_d, mgx = sgx * inv_d;
  if (acc_dx)
    for (int64_t k = 0; k < d; ++k) dx[k] += r * (g[k] - mg - xhat[k] * mgx);
  else
    for (int64_t k = 0; k < d; ++k) dx[k] = r * (g[k] - mg - xhat[k] * mgx);
}

// exp for the vectorised loops: Cody-Waite reduction x = n ln2 + r and Cephes' expf polynomial
// (about 1 ulp on [-87, 88]; arguments are clamped to that range).
inline float exp_vec(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest by the 1.5 * 2^23 trick (no libm call, so the loops vectorise).
  const float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(fn) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// Phi(x) = 0.5 erfc(-x / sqrt 2) with Numerical Recipes' erfc (fractional error < 1.2e-7 everywhere,
// so the tail x << 0 keeps its relative accuracy).
inline float normal_cdf(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float poly =
      -1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  const float half_erfc = 0.5f * t * exp_vec(-z * z + poly);  // 0.5 erfc(|x|/sqrt2) = Phi(-|x|)
  return x >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

TL_VECTOR_CLONES void gelu_rows(const float* __restrict x, float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

TL_VECTOR_CLONES void gelu_grad_rows(const float* __restrict x, const float* dy, float* dx, size_t n) {  // dy may alias dx
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float pdf = 0.39894228040143268f * exp_vec(-0.5f * v * v);
    dx[i] = dy[i] * (normal_cdf(v) + v * pdf);
  }
}

using cpu::elem_ptr;
using cpu::from_f32;
using cpu::kPanel;
using cpu::tf32_round;
using cpu::to_f32;

void check_fp32(const Tensor& t, const char* what, int64_t n) {
  if (t.dtype() != DType::F32 || t.numel() != n)
    throw Error(std::string(what) + " must be fp32 with " + std::to_string(n) + " elements, got " +
                dtype_name(t.dtype()) + " " + shape_str(t.shape()));
}
}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  TL_HOST_TIMED("add", stream_cost({&a, &b}, {&out}, op_flops::kAdd));
  if (a.numel() != b.numel() || a.numel() != out.numel())
    throw Error("add: sizes differ: " + shape_str(a.shape()) + " + " + shape_str(b.shape()) + " -> " + shape_str(out.shape()));
  const float* pa = read_f32(a, 6);
  const float* pb = read_f32(b, 7);
  float* po = write_f32(out, 8, false);
  add_rows(po, pa, pb, static_cast<size_t>(out.numel()));
  finish_write(out, po);
}

// Inverted dropout with the counter-based mask of backend/dropout_hash.h (the CUDA kernel draws
// the same mask from the same seed). p = 0 copies.
void CpuBackend::dropout(const Tensor& x, float p, uint64_t seed, Tensor& y, uint64_t first) {
  TL_HOST_TIMED("dropout", stream_cost({&x}, {&y}, op_flops::kDropout));
  if (x.numel() != y.numel())
    throw Error("dropout: sizes differ: " + shape_str(x.shape()) + " -> " + shape_str(y.shape()));
  if (!(p >= 0.0f && p < 1.0f)) throw Error("dropout: probability " + std::to_string(p) + " outside [0, 1)");
  const float* px = read_f32(x, 6);
  float* py = write_f32(y, 7, false);
  const uint32_t thr = dropout_threshold(p);
  const float scale = 1.0f / (1.0f - p);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i)
    py[i] = dropout_hash(seed, first + static_cast<uint64_t>(i)) >= thr ? px[i] * scale : 0.0f;
  finish_write(y, py);
}

// GELU apart from its product, vectorised (erf and exp by the polynomials above: GELU within
// ~2e-7 relative of the libm erf form).
void CpuBackend::gelu_forward(const Tensor& x, Tensor& y) {
  TL_HOST_TIMED("gelu_forward", stream_cost({&x}, {&y}, op_flops::kGelu));
  if (x.numel() != y.numel()) throw Error("gelu_forward: sizes differ");
  elementwise(x, nullptr, y, [](const float* px, const float*, float* py, size_t n) { gelu_rows(px, py, n); });
}

void CpuBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  TL_HOST_TIMED("gelu_backward", stream_cost({&x, &dy}, {&dx}, op_flops::kGeluBackward));
  if (x.numel() != dy.numel() || x.numel() != dx.numel()) throw Error("gelu_backward: sizes differ");
  elementwise(x, &dy, dx, [](const float* px, const float* pd, float* pdx, size_t n) { gelu_grad_rows(px, pd, pdx, n); });
}

// Split among the threads from 65,536 values (the parts' bounds do not change any value); each
// part converted, computed and rounded kPanel values at a time in its own 3 kPanel floats of
// slot 6 (fp32 tensors are used in place), so the conversions run on every thread and no
// whole-tensor fp32 copy is made.
void CpuBackend::elementwise(const Tensor& x, const Tensor* y, Tensor& out, const ElementwiseFn& fn) {
  const int64_t n = x.numel();
  const int threads = n >= 65536 ? worker_threads() : 1;
  const bool all32 = x.dtype() == DType::F32 && (!y || y->dtype() == DType::F32) && out.dtype() == DType::F32;
  float* scratch = all32 ? nullptr : slot_buffer(6, static_cast<size_t>(3 * kPanel * threads));
  const auto in = [](const Tensor& t, int64_t off, size_t len, float* buf) -> const float* {
    if (t.dtype() == DType::F32) return t.data<float>() + off;
    to_f32(t.dtype(), elem_ptr(t, off), buf, len);
    return buf;
  };
  parallel_for(threads, threads, [&](int w, int64_t b, int64_t e) {
    float* buf = all32 ? nullptr : scratch + 3 * kPanel * w;
    for (int64_t off = n * b / threads; off < n * e / threads; off += kPanel) {
      const size_t len = static_cast<size_t>(std::min(kPanel, n * e / threads - off));
      const float* px = in(x, off, len, buf);
      const float* py = y ? in(*y, off, len, buf + kPanel) : nullptr;
      float* po = out.dtype() == DType::F32 ? out.data<float>() + off : buf + 2 * kPanel;
      fn(px, py, po, len);
      if (out.dtype() != DType::F32) from_f32(po, out.dtype(), elem_ptr(out, off), len);
    }
  });
}

void CpuBackend::embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) {
  TL_HOST_TIMED("embedding_forward", stream_cost({&idx, &out}, {&out}, op_flops::kEmbedding));
  if (idx.dtype() != DType::I32) throw Error("embedding_forward: token indices must be int32");
  const int64_t n = idx.numel(), d = tok.dim(1), vocab = tok.dim(0);
  if (T <= 0 || n % T != 0 || T > pos.dim(0) || pos.dim(1) != d || out.numel() != n * d)
    throw Error("embedding_forward: shapes do not fit: tok " + shape_str(tok.shape()) + ", pos " + shape_str(pos.shape()) +
                ", " + std::to_string(n) + " tokens in rows of " + std::to_string(T) + ", out " + shape_str(out.shape()));
  const float* pt = read_f32(tok, 6);
  const float* pp = read_f32(pos, 7);
  float* po = write_f32(out, 8, false);
  const int32_t* ix = idx.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = ix[i];
    if (r < 0 || r >= vocab)
      throw Error("embedding_forward: token " + std::to_string(r) + " outside the vocabulary 0.." + std::to_string(vocab - 1));
    add_rows(po + i * d, pt + static_cast<int64_t>(r) * d, pp + (i % T) * d, static_cast<size_t>(d));
  }
  finish_write(out, po);
}

void CpuBackend::embedding_backward(const Tensor& dout, const Tensor& idx, int64_t T, Tensor& dtok, Tensor& dpos,
                                    bool accumulate) {
  TL_HOST_TIMED("embedding_backward", stream_cost({&dout, &idx}, {&dtok, &dpos}, op_flops::kEmbedding));
  const int64_t n = idx.numel(), d = dtok.dim(1), vocab = dtok.dim(0);
  if (dout.numel() != n * d || T > dpos.dim(0)) throw Error("embedding_backward: shapes do not fit");
  const float* g = read_f32(dout, 6);
  float* pt = write_f32(dtok, 7, accumulate);
  float* pp = write_f32(dpos, 8, accumulate);
  if (!accumulate) {
    std::fill_n(pt, dtok.numel(), 0.0f);
    std::fill_n(pp, dpos.numel(), 0.0f);
  }
  const int32_t* ix = idx.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = ix[i];
    if (r < 0 || r >= vocab) throw Error("embedding_backward: token " + std::to_string(r) + " outside the vocabulary");
    add_rows(pt + static_cast<int64_t>(r) * d, pt + static_cast<int64_t>(r) * d, g + i * d, static_cast<size_t>(d));
    add_rows(pp + (i % T) * d, pp + (i % T) * d, g + i * d, static_cast<size_t>(d));
  }
  finish_write(dtok, pt);
  finish_write(dpos, pp);
}

void CpuBackend::layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                                   Tensor& mean, Tensor& rstd) {
  TL_HOST_TIMED("layernorm_forward", stream_cost({&x, &gamma, &beta}, {&y, &mean, &rstd}, op_flops::kLayerNorm));
  const int64_t d = x.dim(-1), n = x.numel() / d;
  if (gamma.numel() != d || beta.numel() != d || y.numel() != x.numel())
    throw Error("layernorm_forward: shapes do not fit: x " + shape_str(x.shape()) + ", gamma " + shape_str(gamma.shape()));
  check_fp32(mean, "layernorm mean", n);
  check_fp32(rstd, "layernorm rstd", n);
  const float* px = read_f32(x, 6);
  const float* pg = read_f32(gamma, 7);
  const float* pb = read_f32(beta, 8);
  float* py = write_f32(y, 9, false);
  float* pm = mean.data<float>();
  float* pr = rstd.data<float>();
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = px + i * d;
    const float m = row_sum(row, d) * inv_d;
    const float var = row_sq_dev(row, m, d) * inv_d;
    const float r = 1.0f / std::sqrt(var + eps);
    pm[i] = m;
    pr[i] = r;
    ln_row(row, pg, pb, m, r, py + i * d, d);
  }
  finish_write(y, py);
}

void CpuBackend::layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool accumulate_dx,
                                    bool accumulate_params, Tensor* dx_sums) {
  TL_HOST_TIMED("layernorm_backward", stream_cost({&x, &gamma, &mean, &rstd, &dy}, {&dx, &dgamma, &dbeta}, op_flops::kLayerNormBackward));
  const int64_t d = x.dim(-1), n = x.numel() / d;
  if (dy.numel() != x.numel() || dx.numel() != x.numel() || dgamma.numel() != d || dbeta.numel() != d)
    throw Error("layernorm_backward: shapes do not fit: x " + shape_str(x.shape()) + ", dy " + shape_str(dy.shape()));
  check_fp32(mean, "layernorm mean", n);
  check_fp32(rstd, "layernorm rstd", n);
  const float* px = read_f32(x, 6);
  const float* pg = read_f32(gamma, 7);
  const float* pdy = read_f32(dy, 8);
  float* pdx = write_f32(dx, 9, accumulate_dx);
  float* pdg = write_f32(dgamma, 10, accumulate_params);
  float* pdb = write_f32(dbeta, 11, accumulate_params);
  if (!accumulate_params) {
    std::fill_n(pdg, d, 0.0f);
    std::fill_n(pdb, d, 0.0f);
  }
  std::vector<float> tmp(static_cast<size_t>(2 * d));
  const float* pm = mean.data<float>();
  const float* pr = rstd.data<float>();
  for (int64_t i = 0; i < n; ++i)
    ln_backward_row(px + i * d, pg, pdy + i * d, pm[i], pr[i], pdx + i * d, accumulate_dx, pdg, pdb, tmp.data(),
                    tmp.data() + d, d);
  finish_write(dx, pdx);
  finish_write(dgamma, pdg);
  finish_write(dbeta, pdb);
  if (dx_sums) bias_grad_sums(dx, *dx_sums, accumulate_params);
}

namespace {
inline void axpy(float* __restrict y, const float* __restrict x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline float dot8(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[j + u] * b[j + u];
  float s = 0.0f;
  for (int u = 0; u < 8; ++u) s += acc[u];
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

inline void softmax_row(float* __restrict s, int64_t n, float scale, float& lse) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    s[j] *= scale;
    mx = std::max(mx, s[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = exp_vec(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  lse = mx + std::log(sum);
}

// The per-head products, register-blocked by 8 (one AVX vector of accumulators that stays in a
// register while the reduction index runs): the compiler vectorises the fixed-width u loops.
//   scores_row: s[j] = sum_c q[c] kt[c][j] for j < n (kt: keys transposed, hd x Tp, Tp = T rounded
//               up to 8 and zero-padded; s is written up to n rounded up to 8).
typedef float v8sf __attribute__((vector_size(32)));
inline v8sf load8(const float* p) {
  v8sf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8sf v) { __builtin_memcpy(p, &v, sizeof v); }

inline void scores_row(const float* __restrict q, const float* __restrict kt, int64_t Tp, int64_t hd, int64_t n,
                       float* __restrict s) {
  for (int64_t j0 = 0; j0 < n; j0 += 8) {
    v8sf acc = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < hd; ++c) acc += q[c] * load8(kt + c * Tp + j0);
    store8(s + j0, acc);
  }
}

// out[c] = sum_{r in [r0, r1)} w[r] * rows[r * ld + c] for c < hd (out rows of width hd).
inline void weighted_rows(const float* __restrict w, int64_t wstride, const float* __restrict rows, int64_t ld,
                          int64_t r0, int64_t r1, int64_t hd, float* __restrict out) {
  int64_t c0 = 0;
  for (; c0 + 32 <= hd; c0 += 32) {  // 4 vectors of accumulators
    v8sf a0 = {0, 0, 0, 0, 0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
    for (int64_t r = r0; r < r1; ++r) {
      const float a = w[r * wstride];
      const float* row = rows + r * ld + c0;
      a0 += a * load8(row);
      a1 += a * load8(row + 8);
      a2 += a * load8(row + 16);
      a3 += a * load8(row + 24);
    }
    store8(out + c0, a0);
    store8(out + c0 + 8, a1);
    store8(out + c0 + 16, a2);
    store8(out + c0 + 24, a3);
  }
  for (; c0 + 8 <= hd; c0 += 8) {
    v8sf acc = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t r = r0; r < r1; ++r) acc += w[r * wstride] * load8(rows + r * ld + c0);
    store8(out + c0, acc);
  }
  for (; c0 < hd; ++c0) {
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r) acc += w[r * wstride] * rows[r * ld + c0];
    out[c0] = acc;
  }
}

inline void transpose_head(const float* src, int64_t ld, int64_t T, int64_t Tp, int64_t hd, float* dst) {
  for (int64_t c = 0; c < hd; ++c) {
    for (int64_t j = 0; j < T; ++j) dst[c * Tp + j] = src[j * ld + c];
    for (int64_t j = T; j < Tp; ++j) dst[c * Tp + j] = 0.0f;
  }
}

// One (batch, head) forward. q, k, v rows have stride ld (3d), y rows stride ldy (d).
// Scratch: kt (hd x Tp), s (Tp).
TL_VECTOR_CLONES void attention_head_forward(const float* q, const float* k, const float* v, int64_t ld, float* y,
                                             int64_t ldy, float* lrow, int64_t T, int64_t Tp, int64_t hd, float scale,
                                             float* kt, float* s) {
  transpose_head(k, ld, T, Tp, hd, kt);
  for (int64_t i = 0; i < T; ++i) {
    const int64_t n = i + 1;
    scores_row(q + i * ld, kt, Tp, hd, n, s);
    softmax_row(s, n, scale, lrow[i]);
    weighted_rows(s, 1, v, ld, 0, n, hd, y + i * ldy);
  }
}

// One (batch, head) backward: dq, dk, dv (stride ld) from dy (stride ldy; gy: its tf32 copy).
// Scratch: kt, vt (hd x Tp), P and dS (T x Tp; row i holds j <= i, the rest zero).
TL_VECTOR_CLONES void attention_head_backward(const float* q, const float* k, const float* v, int64_t ld,
                                              const float* gy, const float* gy_exact, const float* yy, int64_t ldy,
                                              const float* lrow, float* dq, float* dk, float* dv, int64_t T,
                                              int64_t Tp, int64_t hd, float scale, float* kt, float* vt, float* P,
                                              float* dS) {
  transpose_head(k, ld, T, Tp, hd, kt);
  transpose_head(v, ld, T, Tp, hd, vt);
  for (int64_t i = 0; i < T; ++i) {
    const int64_t n = i + 1;
    float* p = P + i * Tp;
    float* ds = dS + i * Tp;
    scores_row(q + i * ld, kt, Tp, hd, n, p);  // P rebuilt from q, k and the saved lse
    for (int64_t j = 0; j < n; ++j) p[j] = exp_vec(p[j] * scale - lrow[i]);
    for (int64_t j = n; j < Tp; ++j) p[j] = 0.0f;
    scores_row(gy + i * ldy, vt, Tp, hd, n, ds);  // dP = dY V^T
    const float di = dot8(gy_exact + i * ldy, yy + i * ldy, hd);
    for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - di) * scale;  // dS, with the 1/sqrt(hd)
    for (int64_t j = n; j < Tp; ++j) ds[j] = 0.0f;
    weighted_rows(ds, 1, k, ld, 0, n, hd, dq + i * ld);  // dQ_i = sum_j dS_ij k_j
  }
  for (int64_t j = 0; j < T; ++j) {  // column j of P and dS: queries i >= j
    weighted_rows(dS + j, Tp, q, ld, j, T, hd, dk + j * ld);  // dK_j = sum_i dS_ij q_i
    weighted_rows(P + j, Tp, gy, ldy, j, T, hd, dv + j * ld);  // dV_j = sum_i P_ij dy_i
  }
}
}  // namespace

// Attention per (batch, head) in L1-sized loops (T x hd blocks), the (batch, head) pairs split
// over the backend's threads. Scores, softmax and products in fp32; exp by exp_vec.
void CpuBackend::attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse,
                                   MatmulMode mode) {
  TL_HOST_TIMED("attention_forward", attention_cost(qkv, B, T, H, false));
  const int64_t d3 = qkv.dim(1), d = d3 / 3, hd = d / H;
  if (qkv.dim(0) != B * T || d3 != 3 * d || d % H != 0 || y.numel() != B * T * d)
    throw Error("attention_forward: shapes do not fit: qkv " + shape_str(qkv.shape()) + ", y " + shape_str(y.shape()) +
                ", B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H));
  check_fp32(lse, "attention lse", B * H * T);
  const float* pq = read_f32(qkv, 6, mode == MatmulMode::Tf32);
  float* py = write_f32(y, 7, false);
  float* pl = lse.data<float>();
  const int threads = worker_threads();
  const int64_t Tp = (T + 7) / 8 * 8;
  const int64_t per = hd * Tp + Tp;
  float* scratch = slot_buffer(8, static_cast<size_t>(threads * per));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  parallel_for(B * H, threads, [&](int w, int64_t begin, int64_t end) {
    float* kt = scratch + w * per;
    float* s = kt + hd * Tp;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* q = pq + b * T * d3 + h * hd;
      attention_head_forward(q, q + d, q + 2 * d, d3, py + b * T * d + h * hd, d, pl + bh * T, T, Tp, hd, scale, kt, s);
    }
  });
  finish_write(y, py);
}

void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B,
                                    int64_t T, int64_t H, Tensor& dqkv, MatmulMode mode) {
  TL_HOST_TIMED("attention_backward", attention_cost(qkv, B, T, H, true));
  const int64_t d3 = qkv.dim(1), d = d3 / 3, hd = d / H;
  if (qkv.dim(0) != B * T || y.numel() != B * T * d || dy.numel() != B * T * d || dqkv.numel() != qkv.numel())
    throw Error("attention_backward: shapes do not fit: qkv " + shape_str(qkv.shape()) + ", dy " + shape_str(dy.shape()));
  check_fp32(lse, "attention lse", B * H * T);
  const bool tf32 = mode == MatmulMode::Tf32;
  const float* pq = read_f32(qkv, 6, tf32);
  const float* py = read_f32(y, 7);
  const float* pdy = read_f32(dy, 8);
  float* pdq = write_f32(dqkv, 9, false);
  std::vector<float> dyr;
  if (tf32) {
    dyr.assign(pdy, pdy + B * T * d);
    for (auto& v : dyr) v = tf32_round(v);
  }
  const float* pdy_mm = tf32 ? dyr.data() : pdy;
  const float* pl = lse.data<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int threads = worker_threads();
  const int64_t Tp = (T + 7) / 8 * 8;
  const int64_t per = 2 * hd * Tp + 2 * T * Tp;
  float* scratch = slot_buffer(10, static_cast<size_t>(threads * per));
  parallel_for(B * H, threads, [&](int w, int64_t begin, int64_t end) {
    float* kt = scratch + w * per;
    float* vt = kt + hd * Tp;
    float* p = vt + hd * Tp;
    float* dp = p + T * Tp;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* q = pq + b * T * d3 + h * hd;
      float* dq = pdq + b * T * d3 + h * hd;
      const int64_t o = b * T * d + h * hd;
      attention_head_backward(q, q + d, q + 2 * d, d3, pdy_mm + o, pdy + o, py + o, d, pl + bh * T, dq, dq + d,
                              dq + 2 * d, T, Tp, hd, scale, kt, vt, p, dp);
    }
  });
  finish_write(dqkv, pdq);
}

}  // namespace trainlab
