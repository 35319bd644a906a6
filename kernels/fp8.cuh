// kernels/fp8.cuh: casts to fp8 with per-tensor delayed scaling, for cuBLASLt's fp8 products.
//
// Math: with the history h[0..H) of a tensor's recent maxima |x| and the step t (read from the
// device-side step scalars), slot s = t mod H;  amax = max over the slots other than s and s+1;
//   scale = fmax / amax  (1 while the history is empty; fmax = 448 for e4m3, 57344 for e5m2)
//   q = fp8(x * scale)   (saturating)        inv_scale_out = 1 / scale  (the product's dequant factor)
//   h[s] = max(h[s], max |x|) ;  h[s+1] = 0  (so that it starts fresh on the next step)
// The scale of step t therefore comes from earlier steps only ("delayed" scaling).
// Options: relu_mask (same layout as x): x is first multiplied by [mask > 0] (the ReLU backward
// fused into the cast of a gradient); out_t receives the transposed cast ([cols, rows]) in the
// same pass (the backward products need K-major operands).
// Layout: x row-major [rows, cols] in any float format. Precision: fp32 in, one rounding to fp8.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

constexpr int kFp8History = 16;

void launch_cast_fp8(const void* x, int x_dt, const void* relu_mask, int64_t rows, int64_t cols, void* out,
                     void* out_t, int fp8_dt, float* history, float* inv_scale_out, const DevScalars* sc,
                     cudaStream_t s);

}  // namespace trainlab::kern
