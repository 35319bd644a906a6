#include "tensor/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <vector>

#include "tensor/fp8_cast.h"
#include "tensor/vector_clones.h"
#include "util/error.h"

namespace trainlab {

namespace {
constexpr uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
constexpr float float_of(uint32_t u) { return std::bit_cast<float>(u); }

// Branch-free bit-level codecs (the bulk loops below vectorise them; one element at a time they
// give the scalar functions' bits, which tests/unit/test_fp8.cpp checks). Selections are masks,
// not ?: or bool arithmetic, which GCC's vectoriser does not if-convert.
inline uint32_t mask_if(bool c) { return 0u - static_cast<uint32_t>(c); }
inline uint32_t pick(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }

// rne_shift: m >> shift rounded to nearest, ties to even (shift in [1, 31]).
inline uint32_t rne_shift(uint32_t m, uint32_t shift) {
  const uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const uint32_t up = static_cast<uint32_t>(rem > half) | (static_cast<uint32_t>(rem == half) & r);
  return r + (up & 1u);
}

// |x| (fp32 bits a, finite and below the format's overflow) -> the code of a small float format
// with kMant mantissa bits and exponent bias kBias, rounded to nearest even. Normal results drop
// the low 23 - kMant bits (a carry moves into the exponent); subnormal ones are the significand
// in units of 2^(1 - kBias - kMant), which is 0 below half the smallest subnormal (the shift is
// clamped to 31, where the rounding gives 0 for every 24-bit significand).
template <int kMant, int kBias>
inline uint32_t encode_magnitude(uint32_t a) {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - kBias) << 23;
  const uint32_t normal = rne_shift(a, 23 - kMant) - (static_cast<uint32_t>(127 - kBias) << kMant);
  const int32_t shift = 150 + (1 - kBias - kMant) - static_cast<int32_t>(a >> 23);
  const int32_t at_least_1 = shift < 1 ? 1 : shift;
  const uint32_t clamped = static_cast<uint32_t>(at_least_1 > 31 ? 31 : at_least_1);
  const uint32_t sub = rne_shift((a & 0x7FFFFFu) | 0x800000u, clamped);
  return pick(mask_if(a >= kMinNormal), normal, sub);
}

// fp16: 65,520 and above (a tie rounds to even: inf) overflow to inf, NaN is sign | 0x7FFF.
inline uint16_t encode_f16(uint32_t u) {
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  uint32_t code = encode_magnitude<10, 15>(a);
  code = pick(mask_if(a >= 0x477FF000u), 0x7C00u, code);
  code = pick(mask_if(a > 0x7F800000u), 0x7FFFu, code);
  return static_cast<uint16_t>(sign | code);
}

// e4m3 ("fn": no inf) and e5m2, as CUDA's __nv_cvt_float_to_fp8 computes them (cuda_fp8.hpp):
// e4m3 saturating (448 and above, inf included, give +-448: below the 464 tie everything rounds
// to 448 anyway); e5m2 as device_common.cuh's st() stores it (__NV_NOSAT: 61,440 = 57,344 + half
// a step and above, inf included, give +-inf) or, kSat, as the products' cast (fp8_cast.h:
// __NV_SATFINITE, 57,344 and above give +-57,344). A NaN gives 0x7F whatever its sign (CUDA
// canonicalises the NaN first).
inline uint8_t encode_e4m3(uint32_t u) {
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  const uint32_t code = pick(mask_if(a >= 0x43E00000u), 0x7Eu, encode_magnitude<3, 7>(a)) | sign;
  return static_cast<uint8_t>(pick(mask_if(a > 0x7F800000u), 0x7Fu, code));
}
template <bool kSat>
inline uint8_t encode_e5m2(uint32_t u) {
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  const uint32_t over = kSat ? pick(mask_if(a >= 0x47600000u), 0x7Bu, 0u) : pick(mask_if(a >= 0x47700000u), 0x7Cu, 0u);
  const uint32_t code = pick(mask_if(over != 0), over, encode_magnitude<2, 15>(a)) | sign;
  return static_cast<uint8_t>(pick(mask_if(a > 0x7F800000u), 0x7Fu, code));
}

// Codes -> fp32 bits, exact: normals re-biased, subnormals through an exact int -> float
// conversion and a power-of-two product, inf kept, NaN -> sign | 0x7FC00000 (decode_small's bits).
inline uint32_t decode_f16(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7FFFu;
  const uint32_t normal = (em << 13) + (112u << 23);
  const uint32_t sub = bits_of(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  const uint32_t special = pick(mask_if(em == 0x7C00u), 0x7F800000u, 0x7FC00000u);
  return sign | pick(mask_if(em >= 0x7C00u), special, pick(mask_if(em >= 0x400u), normal, sub));
}
inline uint32_t decode_e4m3(uint32_t c) {
  const uint32_t sign = (c & 0x80u) << 24, em = c & 0x7Fu;
  const uint32_t normal = (em << 20) + (120u << 23);
  const uint32_t sub = bits_of(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-9f);
  return sign | pick(mask_if(em == 0x7Fu), 0x7FC00000u, pick(mask_if(em >= 0x08u), normal, sub));
}
inline uint32_t decode_e5m2(uint32_t c) {
  const uint32_t sign = (c & 0x80u) << 24, em = c & 0x7Fu;
  const uint32_t normal = (em << 21) + (112u << 23);
  const uint32_t sub = bits_of(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-16f);
  const uint32_t special = pick(mask_if(em == 0x7Cu), 0x7F800000u, 0x7FC00000u);
  return sign | pick(mask_if(em >= 0x7Cu), special, pick(mask_if(em >= 0x04u), normal, sub));
}

// The scalar reference of the fp8 casts: a generic round-to-nearest-even encoder through frexp and
// nearbyint (independent of the bit-level codecs above, which the bulk conversions use; the unit
// tests compare the two) for formats with `ebits` exponent bits and `mbits` mantissa bits.
// `has_inf` false means the all-ones exponent is used for finite values (e4m3fn), and overflow
// saturates to the largest finite value. A NaN gives 0x7F whatever its sign, as CUDA's cast.
uint32_t encode_small(float f, int ebits, int mbits, bool has_inf, uint32_t max_finite_code) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 31) << (ebits + mbits);
  if (std::isnan(f)) return (1u << (ebits + mbits)) - 1;  // the canonical NaN
  const float a = std::fabs(f);
  if (std::isinf(a)) return sign | (has_inf ? ((1u << ebits) - 1) << mbits : max_finite_code);
  const int bias = (1 << (ebits - 1)) - 1;
  if (a == 0.0f) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.xxx * 2^exp
  const int emin = 1 - bias;
  // Quantum (spacing) at this exponent; subnormals share emin's spacing.
  const int q_exp = (exp < emin ? emin : exp) - mbits;
  const float scaled = std::ldexp(a, -q_exp);  // exact: a power-of-two scaling
  float r = std::nearbyint(scaled);            // ties to even in the default rounding mode
  uint32_t mant_total = static_cast<uint32_t>(r);
  // Re-normalise: r may have carried into the next binade.
  uint32_t code;
  if (exp < emin) {
    // subnormal (or rounds up to the smallest normal: mant_total == 1<<mbits gives exponent 1)
    code = mant_total;
  } else {
    int biased = exp + bias;
    if (mant_total >= (2u << mbits)) {
      mant_total >>= 1;
      biased += 1;
    }
    code = (static_cast<uint32_t>(biased) << mbits) | (mant_total & ((1u << mbits) - 1));
  }
  const uint32_t inf_code = ((1u << ebits) - 1) << mbits;
  if (has_inf) {
    if (code >= inf_code) return sign | inf_code;
  } else if (code > max_finite_code) {
    return sign | max_finite_code;
  }
  return sign | code;
}


