// CudaBackend: the transformer operations of issue 4 apart from attention (cuda_attention.cpp):
// embedding, LayerNorm, add, GELU and dropout over kernels/transformer_ops.cu. Shapes are checked
// here with the same messages as the CPU reference; the kernels do the math (see
// transformer_ops.cuh for precision and the deterministic reductions).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_checks.h"
#include "transformer_ops.cuh"
#include "util/error.h"

#include <initializer_list>

namespace trainlab::cuda {

using namespace trainlab::kern;


namespace {
void check_fp32(const Tensor& t, const char* what, int64_t n) {
  if (t.dtype() != DType::F32 || t.numel() != n)
    throw Error(std::string(what) + " must be fp32 with " + std::to_string(n) + " elements, got " +
                dtype_name(t.dtype()) + " " + shape_str(t.shape()));
}
void check_float(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype() != DType::F32 && t->dtype() != DType::BF16 && t->dtype() != DType::F16)
      throw Error(std::string(op) + ": " + dtype_name(t->dtype()) + " tensors are not supported on CUDA (fp32, bf16, fp16)");
}
}  // namespace

float* CudaBackend::reduce_scratch(int64_t floats) {
  if (!m_reduce_scratch.defined() || m_reduce_scratch.numel() < floats) {
    if (m_ctx.capturing)
      throw Error("transformer operation: scratch would grow during a captured step (run the step eagerly first)");
    m_reduce_scratch = Tensor();
    m_reduce_scratch = empty({floats}, DType::F32, MemCategory::Workspace);
  }
  return m_reduce_scratch.data<float>();
}

void CudaBackend::embedding_forward(const Tensor& tok, const Tensor& pos, const Tensor& idx, int64_t T, Tensor& out) {
  bind();
  if (idx.dtype() != DType::I32) throw Error("embedding_forward: token indices must be int32");
  const int64_t n = idx.numel(), d = tok.dim(1), vocab = tok.dim(0);
  if (T <= 0 || n % T != 0 || T > pos.dim(0) || pos.dim(1) != d || out.numel() != n * d)
    throw Error("embedding_forward: shapes do not fit: tok " + shape_str(tok.shape()) + ", pos " + shape_str(pos.shape()) +
                ", " + std::to_string(n) + " tokens in rows of " + std::to_string(T) + ", out " + shape_str(out.shape()));
  check_float("embedding_forward", {&tok, &pos, &out});
  TL_TIMED_COST("embedding_forward", stream_cost({&idx, &out}, {&out}, op_flops::kEmbedding));
  launch_embedding_forward(tok.raw(), dcode(tok.dtype()), vocab, pos.raw(), dcode(pos.dtype()), idx.data<int32_t>(), n, T,
                           d, out.raw(), dcode(out.dtype()), m_ctx.stream);
}

void CudaBackend::embedding_backward(const Tensor& dout, const Tensor& idx, int64_t T, Tensor& dtok, Tensor& dpos,
                                     bool accumulate) {
  bind();
  if (idx.dtype() != DType::I32) throw Error("embedding_backward: token indices must be int32");
  const int64_t n = idx.numel(), d = dtok.dim(1), vocab = dtok.dim(0);
  if (dout.numel() != n * d || T <= 0 || n % T != 0 || T > dpos.dim(0) || dpos.dim(1) != d)
    throw Error("embedding_backward: shapes do not fit: dout " + shape_str(dout.shape()) + ", dtok " +
                shape_str(dtok.shape()) + ", dpos " + shape_str(dpos.shape()) + ", T " + std::to_string(T));
  check_float("embedding_backward", {&dout, &dtok, &dpos});
  float* partial = reduce_scratch(embedding_backward_workspace(n, vocab, d));
  TL_TIMED_COST("embedding_backward", stream_cost({&dout, &idx}, {&dtok, &dpos}, op_flops::kEmbedding));
  launch_embedding_backward(dout.raw(), dcode(dout.dtype()), idx.data<int32_t>(), n, T, d, dtok.raw(),
                            dcode(dtok.dtype()), vocab, dpos.raw(), dcode(dpos.dtype()), dpos.dim(0), accumulate, partial,
                            m_ctx.stream);
}

void CudaBackend::layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                                    Tensor& mean, Tensor& rstd) {
  bind();
  const int64_t d = x.dim(-1), n = x.numel() / d;
  if (gamma.numel() != d || beta.numel() != d || y.numel() != x.numel())
    throw Error("layernorm_forward: shapes do not fit: x " + shape_str(x.shape()) + ", gamma " + shape_str(gamma.shape()));
  check_fp32(mean, "layernorm mean", n);
  check_fp32(rstd, "layernorm rstd", n);
  check_float("layernorm_forward", {&x, &gamma, &beta, &y});
  TL_TIMED_COST("layernorm_forward", stream_cost({&x, &gamma, &beta}, {&y, &mean, &rstd}, op_flops::kLayerNorm));
  launch_layernorm_forward(x.raw(), dcode(x.dtype()), gamma.raw(), dcode(gamma.dtype()), beta.raw(), dcode(beta.dtype()),
                           eps, n, d, y.raw(), dcode(y.dtype()), mean.data<float>(), rstd.data<float>(), m_ctx.stream);
}

