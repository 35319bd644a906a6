// kernels/quant.cuh: the compression kernels (issue 5), the device side of the Backend's
// "compression operations" (numerics stated in core/backend/backend.h, CPU reference in
// core/compress/cpu_compress_ops.cpp and core/compress/quant.cpp).
//
// Math:
//   fake_quantize: per group of `group` consecutive row-major elements (the last one may be short)
//     s = fp16(max|w| / qmax) (inf -> 65504), qmax = 2^(bits-1) - 1;  out = s * clamp(rne(w / s), -qmax, qmax)
//     The group maximum is exact in any order, the division is IEEE (no fast math) and the fp16
//     rounding is RNE, so the result is bit-identical to the CPU's.
//   quantize_i8: q = clamp(rne(x * inv_scale), -127, 127) with inv_scale = 1/scale computed on the host
//     (as the CPU does), so again bit-identical.
//   gemm_i8: c[M, N] (int32) = a[M, K] (int8) * b[N, K]^T, tiles of 64 x 64 x 64 in shared memory and
//     __dp4a (4 int8 products summed into int32 per instruction): exact, any M, N, K and alignment.
//   int8_linear: the same product with the epilogue y = act(float(acc) * (x_scale * w_scale[n]) + bias[n])
//     fused (one rescale, products and sums rounded separately as on the CPU: no fma contraction).
//   distill_backward: one block per row; softmaxes of zs/T and zt/T in fp32, the row's T^2 KL in fp64,
//     summed over rows in order by a second one-block kernel (deterministic).
// Layout: row-major, contiguous; float tensors of any format (ld/st of device_common.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

// group_max: scratch of ceil(n / group) uint32 (fp32 bit patterns of the group maxima).
void launch_fake_quantize(const void* w, int w_dt, void* out, int out_dt, int64_t n, int bits, int64_t group,
                          uint32_t* group_max, cudaStream_t s);
void launch_quantize_i8(const void* x, int x_dt, float inv_scale, int8_t* q, int64_t n, cudaStream_t s);
void launch_gemm_i8(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k, cudaStream_t s);
// act: 0 none, 1 ReLU, 2 GELU. w_scales fp32 with n_scales = 1 or n; bias fp32 [n] or null.
void launch_int8_linear(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, float x_scale,
                        const float* w_scales, int64_t n_scales, const float* bias, int act, void* y, int y_dt,
                        cudaStream_t s);
// row_kl: scratch of `rows` doubles; kl_sum (fp32 [1]) or null.
void launch_distill_backward(const void* zs, int zs_dt, const void* zt, int zt_dt, int64_t rows, int64_t cols,
                             float temperature, float alpha, float grad_multiplier, const DevScalars* scalars,
                             void* dlogits, int dl_dt, double* row_kl, float* kl_sum, bool accumulate,
                             cudaStream_t s);

}  // namespace trainlab::kern