float decode_small(uint32_t v, int ebits, int mbits, bool has_inf) {
  const uint32_t sign = (v >> (ebits + mbits)) & 1u;
  const uint32_t exp = (v >> mbits) & ((1u << ebits) - 1);
  const uint32_t mant = v & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  float out;
  if (exp == (1u << ebits) - 1 && has_inf) {
    out = mant ? NAN : INFINITY;
  } else if (exp == (1u << ebits) - 1 && !has_inf && mant == (1u << mbits) - 1) {
    out = NAN;  // e4m3fn: S.1111.111 is NaN
  } else if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), 1 - bias - mbits);
  } else {
    out = std::ldexp(static_cast<float>(mant | (1u << mbits)), static_cast<int>(exp) - bias - mbits);
  }
  return sign ? -out : out;
}
}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::F8E4M3: return "fp8e4m3";
    case DType::F8E5M2: return "fp8e5m2";
    case DType::I32: return "int32";
    case DType::I8: return "int8";
    case DType::I4: return "int4";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F8E4M3, DType::F8E5M2, DType::I32, DType::I8,
                  DType::I4})
    if (n == dtype_name(t)) return t;
  throw Error("unknown number format '" + n + "': expected one of fp32, fp16, bf16, fp8e4m3, fp8e5m2, int32, int8, int4");
}

