// kernels/device_common.cuh: device-side helpers shared by the .cu files (never included by host
// C++). ld()/st() convert between fp32 and the storage formats by run-time format code (see
// common.cuh); tf32_round() is the CPU reference's rounding (ties to even on the low 13 bits).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common.cuh"

namespace trainlab::kern {

enum : int {
  kF32 = static_cast<int>(DType::F32),
  kF16 = static_cast<int>(DType::F16),
  kBF16 = static_cast<int>(DType::BF16),
  kE4M3 = static_cast<int>(DType::F8E4M3),
  kE5M2 = static_cast<int>(DType::F8E5M2),
  kI32 = static_cast<int>(DType::I32),
};

__device__ __forceinline__ float ld(const void* p, int64_t i, int dt) {
  switch (dt) {
    case kF32: return static_cast<const float*>(p)[i];
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case kE4M3: {
      __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E4M3);
      return __half2float(__half(h));
    }
    case kE5M2: {
      __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(p)[i], __NV_E5M2);
      return __half2float(__half(h));
    }
    case kI32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
  return 0.0f;
}

__device__ __forceinline__ void st(void* p, int64_t i, int dt, float v) {
  switch (dt) {
    case kF32: static_cast<float*>(p)[i] = v; break;
    case kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case kE4M3: static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); break;
    case kE5M2: static_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E5M2); break;
    case kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
  }
}

// The value v takes once stored in format dt.
__device__ __forceinline__ float round_fmt(float v, int dt) {
  switch (dt) {
    case kBF16: return __bfloat162float(__float2bfloat16_rn(v));
    case kF16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

__device__ __forceinline__ float tf32_round(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7F800000u) != 0x7F800000u) {
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
  }
  return __uint_as_float(u);
}

__device__ __forceinline__ float gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_grad_f(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

inline unsigned blocks_for(int64_t n, int threads, unsigned cap = 65535u * 8u) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > cap ? cap : b);
}

}  // namespace trainlab::kern
