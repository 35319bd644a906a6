// CudaBackend's matrix products: gemm, and the linear layer's forward and backward (bias and
// activation fused), on the fused tiles of kernels/gemm.cu for small products and cuBLASLt
// (lt_gemm.h) for large ones; fp8 through fp8_gemm.h.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_checks.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/lt_gemm.h"
#include "elementwise.cuh"
#include "gemm.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

namespace {
bool gemm_format(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
// Products of at least this much work (m * n * k) go to cuBLASLt (lt_gemm.h); smaller ones (the
// digits MLP's 128 x 256 x 256 and below) stay on the fused tiles of kernels/gemm.cu, which beat
// cuBLAS's setup there.
constexpr int64_t kLtMinWork = int64_t(1) << 24;
bool lt_size(int64_t m, int64_t n, int64_t k) { return m * n * k >= kLtMinWork; }
// A linear layer's weight gradient as one tile problem: dW[n, k] (+)= sum_b g[b, n] x[b, k] for
// g [m, n] and x [m, k] (linear_backward's first product, and linear_backward_lt's fallback).
GemmProblem dw_problem(const Tensor& g, const Tensor& x, Tensor& dw, int64_t m, int64_t n, int64_t k, bool accumulate,
                       bool tf32) {
  GemmProblem p;
  p.a = g.raw(), p.sam = 1, p.sak = n;
  p.b = x.raw(), p.sbk = k, p.sbn = 1;
  p.c = dw.raw(), p.ldc = k, p.c_dt = dcode(dw.dtype());
  p.m = static_cast<int>(n), p.n = static_cast<int>(k), p.k = static_cast<int>(m);
  p.beta = accumulate ? 1.0f : 0.0f;
  p.tf32 = tf32;
  return p;
}
}  // namespace

// --- matrix products ---------------------------------------------------------------------------
// Fp8 products run through Fp8Gemm in linear_forward / linear_backward (on the fp8 units where
// the GPU has them, emulated exactly otherwise); gemm and every product elsewhere compute Fp8 as
// Native on the stored (bf16) values, as the CPU backend does. Tf32 applies to fp32 inputs only (16-bit inputs already have fewer bits).
void CudaBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
                       float beta, MatmulMode mode) {
  bind();
  const auto [m, n, k] = gemm_dims(a, trans_a, b, trans_b, c);
  TL_TIMED_COST("gemm", gemm_cost(a, trans_a, b, c, beta));
  const DType in = (a.dtype() == b.dtype() && gemm_format(a.dtype())) ? a.dtype() : DType::F32;
  const Tensor pa = as_format(a, in, 1), pb = as_format(b, in, 2);
  if (lt_size(m, n, k)) {
    LtProblem q;
    q.a = pa.raw(), q.trans_a = trans_a, q.b = pb.raw(), q.trans_b = trans_b, q.c = c.raw();
    q.m = m, q.n = n, q.k = k, q.in = in, q.out = c.dtype(), q.alpha = alpha, q.beta = beta;
    q.tf32 = mode == MatmulMode::Tf32 && in == DType::F32;
    if (LtGemm::eligible(q) && m_lt_gemm->run(q)) return;
  }
  GemmProblem p;
  p.a = pa.raw();
  p.sam = trans_a ? 1 : a.dim(1);
  p.sak = trans_a ? a.dim(1) : 1;
  p.b = pb.raw();
  p.sbk = trans_b ? 1 : b.dim(1);
  p.sbn = trans_b ? b.dim(1) : 1;
  p.c = c.raw();
  p.ldc = n;
  p.c_dt = dcode(c.dtype());
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  p.alpha = alpha, p.beta = beta;
  p.tf32 = mode == MatmulMode::Tf32 && in == DType::F32;
  launch_gemm(dcode(in), &p, 1, m_ctx.stream);
}

void CudaBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                                 Tensor* pre, MatmulMode mode) {
  bind();
  const auto [m, n, k] = linear_dims(x, w, y);
  TL_TIMED_COST("linear_forward", linear_forward_cost(x, w, bias, y));
  const bool fp8 = mode == MatmulMode::Fp8;
  if (fp8) note_scalar_read();
  if (fp8 && m_fp8_gemm->forward(x, w, bias, act, y, pre)) return;
  const DType in = gemm_format(w.dtype()) ? w.dtype() : DType::F32;
  const bool tf32 = mode == MatmulMode::Tf32 && in == DType::F32;
  const Tensor px = as_format(x, in, 1), pw = as_format(w, in, 2);
  if (act == Activation::None && !pre && lt_size(m, n, k)) {
    LtProblem q;
    q.a = px.raw(), q.b = pw.raw(), q.trans_b = true, q.c = y.raw();
    q.m = m, q.n = n, q.k = k, q.in = in, q.out = y.dtype();
    q.tf32 = tf32;
    Tensor pb;
    if (bias) {
      pb = as_format(*bias, y.dtype(), 3);  // the epilogue reads the bias in the output's format
      q.bias = pb.raw();
    }
    if (LtGemm::eligible(q) && m_lt_gemm->run(q)) return;
  }
  GemmProblem p;
  p.a = px.raw(), p.sam = k, p.sak = 1;
  p.b = pw.raw(), p.sbk = 1, p.sbn = k;
  p.c = y.raw(), p.ldc = n, p.c_dt = dcode(y.dtype());
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  if (bias) p.bias = bias->raw(), p.bias_dt = dcode(bias->dtype());
  if (pre) {
    if (pre->dtype() != y.dtype()) throw Error("linear_forward: pre-activation and output formats differ");
    p.pre = pre->raw();
  }
  p.act = act_code(act);
  p.tf32 = tf32;
  launch_gemm(dcode(in), &p, 1, m_ctx.stream);
}

// y = x w^T + bias + residual, one rounding: cuBLASLt reads the residual as its C (beta 1, D = y);
// the tiles of kernels/gemm.cu take C in place, so there the residual is first copied into y. fp8
// products (their own kernels) add it afterwards, a second rounding.
void CudaBackend::linear_forward_residual(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& residual,
                                          Tensor& y, MatmulMode mode) {
  bind();
  const auto [m, n, k] = linear_dims(x, w, y);
  if (residual.numel() != y.numel() || residual.dtype() != y.dtype())
    throw Error("linear_forward_residual: residual " + std::string(dtype_name(residual.dtype())) + " " +
                shape_str(residual.shape()) + " does not match y " + dtype_name(y.dtype()) + " " + shape_str(y.shape()));
  if (mode == MatmulMode::Fp8) {
    linear_forward(x, w, bias, Activation::None, y, nullptr, mode);
    add(residual, y, y);
    return;
  }
  TL_TIMED_COST("linear_forward", linear_forward_cost(x, w, bias, y, &residual));
  const DType in = gemm_format(w.dtype()) ? w.dtype() : DType::F32;
  const bool tf32 = mode == MatmulMode::Tf32 && in == DType::F32;
  const Tensor px = as_format(x, in, 1), pw = as_format(w, in, 2);
  if (lt_size(m, n, k)) {
    LtProblem q;
    q.a = px.raw(), q.b = pw.raw(), q.trans_b = true, q.c = y.raw(), q.c_src = residual.raw(), q.beta = 1.0f;
    q.m = m, q.n = n, q.k = k, q.in = in, q.out = y.dtype();
    q.tf32 = tf32;
    Tensor pb;
    if (bias) {
      pb = as_format(*bias, y.dtype(), 3);
      q.bias = pb.raw();
    }
    if (LtGemm::eligible(q) && m_lt_gemm->run(q)) return;
  }
  if (residual.raw() != y.raw())
    TL_CUDA_CHECK(cudaMemcpyAsync(y.raw(), residual.raw(), y.bytes(), cudaMemcpyDeviceToDevice, m_ctx.stream));
  GemmProblem p;
  p.a = px.raw(), p.sam = k, p.sak = 1;
  p.b = pw.raw(), p.sbk = 1, p.sbn = k;
  p.c = y.raw(), p.ldc = n, p.c_dt = dcode(y.dtype());
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  p.beta = 1.0f;
  if (bias) p.bias = bias->raw(), p.bias_dt = dcode(bias->dtype());
  p.tf32 = tf32;
  launch_gemm(dcode(in), &p, 1, m_ctx.stream);
}