size_t dtype_bytes(DType t, size_t n) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4 * n;
    case DType::F16:
    case DType::BF16: return 2 * n;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::I8: return n;
    case DType::I4: return (n + 1) / 2;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8E4M3 || t == DType::F8E5M2;
}

// fp16 is on the hot path of 16-bit training (every weight, activation and gradient is rounded
// through it), so it gets exact bit-level conversions instead of the generic encoder above:
// fp32 -> fp16 rounds the 13 dropped mantissa bits to nearest even (subnormals by an integer
// shift of the full significand), 65,520 and above overflow to inf, NaN stays NaN (same code as
// encode_small); fp16 -> fp32 is a table of all 65,536 values built once with decode_small.
// tests/unit/test_dtype.cpp checks both against an independent nearest-value search.
uint16_t f32_to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7FFFu);  // NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: inf
  if (a >= 0x38800000u) {                                                // normal: >= 2^-14
    uint32_t h = (a >> 13) - (112u << 10);
    const uint32_t rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal in fp16: the value in units of 2^-24, rounded to nearest even.
  const uint32_t e = a >> 23;
  if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;   // value = m * 2^(e - 150)
  const uint32_t shift = 126u - e;                   // 14..24
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // 0x400 is the smallest normal: correct
  return static_cast<uint16_t>(sign | r);
}

float f16_to_f32(uint16_t h) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = decode_small(i, 5, 10, true);
    return t;
  }();
  return table[h];
}

uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  // Round to nearest even on the upper 16 bits; overflow carries naturally into inf.
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}
float bf16_to_f32(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

uint8_t f32_to_e4m3(float f) { return static_cast<uint8_t>(encode_small(f, 4, 3, false, 0x7E)); }
float e4m3_to_f32(uint8_t v) { return decode_small(v, 4, 3, false); }
uint8_t f32_to_e5m2(float f) { return static_cast<uint8_t>(encode_small(f, 5, 2, true, 0)); }
float e5m2_to_f32(uint8_t v) { return decode_small(v, 5, 2, true); }

float round_to(DType t, float f) {
  switch (t) {
    case DType::F16: return f16_to_f32(f32_to_f16(f));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(f));
    case DType::F8E4M3: return e4m3_to_f32(f32_to_e4m3(f));
    case DType::F8E5M2: return e5m2_to_f32(f32_to_e5m2(f));
    default: return f;
  }
}

