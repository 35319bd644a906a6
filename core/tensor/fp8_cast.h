// The casts of the fp8 matrix products (kernels/fp8.cu's cast kernel, the CPU's Fp8 products,
// backend/cpu_fp8.cpp): as tensor/dtype.h's fp8 casts, but saturating in both formats, as CUDA's
// __NV_SATFINITE (e4m3: 448 and above give +-448, as its own cast; e5m2: 57,344 and above, inf
// included, give +-57,344 where the storage cast gives inf from 61,440 up), so a gradient that
// outgrows its delayed scale is clipped rather than turned into inf; NaN gives 0x7F.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace trainlab {

// dst[i] = the code of src[i] in fp8 format t (vectorised). Throws for formats other than fp8.
void cast_fp8_saturating(const float* src, DType t, uint8_t* dst, size_t n);

// dst[i] = round_scaled_n's value (tensor/dtype.h) of the fp32 of src[i], for n values of src_type:
// a product's operand cast in one pass, which also returns the largest |x| of the values before
// the scale as fp32 bits (NaNs left out; 0x7F800000 when a value is infinite), the maximum the
// delayed scaling records. Throws for formats t other than fp8.
uint32_t convert_round_scaled(DType src_type, const void* src, DType t, float scale, float* dst, size_t n);
// The same over `rows` rows of `cols` values, row r at src + r * src_stride bytes, into dst[rows, cols]
// (dense): one call for a block of a product's operand.
uint32_t convert_round_scaled_rows(DType src_type, const void* src, size_t src_stride, size_t rows, size_t cols, DType t,
                                   float scale, float* dst);

}  // namespace trainlab