void CudaBackend::linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved,
                                  Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate, MatmulMode mode) {
  bind();
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (dy.dim(0) != m || dy.dim(1) != n || dw.dim(0) != n || dw.dim(1) != k)
    throw Error("linear backward shape mismatch: dy " + shape_str(dy.shape()) + ", dw " + shape_str(dw.shape()));
  if (act != Activation::None && !saved) throw Error("linear backward with an activation needs the saved tensor");
  TL_TIMED_COST("linear_backward", linear_backward_cost(x, w, dy, dw, dbias, dx, accumulate));
  const bool fp8 = mode == MatmulMode::Fp8;
  if (fp8) note_scalar_read();
  if (fp8 && m_fp8_gemm->backward(x, w, dy, act, saved, dw, dbias, dx, accumulate)) return;
  const DType in = gemm_format(dy.dtype()) ? dy.dtype() : DType::F32;
  const Tensor g = as_format(dy, in, 0), px = as_format(x, in, 1), pw = as_format(w, in, 2);
  Tensor ps;
  if (act != Activation::None) ps = as_format(*saved, in, 3);
  const bool tf32 = mode == MatmulMode::Tf32 && in == DType::F32;
  if (act == Activation::None && lt_size(m, n, k) && linear_backward_lt(g, px, pw, m, n, k, tf32, dw, dbias, dx, accumulate))
    return;
  // One launch: dW[n, k] (+)= sum_b g'[b, n] x[b, k];  dbias[n] (+)= sum_b g'[b, n] (the ones column,
  // never tf32-rounded, as the CPU sums the unrounded g');  dx[b, k] = sum_n g'[b, n] w[n, k].
  GemmProblem probs[3];
  int count = 0;
  const bool separate_bias = dbias && tf32;
  {
    GemmProblem& p = probs[count++];
    p = dw_problem(g, px, dw, m, n, k, accumulate, tf32);
    if (act != Activation::None) p.a_mask = ps.raw(), p.a_mask_act = act_code(act);
    if (dbias && !separate_bias) {
      p.ones_col = true;
      p.bias_grad = dbias->raw();
      p.bias_grad_dt = dcode(dbias->dtype());
    }
  }
  if (separate_bias) {
    GemmProblem& p = probs[count++];
    p = probs[0];
    p.n = 0, p.c = nullptr, p.tf32 = false;
    p.ones_col = true;
    p.bias_grad = dbias->raw();
    p.bias_grad_dt = dcode(dbias->dtype());
  }
  if (dx) {
    GemmProblem& p = probs[count++];
    p.a = g.raw(), p.sam = n, p.sak = 1;
    p.b = pw.raw(), p.sbk = k, p.sbn = 1;
    p.c = dx->raw(), p.ldc = k, p.c_dt = dcode(dx->dtype());
    p.m = static_cast<int>(m), p.n = static_cast<int>(k), p.k = static_cast<int>(n);
    p.tf32 = tf32;
    if (act != Activation::None) p.a_mask = ps.raw(), p.a_mask_act = act_code(act);
  }
  launch_gemm(dcode(in), probs, count, m_ctx.stream);
}

// The large-product linear backward (no activation) on cuBLASLt: dW (+)= g^T x with dbias from
// the BGRADB epilogue (bf16/fp16, when not accumulating) or a deterministic column sum, and
// dx = g w. Returns false, having written nothing, when cuBLASLt refuses a product.
bool CudaBackend::linear_backward_lt(const Tensor& g, const Tensor& px, const Tensor& pw, int64_t m, int64_t n, int64_t k,
                                     bool tf32, Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate) {
  const DType in = g.dtype();
  LtProblem pdw;
  pdw.a = g.raw(), pdw.trans_a = true, pdw.b = px.raw(), pdw.c = dw.raw();
  pdw.m = n, pdw.n = k, pdw.k = m, pdw.in = in, pdw.out = dw.dtype(), pdw.beta = accumulate ? 1.0f : 0.0f;
  pdw.tf32 = tf32;
  LtProblem pdx;
  if (dx) {
    pdx.a = g.raw(), pdx.b = pw.raw(), pdx.c = dx->raw();
    pdx.m = m, pdx.n = k, pdx.k = n, pdx.in = in, pdx.out = dx->dtype(), pdx.tf32 = tf32;
  }
  if (!LtGemm::eligible(pdw) || (dx && !LtGemm::eligible(pdx))) return false;
  // dx first: it only reads g, so a refusal of dW afterwards still leaves nothing half-written
  // that the fallback would not redo.
  if (dx && !m_lt_gemm->run(pdx)) return false;
  bool bias_done = false;
  if (dbias && !accumulate && in != DType::F32 && dbias->dtype() == dw.dtype()) {
    LtProblem q = pdw;
    q.row_sums = dbias->raw();
    bias_done = LtGemm::eligible(q) && m_lt_gemm->run(q);
  }
  if (!bias_done && !m_lt_gemm->run(pdw)) {
    if (!dx) return false;
    const GemmProblem p = dw_problem(g, px, dw, m, n, k, accumulate, tf32);  // dW on the tiles (dx is already done)
    launch_gemm(dcode(in), &p, 1, m_ctx.stream);
  }
  if (dbias && !bias_done) {
    float* partial = reduce_scratch(column_sums_workspace(m, n));
    launch_column_sums(g.raw(), dcode(in), m, n, dbias->raw(), dcode(dbias->dtype()), accumulate, partial, m_ctx.stream);
  }
  return true;
}

}  // namespace trainlab::cuda