// --- bulk conversions ---------------------------------------------------------------------------
// Branch-free loops over the bit-level codecs, vectorised (TL_VECTOR_CLONES); the same bits as
// the scalar functions above (tests/unit/test_fp8.cpp: every fp16 and fp8 code, every bf16 bit
// pattern as fp32 input, ties, subnormals, overflow and NaN).
namespace {
TL_VECTOR_CLONES void f32_to_f16_n(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = encode_f16(bits_of(s[i]));
}
TL_VECTOR_CLONES void f16_to_f32_n(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = float_of(decode_f16(s[i]));
}
TL_VECTOR_CLONES void round_f16_n(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = float_of(decode_f16(encode_f16(bits_of(p[i]))));
}
// bf16: widening is exact; narrowing rounds to nearest even and keeps NaNs quiet NaNs (the bits of
// f32_to_bf16 / round_to).
TL_VECTOR_CLONES void bf16_to_f32_n(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = float_of(static_cast<uint32_t>(s[i]) << 16);
}
inline uint32_t bf16_code(uint32_t u) {
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return pick(mask_if((u & 0x7FFFFFFFu) > 0x7F800000u), (u >> 16) | 0x40u, rounded);
}
TL_VECTOR_CLONES void f32_to_bf16_n(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(bf16_code(bits_of(s[i])));
}
TL_VECTOR_CLONES void round_bf16_n(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = float_of(bf16_code(bits_of(p[i])) << 16);
}
// Rows of a matrix (row r at s + r * ld_s) to dense rows and back: a product's block in one call
// (its rows are 64 values: a call a row cost more than the conversion).
TL_VECTOR_CLONES void bf16_rows_to_f32(const uint16_t* __restrict s, size_t ld_s, size_t rows, size_t cols,
                                       float* __restrict d) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) d[r * cols + i] = float_of(static_cast<uint32_t>(s[r * ld_s + i]) << 16);
}
TL_VECTOR_CLONES void f32_rows_to_bf16(const float* __restrict s, size_t ld_s, size_t rows, size_t cols,
                                       uint16_t* __restrict d, size_t ld_d) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) d[r * ld_d + i] = static_cast<uint16_t>(bf16_code(bits_of(s[r * ld_s + i])));
}
TL_VECTOR_CLONES void f32_to_e4m3_n(const float* __restrict s, uint8_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = encode_e4m3(bits_of(s[i]));
}
TL_VECTOR_CLONES void f32_to_e5m2_n(const float* __restrict s, uint8_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = encode_e5m2<false>(bits_of(s[i]));
}
TL_VECTOR_CLONES void f32_to_e5m2_sat_n(const float* __restrict s, uint8_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = encode_e5m2<true>(bits_of(s[i]));
}
TL_VECTOR_CLONES void e4m3_to_f32_n(const uint8_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = float_of(decode_e4m3(s[i]));
}
TL_VECTOR_CLONES void e5m2_to_f32_n(const uint8_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = float_of(decode_e5m2(s[i]));
}
// fp16 through the F16C instructions where the CPU has them (checked at run time): vcvtph2ps is
// exact and vcvtps2ph with round-to-nearest-even is the IEEE conversion, so they give the codecs'
// bits except for NaNs (the hardware keeps payloads), whose lanes are replaced by the canonical
// NaNs of the scalar functions (fp16 sign | 0x7FFF, fp32 sign | 0x7FC00000). The codec loops
// above do the rest of each buffer and are the path without F16C.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TL_AVX2_PATH 1
bool has_avx2_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
__attribute__((target("avx2,f16c"))) inline __m128i f32x8_to_f16(__m256 f) {
  const __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
  const __m256i u = _mm256_castps_si256(f);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i canon = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7FFF));
  const __m128i canon16 = _mm_packus_epi32(_mm256_castsi256_si128(canon), _mm256_extracti128_si256(canon, 1));
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
  return _mm_blendv_epi8(h, canon16, nan16);
}
__attribute__((target("avx2,f16c"))) inline __m256 f16x8_to_f32(__m128i h) {
  const __m256i w = _mm256_cvtepu16_epi32(h);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFF)), _mm256_set1_epi32(0x7C00));
  const __m256i canon = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16), _mm256_set1_epi32(0x7FC00000));
  return _mm256_blendv_ps(_mm256_cvtph_ps(h), _mm256_castsi256_ps(canon), _mm256_castsi256_ps(nan));
}
__attribute__((target("avx2,f16c"))) size_t f32_to_f16_f16c(const float* s, uint16_t* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), f32x8_to_f16(_mm256_loadu_ps(s + i)));
  return i;
}
__attribute__((target("avx2,f16c"))) size_t f16_to_f32_f16c(const uint16_t* s, float* d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, f16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  return i;
}
// Rows of whole groups of 8 (cols8), row r at s + r * ld_s and d + r * ld_d: a block in one call.
__attribute__((target("avx2,f16c"))) void f32_rows_to_f16_f16c(const float* s, size_t ld_s, size_t rows, size_t cols8,
                                                                uint16_t* d, size_t ld_d) {
  for (size_t r = 0; r < rows; ++r, s += ld_s, d += ld_d)
    for (size_t i = 0; i < cols8; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), f32x8_to_f16(_mm256_loadu_ps(s + i)));
}
__attribute__((target("avx2,f16c"))) void f16_rows_to_f32_f16c(const uint16_t* s, size_t ld_s, size_t rows, size_t cols8,
                                                                float* d, size_t ld_d) {
  for (size_t r = 0; r < rows; ++r, s += ld_s, d += ld_d)
    for (size_t i = 0; i < cols8; i += 8)
      _mm256_storeu_ps(d + i, f16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
}
__attribute__((target("avx2,f16c"))) size_t round_f16_f16c(float* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, f16x8_to_f32(f32x8_to_f16(_mm256_loadu_ps(p + i))));
  return i;
}
#endif

