// Number formats and their conversions.
//
// fp16 (1.5.10) and bf16 (1.8.7) are stored as uint16_t bit patterns. Conversions from fp32 round
// to nearest, ties to even, keep subnormals (fp16: down to 2^-24) and overflow to +-inf exactly as
// the formats do; NaN stays NaN. All arithmetic on these formats is done in fp32 by the caller.
// fp8 e4m3 (1.4.3, "fn": no inf, largest 448, NaN 0x7F/0xFF, subnormals down to 2^-9) and e5m2
// (1.5.2, largest 57,344, inf 0x7C, subnormals down to 2^-16) are one byte each; the casts from
// fp32 round to nearest even and give exactly the codes of CUDA's __nv_cvt_float_to_fp8 as the
// kernels call it: e4m3 saturating (overflow and inf give +-448), e5m2 not (61,440 and above give
// +-inf; the products' casts saturate both: fp8_cast.h); NaN gives 0x7F (test_cuda_fp8 checks).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace trainlab {

enum class DType : uint8_t { F32, F16, BF16, F8E4M3, F8E5M2, I32, I8, I4 };

const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // throws Error listing valid names
// Bytes for n elements (I4 packs two elements a byte).
size_t dtype_bytes(DType t, size_t n);
bool dtype_is_float(DType t);

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t b);
uint8_t f32_to_e4m3(float f);  // saturates to +-448 (the e4m3 "fn" variant has no inf)
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e5m2(float f);
float e5m2_to_f32(uint8_t v);

// The value f takes once stored in format t (identity for F32).
float round_to(DType t, float f);

// Bulk conversions between a typed buffer and fp32: vectorised, the same bits as the scalar
// functions above element by element.
void convert_to_f32(DType src_type, const void* src, float* dst, size_t n);
void convert_from_f32(const float* src, DType dst_type, void* dst, size_t n);
// The same for `rows` rows of `cols` values: row r of the strided side at src / dst + r * stride
// bytes, of the fp32 side at r * cols (to) or r * src_ld floats (from). One call for a block.
void convert_to_f32_rows(DType src_type, const void* src, size_t src_stride, size_t rows, size_t cols, float* dst);
void convert_from_f32_rows(const float* src, size_t src_ld, DType dst_type, void* dst, size_t dst_stride, size_t rows,
                           size_t cols);
// p[i] = round_to(t, p[i]) for n values (vectorised for fp16 and fp8).
void round_to_n(DType t, float* p, size_t n);
// dst[i] = the fp8 value of cast_fp8_saturating(src[i] * scale) (tensor/fp8_cast.h; the product
// rounded to fp32 first, as a device computes it): the fp8 grid values of a tensor cast with a
// per-tensor scale, not divided by it. src and dst may alias. Throws for other formats.
void round_scaled_n(DType t, float scale, const float* src, float* dst, size_t n);

}  // namespace trainlab
