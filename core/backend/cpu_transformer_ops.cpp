// CpuBackend: the transformer operations (issue 4), the reference the CUDA kernels are checked
// against. Numerics: inputs in any float format are converted to fp32, everything is computed and
// accumulated in fp32, results are rounded once to the output's format (RNE).
//  * LayerNorm: two passes per row (mean, then the biased variance of x - mean), rstd = 1/sqrt(var+eps).
//  * Attention: per (batch, head) the scores S = q k^T / sqrt(hd) are formed with cblas_sgemm in a
//    T x T fp32 workspace (the CPU materialises them; only the per-row log-sum-exp is kept for
//    backward), softmax with the row maximum subtracted, masked (j > i) entries exactly 0.
//    Backward rebuilds P = exp(S - lse) from q, k and lse, then dV = P^T dY, dP = dY V^T,
//    dS = P (dP - rowdot(dY, Y)), dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd).
//    With tf32 on, q, k and v are rounded to tf32 before the products.
//  * Embedding backward: scatter-add in row order in fp32, so it is deterministic.
// Every loop runs in a fixed order: the same inputs give bit-identical outputs (activation
// checkpointing relies on that).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu_backend.h"
#include "util/error.h"

namespace trainlab {

namespace {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TL_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TL_VECTOR_CLONES
#endif

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

inline float tf32_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) != 0x7F800000u) {
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
  }
  std::memcpy(&f, &u, 4);
  return f;
}

void check_fp32(const Tensor& t, const char* what, int64_t n) {
  if (t.dtype() != DType::F32 || t.numel() != n)
    throw Error(std::string(what) + " must be fp32 with " + std::to_string(n) + " elements, got " +
                dtype_name(t.dtype()) + " " + shape_str(t.shape()));
}
}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.numel() != b.numel() || a.numel() != out.numel())
    throw Error("add: sizes differ: " + shape_str(a.shape()) + " + " + shape_str(b.shape()) + " -> " + shape_str(out.shape()));
  const float* pa = read_f32(a, 6);
  const float* pb = read_f32(b, 7);
  float* po = write_f32(out, 8, false);
  add_rows(po, pa, pb, static_cast<size_t>(out.numel()));
  finish_write(out, po);
}

void CpuBackend::embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) {
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
                                    bool accumulate_params) {
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
}

void CpuBackend::attention_forward(const Tensor& qkv, int64_t B, int64_t T, int64_t H, Tensor& y, Tensor& lse) {
  const int64_t d3 = qkv.dim(1), d = d3 / 3, hd = d / H;
  if (qkv.dim(0) != B * T || d3 != 3 * d || d % H != 0 || y.numel() != B * T * d)
    throw Error("attention_forward: shapes do not fit: qkv " + shape_str(qkv.shape()) + ", y " + shape_str(y.shape()) +
                ", B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H));
  check_fp32(lse, "attention lse", B * H * T);
  const float* pq = read_f32(qkv, 6, m_tf32);
  float* py = write_f32(y, 7, false);
  float* pl = lse.data<float>();
  float* s = slot_buffer(8, static_cast<size_t>(T * T));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int ti = static_cast<int>(T), hi = static_cast<int>(hd);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const float* q = pq + b * T * d3 + h * hd;
      const float* k = q + d;
      const float* v = q + 2 * d;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ti, ti, hi, scale, q, static_cast<int>(d3), k,
                  static_cast<int>(d3), 0.0f, s, ti);
      float* lrow = pl + (b * H + h) * T;
      for (int64_t i = 0; i < T; ++i) {
        float* row = s + i * T;
        float mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
        lrow[i] = mx + std::log(sum);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ti, hi, ti, 1.0f, s, ti, v, static_cast<int>(d3), 0.0f,
                  py + b * T * d + h * hd, static_cast<int>(d));
    }
  finish_write(y, py);
}

void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, int64_t B,
                                    int64_t T, int64_t H, Tensor& dqkv) {
  const int64_t d3 = qkv.dim(1), d = d3 / 3, hd = d / H;
  if (qkv.dim(0) != B * T || y.numel() != B * T * d || dy.numel() != B * T * d || dqkv.numel() != qkv.numel())
    throw Error("attention_backward: shapes do not fit: qkv " + shape_str(qkv.shape()) + ", dy " + shape_str(dy.shape()));
  check_fp32(lse, "attention lse", B * H * T);
  const float* pq = read_f32(qkv, 6, m_tf32);
  const float* py = read_f32(y, 7);
  const float* pdy = read_f32(dy, 8);
  float* pdq = write_f32(dqkv, 9, false);
  float* p = slot_buffer(10, static_cast<size_t>(T * T));
  float* dp = slot_buffer(11, static_cast<size_t>(T * T));
  std::vector<float> dyr;
  if (m_tf32) {
    dyr.assign(pdy, pdy + B * T * d);
    for (auto& v : dyr) v = tf32_round(v);
  }
  const float* pdy_mm = m_tf32 ? dyr.data() : pdy;
  const float* pl = lse.data<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int ti = static_cast<int>(T), hi = static_cast<int>(hd), ld3 = static_cast<int>(d3), ld = static_cast<int>(d);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const float* q = pq + b * T * d3 + h * hd;
      const float* k = q + d;
      const float* v = q + 2 * d;
      const float* gy = pdy_mm + b * T * d + h * hd;
      const float* gy_exact = pdy + b * T * d + h * hd;
      const float* yy = py + b * T * d + h * hd;
      float* dq = pdq + b * T * d3 + h * hd;
      float* dk = dq + d;
      float* dv = dq + 2 * d;
      const float* lrow = pl + (b * H + h) * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ti, ti, hi, scale, q, ld3, k, ld3, 0.0f, p, ti);
      for (int64_t i = 0; i < T; ++i) {
        float* row = p + i * T;
        for (int64_t j = 0; j <= i; ++j) row[j] = std::exp(row[j] - lrow[i]);
        for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, hi, ti, 1.0f, p, ti, gy, ld, 0.0f, dv, ld3);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ti, ti, hi, 1.0f, gy, ld, v, ld3, 0.0f, dp, ti);
      for (int64_t i = 0; i < T; ++i) {
        float di = 0.0f;
        for (int64_t c = 0; c < hd; ++c) di += gy_exact[i * d + c] * yy[i * d + c];
        float* prow = p + i * T;
        float* drow = dp + i * T;
        for (int64_t j = 0; j <= i; ++j) drow[j] = prow[j] * (drow[j] - di);
        for (int64_t j = i + 1; j < T; ++j) drow[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ti, hi, ti, scale, dp, ti, k, ld3, 0.0f, dq, ld3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, hi, ti, scale, dp, ti, q, ld3, 0.0f, dk, ld3);
    }
  finish_write(dqkv, pdq);
}

}  // namespace trainlab