// The fp16 bulk conversions: F16C for whole groups of 8 where available, the codec loops for the rest.
void f32_to_f16_bulk(const float* s, uint16_t* d, size_t n) {
  size_t done = 0;
#ifdef TL_AVX2_PATH
  if (has_avx2_f16c()) done = f32_to_f16_f16c(s, d, n);
#endif
  f32_to_f16_n(s + done, d + done, n - done);
}
void f16_to_f32_bulk(const uint16_t* s, float* d, size_t n) {
  size_t done = 0;
#ifdef TL_AVX2_PATH
  if (has_avx2_f16c()) done = f16_to_f32_f16c(s, d, n);
#endif
  f16_to_f32_n(s + done, d + done, n - done);
}
void round_f16_bulk(float* p, size_t n) {
  size_t done = 0;
#ifdef TL_AVX2_PATH
  if (has_avx2_f16c()) done = round_f16_f16c(p, n);
#endif
  round_f16_n(p + done, n - done);
}

// The fp8 value of x (fp32 bits u), computed on values rather than codes (fewer operations than
// decode(encode(u)), the same bits: test_fp8 compares them). |x| is rounded to a multiple of its
// fp8 step 2^(q - kMant), q = max(exponent of |x|, emin), by adding and removing c = 2^(q - kMant
// + 23): c's fp32 step is that step and the sum stays in c's binade, so fp32's addition rounds to
// nearest even there, normal and subnormal values alike (a carry into the next binade is exact).
// c is built from |x|'s exponent bits by an integer maximum. Saturating (kSat), |x| is first
// clamped to the largest finite value kMaxBits (one float minimum; a NaN gives the maximum,
// replaced below): the grid holds it, so nothing rounds above it, and c stays small. Else (e5m2's
// storage cast) the exponent is capped at 2^63 so that c stays finite for inf and NaN, and a
// rounded value above the largest (from 61,440 up: 65,536 or more) becomes inf. NaN gives +NaN
// 0x7FC00000 (the decoded 0x7F). Comparisons are signed: |x|'s bits are below 2^31.
template <int kMant, int32_t kMinNormalBits, uint32_t kMaxBits, bool kSat>
inline float fp8_value(uint32_t u) {
  constexpr float kMax = std::bit_cast<float>(kMaxBits);
  const uint32_t sign = u & 0x80000000u;
  const int32_t a = static_cast<int32_t>(u & 0x7FFFFFFFu);
  float v = float_of(static_cast<uint32_t>(a));
  int32_t e;
  if constexpr (kSat) {
    v = v < kMax ? v : kMax;
    e = static_cast<int32_t>(bits_of(v)) & 0x7F800000;
  } else {
    e = std::min(a & 0x7F800000, 0x5F000000);
  }
  const float c = float_of(static_cast<uint32_t>(std::max(e, kMinNormalBits)) + ((23u - kMant) << 23));
  uint32_t out = bits_of((v + c) - c);
  if constexpr (!kSat) out = pick(mask_if(static_cast<int32_t>(out) > static_cast<int32_t>(kMaxBits)), 0x7F800000u, out);
  return float_of(pick(mask_if(a > 0x7F800000), 0x7FC00000u, out | sign));
}
// The fp8 value of x * scale (one fp32 product, then the saturating cast).
inline float e4m3_scaled(float x, float scale) { return fp8_value<3, 0x3C800000, 0x43E00000u, true>(bits_of(x * scale)); }
inline float e5m2_sat_scaled(float x, float scale) {
  return fp8_value<2, 0x38800000, 0x47600000u, true>(bits_of(x * scale));
}
// p[i] = the fp8 value of p[i] * scale (one fp32 product, then the cast: e4m3 saturating, e5m2
// saturating when kSat, else as its storage cast).
TL_VECTOR_CLONES void e4m3_round_scaled_n(float* p, float scale, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = e4m3_scaled(p[i], scale);
}
TL_VECTOR_CLONES void e5m2_round_n(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = fp8_value<2, 0x38800000, 0x47600000u, false>(bits_of(p[i]));
}
TL_VECTOR_CLONES void e5m2_sat_round_scaled_n(float* p, float scale, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = e5m2_sat_scaled(p[i], scale);
}

