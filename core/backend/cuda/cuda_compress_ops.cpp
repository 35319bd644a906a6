// CudaBackend's compression operations (issue 5; numerics in backend/backend.h, kernels in
// kernels/quant.cu): fake quantization (bit-identical to the CPU), int8 quantization of
// activations, the exact int8 x int8 -> int32 product, the W8A8 linear layer with one rescale at
// the end, and the distillation gradient.
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_checks.h"
#include "backend/compress_checks.h"
#include "quant.cuh"

namespace trainlab::cuda {

using namespace trainlab::kern;

namespace {
bool float_format(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F8E4M3 || t == DType::F8E5M2;
}
}  // namespace

void CudaBackend::fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) {
  bind();
  compress_checks::fake_quantize(w, out, bits, group);
  if (!float_format(w.dtype()) || !float_format(out.dtype()))
    throw Error(std::string("fake_quantize: float tensors expected, got ") + dtype_name(w.dtype()) + " -> " +
                dtype_name(out.dtype()));
  const int64_t n = w.numel();
  if (n == 0) return;
  TimedOp timed(this, "fake_quantize", m_kernel_timing);
  // One fp32 bit pattern per group for the group maxima (the caching allocator keeps the block
  // until the stream has used it: blocks are only reused by later work on the same stream).
  const int64_t groups = (n + group - 1) / group;
  Tensor maxima = empty({groups}, DType::I32, MemCategory::Workspace);
  launch_fake_quantize(w.raw(), dcode(w.dtype()), out.raw(), dcode(out.dtype()), n, bits, group,
                       static_cast<uint32_t*>(maxima.raw()), m_ctx.stream);
}

void CudaBackend::quantize_i8(const Tensor& x, float scale, Tensor& q) {
  bind();
  compress_checks::quantize_i8(x, q);
  if (!float_format(x.dtype())) throw Error(std::string("quantize_i8: a float input expected, got ") + dtype_name(x.dtype()));
  TimedOp timed(this, "quantize_i8", m_kernel_timing);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;  // computed here, as the CPU does
  launch_quantize_i8(x.raw(), dcode(x.dtype()), inv, q.data<int8_t>(), x.numel(), m_ctx.stream);
}

void CudaBackend::gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) {
  bind();
  const auto [m, n, k] = compress_checks::gemm_i8(a, b, c);
  TimedOp timed(this, "gemm_i8", m_kernel_timing);
  launch_gemm_i8(a.data<int8_t>(), b.data<int8_t>(), c.data<int32_t>(), m, n, k, m_ctx.stream);
}

void CudaBackend::int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales,
                              const Tensor* bias, Activation act, Tensor& y) {
  bind();
  const auto [m, n, k] = compress_checks::int8_linear(xq, wq, w_scales, bias, y);
  if (!float_format(y.dtype())) throw Error(std::string("int8_linear: a float output expected, got ") + dtype_name(y.dtype()));
  TimedOp timed(this, "int8_linear", m_kernel_timing);
  const Tensor ws = as_format(w_scales, DType::F32, 4);
  Tensor pb;
  if (bias) pb = as_format(*bias, DType::F32, 5);
  launch_int8_linear(xq.data<int8_t>(), wq.data<int8_t>(), m, n, k, x_scale, ws.data<float>(), w_scales.numel(),
                     bias ? pb.data<float>() : nullptr, act_code(act), y.raw(), dcode(y.dtype()), m_ctx.stream);
}

void CudaBackend::distill_backward(const Tensor& zs, const Tensor& zt, float temperature, float alpha,
                                   float grad_multiplier, Tensor& dlogits, Tensor* kl_sum, bool accumulate) {
  bind();
  compress_checks::distill(zs, zt, dlogits, temperature, kl_sum);
  const int64_t b = zs.dim(0), c = zs.dim(1);
  TimedOp timed(this, "distill_backward", m_kernel_timing);
  note_scalar_read();  // the loss scale comes from the device-side step scalars
  Tensor row_kl = empty({b * 2}, DType::F32, MemCategory::Workspace);  // b doubles
  launch_distill_backward(zs.raw(), dcode(zs.dtype()), zt.raw(), dcode(zt.dtype()), b, c, temperature, alpha,
                          grad_multiplier, m_ctx.scalars, dlogits.raw(), dcode(dlogits.dtype()),
                          static_cast<double*>(row_kl.raw()), kl_sum ? kl_sum->data<float>() : nullptr, accumulate,
                          m_ctx.stream);
}

}  // namespace trainlab::cuda
