// CudaBackend's compression operations (issue 5; numerics in backend/backend.h, kernels in
// kernels/quant.cu): fake quantization (bit-identical to the CPU), int8 quantization of
// activations, the exact int8 x int8 -> int32 product, the W8A8 linear layer with one rescale at
// the end, and the distillation gradient.
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "quant.cuh"

namespace trainlab::cuda {

using namespace trainlab::kern;

namespace {
void check_i8_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2 || t.dtype() != DType::I8)
    throw Error(std::string(what) + " must be an int8 matrix, got " + dtype_name(t.dtype()) + " " +
                shape_str(t.shape()));
}
bool float_format(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F8E4M3 || t == DType::F8E5M2;
}
int act_code(Activation a) { return a == Activation::ReLU ? 1 : a == Activation::GELU ? 2 : 0; }
}  // namespace

void CudaBackend::fake_quantize(const Tensor& w, Tensor& out, int bits, int64_t group) {
  bind();
  if (bits < 2 || bits > 8) throw Error("fake_quantize: bits must be 2..8, got " + std::to_string(bits));
  if (w.numel() != out.numel()) throw Error("fake_quantize: input and output sizes differ");
  if (group <= 0) throw Error("fake_quantize: group must be positive");
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
  if (q.dtype() != DType::I8 || q.numel() != x.numel()) throw Error("quantize_i8: output must be int8 of the input's size");
  if (!float_format(x.dtype())) throw Error(std::string("quantize_i8: a float input expected, got ") + dtype_name(x.dtype()));
  TimedOp timed(this, "quantize_i8", m_kernel_timing);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;  // computed here, as the CPU does
  launch_quantize_i8(x.raw(), dcode(x.dtype()), inv, q.data<int8_t>(), x.numel(), m_ctx.stream);
}

void CudaBackend::gemm_i8(const Tensor& a, const Tensor& b, Tensor& c) {
  bind();
  check_i8_matrix(a, "gemm_i8 A");
  check_i8_matrix(b, "gemm_i8 B");
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  if (b.dim(1) != k || c.rank() != 2 || c.dim(0) != m || c.dim(1) != n || c.dtype() != DType::I32)
    throw Error("gemm_i8 shape mismatch: " + shape_str(a.shape()) + " x " + shape_str(b.shape()) + "^T -> " +
                shape_str(c.shape()) + " (int32)");
  if (k >= (1 << 17)) throw Error("gemm_i8: K = " + std::to_string(k) + " could overflow int32 accumulation");
  TimedOp timed(this, "gemm_i8", m_kernel_timing);
  launch_gemm_i8(a.data<int8_t>(), b.data<int8_t>(), c.data<int32_t>(), m, n, k, m_ctx.stream);
}

void CudaBackend::int8_linear(const Tensor& xq, float x_scale, const Tensor& wq, const Tensor& w_scales,
                              const Tensor* bias, Activation act, Tensor& y) {
  bind();
  check_i8_matrix(xq, "int8_linear input");
  check_i8_matrix(wq, "int8_linear weight");
  const int64_t m = xq.dim(0), k = xq.dim(1), n = wq.dim(0);
  if (wq.dim(1) != k || y.rank() != 2 || y.dim(0) != m || y.dim(1) != n)
    throw Error("int8_linear shape mismatch: x " + shape_str(xq.shape()) + ", w " + shape_str(wq.shape()) + ", y " +
                shape_str(y.shape()));
  if (w_scales.numel() != n && w_scales.numel() != 1)
    throw Error("int8_linear: w_scales must have 1 or " + std::to_string(n) + " values");
  if (bias && bias->numel() != n) throw Error("int8_linear: bias must have " + std::to_string(n) + " values");
  if (!float_format(y.dtype())) throw Error(std::string("int8_linear: a float output expected, got ") + dtype_name(y.dtype()));
  if (k >= (1 << 17)) throw Error("int8_linear: K = " + std::to_string(k) + " could overflow int32 accumulation");
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
  if (zs.rank() != 2 || zs.shape() != zt.shape() || dlogits.shape() != zs.shape())
    throw Error("distill_backward: student " + shape_str(zs.shape()) + ", teacher " + shape_str(zt.shape()) +
                " and gradient " + shape_str(dlogits.shape()) + " logits must have one shape");
  if (temperature <= 0.0f) throw Error("distill_backward: the temperature must be positive");
  if (kl_sum && kl_sum->dtype() != DType::F32) throw Error("distill_backward: kl_sum must be fp32");
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