// The casts of a product's operand fused with the maximum |x| of its values (before the scale):
// one pass instead of a conversion, a cast and a maximum. |x| is compared as its fp32 bits
// (ordered as the values for everything but NaN, which counts as 0; below 2^31, so a signed
// maximum), an integer maximum the loops vectorise.
inline int32_t abs_bits_no_nan(uint32_t u) {
  const int32_t a = static_cast<int32_t>(u & 0x7FFFFFFFu);
  return a > 0x7F800000 ? 0 : a;
}
// One loop for both fp8 formats, inlined into each vector clone below (where it vectorises).
template <bool kE4M3>
[[gnu::always_inline]] inline float fp8_round_scaled(float v, float scale) {
  if constexpr (kE4M3) return e4m3_scaled(v, scale);
  else return e5m2_sat_scaled(v, scale);
}
template <bool kE4M3>
[[gnu::always_inline]] inline uint32_t bf16_scaled_loop(const uint16_t* __restrict s, float scale, float* __restrict d,
                                                        size_t n) {
  int32_t mx = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(s[i]) << 16;
    mx = std::max(mx, abs_bits_no_nan(u));
    d[i] = fp8_round_scaled<kE4M3>(float_of(u), scale);
  }
  return static_cast<uint32_t>(mx);
}
template <bool kE4M3>
[[gnu::always_inline]] inline uint32_t scaled_max_loop(float* p, float scale, size_t n) {
  int32_t mx = 0;
  for (size_t i = 0; i < n; ++i) {
    mx = std::max(mx, abs_bits_no_nan(bits_of(p[i])));
    p[i] = fp8_round_scaled<kE4M3>(p[i], scale);
  }
  return static_cast<uint32_t>(mx);
}
TL_VECTOR_CLONES uint32_t bf16_e4m3_scaled_n(const uint16_t* __restrict s, float scale, float* __restrict d, size_t n) {
  return bf16_scaled_loop<true>(s, scale, d, n);
}
TL_VECTOR_CLONES uint32_t bf16_e5m2_scaled_n(const uint16_t* __restrict s, float scale, float* __restrict d, size_t n) {
  return bf16_scaled_loop<false>(s, scale, d, n);
}
TL_VECTOR_CLONES uint32_t e4m3_scaled_max_n(float* p, float scale, size_t n) { return scaled_max_loop<true>(p, scale, n); }
TL_VECTOR_CLONES uint32_t e5m2_scaled_max_n(float* p, float scale, size_t n) { return scaled_max_loop<false>(p, scale, n); }