void CudaBackend::layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool accumulate_dx,
                                     bool accumulate_params, Tensor* dx_sums) {
  bind();
  const int64_t d = x.dim(-1), n = x.numel() / d;
  if (dy.numel() != x.numel() || dx.numel() != x.numel() || dgamma.numel() != d || dbeta.numel() != d)
    throw Error("layernorm_backward: shapes do not fit: x " + shape_str(x.shape()) + ", dy " + shape_str(dy.shape()));
  check_fp32(mean, "layernorm mean", n);
  check_fp32(rstd, "layernorm rstd", n);
  check_float("layernorm_backward", {&x, &gamma, &dy, &dx, &dgamma, &dbeta});
  if (dx_sums) {
    if (dx_sums->numel() != d)
      throw Error("layernorm_backward: dx column sums " + shape_str(dx_sums->shape()) + " for rows of " + std::to_string(d));
    check_float("layernorm_backward", {dx_sums});
  }
  float* partial = reduce_scratch(layernorm_backward_workspace(n, d));
  TL_TIMED_COST("layernorm_backward", stream_cost({&x, &gamma, &mean, &rstd, &dy}, {&dx, &dgamma, &dbeta}, op_flops::kLayerNormBackward));
  launch_layernorm_backward(x.raw(), dcode(x.dtype()), gamma.raw(), dcode(gamma.dtype()), mean.data<float>(),
                            rstd.data<float>(), dy.raw(), dcode(dy.dtype()), n, d, dx.raw(), dcode(dx.dtype()),
                            accumulate_dx, dgamma.raw(), dcode(dgamma.dtype()), dbeta.raw(), dcode(dbeta.dtype()),
                            accumulate_params, partial, m_ctx.stream, dx_sums ? dx_sums->raw() : nullptr,
                            dx_sums ? dcode(dx_sums->dtype()) : 0);
}

void CudaBackend::dropout(const Tensor& x, float p, uint64_t seed, Tensor& y, uint64_t first) {
  bind();
  if (x.numel() != y.numel())
    throw Error("dropout: sizes differ: " + shape_str(x.shape()) + " -> " + shape_str(y.shape()));
  if (!(p >= 0.0f && p < 1.0f)) throw Error("dropout: probability " + std::to_string(p) + " outside [0, 1)");
  check_float("dropout", {&x, &y});
  // The seed is a kernel argument: a captured step would replay this call's mask forever. run_step
  // never captures a step whose first run drew masks; should a capture still meet one (dropout
  // switched on later), the call records nothing and run_step drops the capture and runs the
  // step eagerly, that key from then on.
  if (p > 0.0f) m_ctx.host_values_drawn = true;
  if (m_ctx.capturing && p > 0.0f) {
    m_ctx.capture_refused = true;
    return;
  }
  TL_TIMED_COST("dropout", stream_cost({&x}, {&y}, op_flops::kDropout));
  launch_dropout(x.raw(), dcode(x.dtype()), p, seed, first, y.raw(), dcode(y.dtype()), x.numel(), m_ctx.stream);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  bind();
  if (a.numel() != b.numel() || a.numel() != out.numel())
    throw Error("add: sizes differ: " + shape_str(a.shape()) + " + " + shape_str(b.shape()) + " -> " + shape_str(out.shape()));
  check_float("add", {&a, &b, &out});
  TL_TIMED_COST("add", stream_cost({&a, &b}, {&out}, op_flops::kAdd));
  launch_add(a.raw(), dcode(a.dtype()), b.raw(), dcode(b.dtype()), out.raw(), dcode(out.dtype()), out.numel(), m_ctx.stream);
}

void CudaBackend::gelu_forward(const Tensor& x, Tensor& y) {
  bind();
  if (x.numel() != y.numel()) throw Error("gelu_forward: sizes differ");
  check_float("gelu_forward", {&x, &y});
  TL_TIMED_COST("gelu_forward", stream_cost({&x}, {&y}, op_flops::kGelu));
  launch_gelu_forward(x.raw(), dcode(x.dtype()), y.raw(), dcode(y.dtype()), x.numel(), m_ctx.stream);
}

void CudaBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  bind();
  if (x.numel() != dy.numel() || x.numel() != dx.numel()) throw Error("gelu_backward: sizes differ");
  check_float("gelu_backward", {&x, &dy, &dx});
  TL_TIMED_COST("gelu_backward", stream_cost({&x, &dy}, {&dx}, op_flops::kGeluBackward));
  launch_gelu_backward(x.raw(), dcode(x.dtype()), dy.raw(), dcode(dy.dtype()), dx.raw(), dcode(dx.dtype()), x.numel(),
                       m_ctx.stream);
}

}  // namespace trainlab::cuda
