#include "tensor/dtype.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace trainlab {

namespace {
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Generic round-to-nearest-even encoder for small float formats with `ebits` exponent bits and
// `mbits` mantissa bits. `has_inf` false means the all-ones exponent is used for finite values
// (e4m3fn), and overflow saturates to the largest finite value.
uint32_t encode_small(float f, int ebits, int mbits, bool has_inf, uint32_t max_finite_code) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 31) << (ebits + mbits);
  if (std::isnan(f)) return sign | ((1u << (ebits + mbits)) - 1);  // a NaN pattern
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

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F8E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(s[i]);
      return;
    }
    case DType::F8E5M2: {
      auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = e5m2_to_f32(s[i]);
      return;
    }
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

void convert_from_f32(const float* src, DType t, void* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F8E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_e4m3(src[i]);
      return;
    }
    case DType::F8E5M2: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_e5m2(src[i]);
      return;
    }
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