#ifdef TL_AVX2_PATH
// bf16_scaled_loop in AVX2 intrinsics, 8 values a step (the vector clone above leaves its
// selections as compares and byte blends, about 1.5x the operations): fp8_value's steps, the
// clamp as vminps (a NaN lane gives the maximum, then the canonical NaN) and |x|'s maximum as
// vmaxps (a NaN lane keeps the running maximum; non-negative floats order as their bits).
// `rows` rows of cols8 values (a multiple of 8), row r at s + r * ld_s and d + r * ld_d, in one
// call (a product's blocks are rows of 64: a call a row cost as much again as the casts).
template <bool kE4M3>
__attribute__((target("avx2"))) uint32_t bf16_scaled_avx2(const uint16_t* s, size_t ld_s, float* d, size_t ld_d,
                                                           size_t rows, size_t cols8, float scale) {
  constexpr int kMant = kE4M3 ? 3 : 2;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), exp_mask = _mm256_set1_epi32(0x7F800000);
  const __m256i q_lo = _mm256_set1_epi32(kE4M3 ? 0x3C800000 : 0x38800000);
  const __m256i to_c = _mm256_set1_epi32((23 - kMant) << 23);
  const __m256 vmax = _mm256_set1_ps(kE4M3 ? 448.0f : 57344.0f), vscale = _mm256_set1_ps(scale);
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  __m256 mx = _mm256_setzero_ps();
  for (size_t r = 0; r < rows; ++r, s += ld_s, d += ld_d)
    for (size_t i = 0; i < cols8; i += 8) {
      const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))), 16);
      mx = _mm256_max_ps(_mm256_castsi256_ps(_mm256_and_si256(u, abs_mask)), mx);
      const __m256i y = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(u), vscale));
      const __m256i a = _mm256_and_si256(y, abs_mask);
      const __m256 clamped = _mm256_min_ps(_mm256_castsi256_ps(a), vmax);
      const __m256i q = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(clamped), exp_mask), q_lo);
      const __m256 c = _mm256_castsi256_ps(_mm256_add_epi32(q, to_c));
      __m256 v = _mm256_sub_ps(_mm256_add_ps(clamped, c), c);
      v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_xor_si256(y, a)));
      _mm256_storeu_ps(d + i, _mm256_blendv_ps(v, nan, _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, exp_mask))));
    }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  return std::bit_cast<uint32_t>(_mm_cvtss_f32(m4));
}
#endif

// Rows of a bf16 operand (row r at s + r * ld_s) cast into d (dense) with their maximum: AVX2
// for each row's whole groups of 8 where available, the vector loop above for the rest.
uint32_t bf16_round_scaled(bool e4m3, const uint16_t* s, size_t ld_s, size_t rows, size_t cols, float scale, float* d) {
  size_t done = 0;  // of each row
  uint32_t amax = 0;
#ifdef TL_AVX2_PATH
  if (has_avx2_f16c() && cols >= 8) {
    done = cols & ~size_t{7};
    amax = e4m3 ? bf16_scaled_avx2<true>(s, ld_s, d, cols, rows, done, scale)
                : bf16_scaled_avx2<false>(s, ld_s, d, cols, rows, done, scale);
  }
#endif
  if (done < cols)
    for (size_t r = 0; r < rows; ++r) {
      const uint16_t* sr = s + r * ld_s + done;
      float* dr = d + r * cols + done;
      amax = std::max(amax, e4m3 ? bf16_e4m3_scaled_n(sr, scale, dr, cols - done) : bf16_e5m2_scaled_n(sr, scale, dr, cols - done));
    }
  return amax;
}
}  // namespace

uint32_t convert_round_scaled(DType src_type, const void* src, DType t, float scale, float* dst, size_t n) {
  return convert_round_scaled_rows(src_type, src, 0, 1, n, t, scale, dst);
}

uint32_t convert_round_scaled_rows(DType src_type, const void* src, size_t src_stride, size_t rows, size_t cols, DType t,
                                   float scale, float* dst) {
  if (t != DType::F8E4M3 && t != DType::F8E5M2)
    throw Error(std::string("convert_round_scaled: expected an fp8 format, got ") + dtype_name(t));
  const bool e4 = t == DType::F8E4M3;
  if (src_type == DType::BF16)
    return bf16_round_scaled(e4, static_cast<const uint16_t*>(src), src_stride / 2, rows, cols, scale, dst);
  uint32_t amax = 0;
  for (size_t r = 0; r < rows; ++r) {
    float* row = dst + r * cols;
    convert_to_f32(src_type, static_cast<const char*>(src) + r * src_stride, row, cols);
    amax = std::max(amax, e4 ? e4m3_scaled_max_n(row, scale, cols) : e5m2_scaled_max_n(row, scale, cols));
  }
  return amax;
}

void cast_fp8_saturating(const float* src, DType t, uint8_t* dst, size_t n) {
  if (t == DType::F8E4M3)
    f32_to_e4m3_n(src, dst, n);
  else if (t == DType::F8E5M2)
    f32_to_e5m2_sat_n(src, dst, n);
  else
    throw Error(std::string("cast_fp8_saturating: expected an fp8 format, got ") + dtype_name(t));
}

