// kernels/fp8.cuh: casts to fp8 with per-tensor delayed scaling, for cuBLASLt's fp8 products.
//
// Math: delayed scaling as core/tensor/fp8_scaling.h states it (the functions there are the ones
// this kernel calls, and the CPU backend too): with the history h[0..16) of a tensor's recent
// maxima |x| and the step t (read from the device-side step scalars), slot s = t mod 16;
//   scale = fmax / max(h over slots other than s, s+1)  (1 while that is 0)
//   q = fp8(x * scale)   (both formats saturating: __NV_SATFINITE, tensor/dtype.h's cast_fp8_saturating)
//   inv_scale_out = 1 / scale  (the product's dequant factor)
//   h[s] = max(h[s], max |x|) (finite, positive maxima only);  h[s+1] = 0
// Options: relu_mask (same layout as x): x is first multiplied by [mask > 0] (the ReLU backward
// fused into the cast of a gradient); out_t receives the transposed cast ([cols, rows]) in the
// same pass (the backward products need K-major operands).
// Layout: x row-major [rows, cols] in any float format. Precision: fp32 in, one rounding to fp8.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"
#include "tensor/fp8_scaling.h"

namespace trainlab::kern {

void launch_cast_fp8(const void* x, int x_dt, const void* relu_mask, int64_t rows, int64_t cols, void* out,
                     void* out_t, int fp8_dt, float* history, float* inv_scale_out, const DevScalars* sc,
                     cudaStream_t s);

// out[i] = fp8 code q[i] as fp32 (exact) x *f0 x *f1 (either factor may be null: 1), for the
// emulated fp8 product where the GPU has no fp8 units or cuBLASLt refuses a shape (fp8_gemm.h).
void launch_dequant_fp8(const void* q, int fp8_dt, int64_t n, const float* f0, const float* f1, float* out,
                        cudaStream_t s);

}  // namespace trainlab::kern
