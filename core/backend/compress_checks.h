// Argument checks of the Backend's compression operations (backend/backend.h), shared by the CPU
// and CUDA backends so that both reject the same calls with the same messages.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "tensor/tensor.h"
#include "util/error.h"

namespace trainlab::compress_checks {

inline void i8_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2 || t.dtype() != DType::I8)
    throw Error(std::string(what) + " must be an int8 matrix, got " + dtype_name(t.dtype()) + " " + shape_str(t.shape()));
}

// Exact int32 accumulation: |a*b| <= 128*128 and K < 2^17 keep every partial sum inside int32.
inline void i8_depth(int64_t k, const char* op) {
  if (k >= (1 << 17)) throw Error(std::string(op) + ": K = " + std::to_string(k) + " could overflow int32 accumulation");
}

inline void fake_quantize(const Tensor& w, const Tensor& out, int bits, int64_t group) {
  if (bits < 2 || bits > 8) throw Error("fake_quantize: bits must be 2..8, got " + std::to_string(bits));
  if (w.numel() != out.numel()) throw Error("fake_quantize: input and output sizes differ");
  if (group <= 0) throw Error("fake_quantize: group must be positive");
}

inline void quantize_i8(const Tensor& x, const Tensor& q) {
  if (q.dtype() != DType::I8 || q.numel() != x.numel()) throw Error("quantize_i8: output must be int8 of the input's size");
}

// {m, n, k} of c [m, n] (int32) = a [m, k] b [n, k]^T.
inline std::array<int64_t, 3> gemm_i8(const Tensor& a, const Tensor& b, const Tensor& c) {
  i8_matrix(a, "gemm_i8 A");
  i8_matrix(b, "gemm_i8 B");
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(0);
  if (b.dim(1) != k || c.rank() != 2 || c.dim(0) != m || c.dim(1) != n || c.dtype() != DType::I32)
    throw Error("gemm_i8 shape mismatch: " + shape_str(a.shape()) + " x " + shape_str(b.shape()) + "^T -> " +
                shape_str(c.shape()) + " (int32)");
  i8_depth(k, "gemm_i8");
  return {m, n, k};
}

// {m, n, k} of y [m, n] = act(xq [m, k] wq [n, k]^T * scales + bias).
inline std::array<int64_t, 3> int8_linear(const Tensor& xq, const Tensor& wq, const Tensor& w_scales,
                                          const Tensor* bias, const Tensor& y) {
  i8_matrix(xq, "int8_linear input");
  i8_matrix(wq, "int8_linear weight");
  const int64_t m = xq.dim(0), k = xq.dim(1), n = wq.dim(0);
  if (wq.dim(1) != k || y.rank() != 2 || y.dim(0) != m || y.dim(1) != n)
    throw Error("int8_linear shape mismatch: x " + shape_str(xq.shape()) + ", w " + shape_str(wq.shape()) + ", y " +
                shape_str(y.shape()));
  if (w_scales.numel() != n && w_scales.numel() != 1)
    throw Error("int8_linear: w_scales must have 1 or " + std::to_string(n) + " values");
  if (bias && bias->numel() != n) throw Error("int8_linear: bias must have " + std::to_string(n) + " values");
  i8_depth(k, "int8_linear");
  return {m, n, k};
}

inline void distill(const Tensor& zs, const Tensor& zt, const Tensor& dlogits, float temperature, const Tensor* kl_sum) {
  if (zs.rank() != 2 || zs.shape() != zt.shape() || dlogits.shape() != zs.shape())
    throw Error("distill_backward: student " + shape_str(zs.shape()) + ", teacher " + shape_str(zt.shape()) +
                " and gradient " + shape_str(dlogits.shape()) + " logits must have one shape");
  if (temperature <= 0.0f) throw Error("distill_backward: the temperature must be positive");
  if (kl_sum && kl_sum->dtype() != DType::F32) throw Error("distill_backward: kl_sum must be fp32");
}

}  // namespace trainlab::compress_checks