void round_to_n(DType t, float* p, size_t n) {
  switch (t) {
    case DType::F16: round_f16_bulk(p, n); return;
    case DType::BF16: round_bf16_n(p, n); return;
    case DType::F8E4M3: e4m3_round_scaled_n(p, 1.0f, n); return;
    case DType::F8E5M2: e5m2_round_n(p, n); return;
    default:
      for (size_t i = 0; i < n; ++i) p[i] = round_to(t, p[i]);
  }
}

void round_scaled_n(DType t, float scale, const float* src, float* dst, size_t n) {
  if (t != DType::F8E4M3 && t != DType::F8E5M2)
    throw Error(std::string("round_scaled_n: expected an fp8 format, got ") + dtype_name(t));
  if (dst != src) std::memmove(dst, src, n * sizeof(float));
  if (t == DType::F8E4M3)
    e4m3_round_scaled_n(dst, scale, n);
  else
    e5m2_sat_round_scaled_n(dst, scale, n);
}

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: f16_to_f32_bulk(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::BF16: bf16_to_f32_n(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::F8E4M3: e4m3_to_f32_n(static_cast<const uint8_t*>(src), dst, n); return;
    case DType::F8E5M2: e5m2_to_f32_n(static_cast<const uint8_t*>(src), dst, n); return;
    case DType::I32: {
      auto* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::I8: {
      auto* s = static_cast<const int8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::I4: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) {
        int nib = (i & 1) ? (s[i / 2] >> 4) : (s[i / 2] & 0xF);
        dst[i] = static_cast<float>(nib >= 8 ? nib - 16 : nib);
      }
      return;
    }
  }
}

void convert_to_f32_rows(DType t, const void* src, size_t src_stride, size_t rows, size_t cols, float* dst) {
  if (t == DType::BF16) return bf16_rows_to_f32(static_cast<const uint16_t*>(src), src_stride / 2, rows, cols, dst);
#ifdef TL_AVX2_PATH
  if (t == DType::F16 && cols % 8 == 0 && has_avx2_f16c())
    return f16_rows_to_f32_f16c(static_cast<const uint16_t*>(src), src_stride / 2, rows, cols, dst, cols);
#endif
  for (size_t r = 0; r < rows; ++r) convert_to_f32(t, static_cast<const char*>(src) + r * src_stride, dst + r * cols, cols);
}

void convert_from_f32_rows(const float* src, size_t src_ld, DType t, void* dst, size_t dst_stride, size_t rows, size_t cols) {
  if (t == DType::BF16) return f32_rows_to_bf16(src, src_ld, rows, cols, static_cast<uint16_t*>(dst), dst_stride / 2);
#ifdef TL_AVX2_PATH
  if (t == DType::F16 && cols % 8 == 0 && has_avx2_f16c())
    return f32_rows_to_f16_f16c(src, src_ld, rows, cols, static_cast<uint16_t*>(dst), dst_stride / 2);
#endif
  for (size_t r = 0; r < rows; ++r) convert_from_f32(src + r * src_ld, t, static_cast<char*>(dst) + r * dst_stride, cols);
}

void convert_from_f32(const float* src, DType t, void* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: f32_to_f16_bulk(src, static_cast<uint16_t*>(dst), n); return;
    case DType::BF16: f32_to_bf16_n(src, static_cast<uint16_t*>(dst), n); return;
    case DType::F8E4M3: f32_to_e4m3_n(src, static_cast<uint8_t*>(dst), n); return;
    case DType::F8E5M2: f32_to_e5m2_n(src, static_cast<uint8_t*>(dst), n); return;
    case DType::I32: {
      auto* d = static_cast<int32_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(std::lrint(src[i]));
      return;
    }
    case DType::I8: {
      auto* d = static_cast<int8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<int8_t>(std::lrint(std::fmax(-128.f, std::fmin(127.f, src[i]))));
      return;
    }
    case DType::I4: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < (n + 1) / 2; ++i) d[i] = 0;
      for (size_t i = 0; i < n; ++i) {
        int q = static_cast<int>(std::lrint(std::fmax(-8.f, std::fmin(7.f, src[i]))));
        uint8_t nib = static_cast<uint8_t>(q & 0xF);
        d[i / 2] |= (i & 1) ? static_cast<uint8_t>(nib << 4) : nib;
      }
      return;
    }
  }
}

}  // namespace trainlab
