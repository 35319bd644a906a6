// kernels/row_access.cuh: the row-access pieces shared by the transformer-op kernels
// (transformer_ops.cu, layernorm.cu); device code and launch helpers, included only by .cu files.
//
// Every kernel body is written once over an accessor: Vec<T> moves 16 bytes (4 fp32 or 8 bf16 /
// fp16 values) per load when all tensors of a call share format T and rows are whole vectors;
// Scalar converts element by element through ld()/st() with run-time format codes (mixed formats,
// odd widths); dispatch() picks one. Column reductions run over fixed row segments whose partial
// sums sum_segments_kernel adds in a fixed order (deterministic).
#pragma once
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "device_common.cuh"

namespace trainlab::kern {
namespace {
template <class T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }

// The 4 bytes of format T holding v[0] (and v[1] for 16-bit formats), rounded to nearest even.
template <class T>
__device__ __forceinline__ uint32_t pack_word(const float* v);
template <>
__device__ __forceinline__ uint32_t pack_word<float>(const float* v) { return __float_as_uint(v[0]); }
template <>
__device__ __forceinline__ uint32_t pack_word<__nv_bfloat16>(const float* v) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(v[0], v[1]);
  uint32_t r;
  memcpy(&r, &h, 4);
  return r;
}
template <>
__device__ __forceinline__ uint32_t pack_word<__half>(const float* v) {
  const __half2 h = __floats2half2_rn(v[0], v[1]);
  uint32_t r;
  memcpy(&r, &h, 4);
  return r;
}

// 16-byte vectors of one storage format T; element index i must be a multiple of N.
// Raw is the loaded vector before conversion (fewer registers to keep a row in: LayerNorm).
template <class T>
struct Vec {
  static constexpr int N = 16 / sizeof(T);
  using Raw = uint4;
  __device__ __forceinline__ static Raw load_raw(const void* p, int64_t i, int) {
    return *reinterpret_cast<const uint4*>(static_cast<const T*>(p) + i);
  }
  __device__ __forceinline__ static void unpack(const Raw& u, float* out) {
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = to_f<T>(e[k]);
  }
  __device__ __forceinline__ static void load(const void* p, int64_t i, int dt, float* out) {
    unpack(load_raw(p, i, dt), out);
  }
  // One 16-byte store instruction (__stwb: st.global.wb.v4): a plain uint4 assignment was split
  // by the compiler into four 4-byte stores in the elementwise kernels.
  __device__ __forceinline__ static void store(void* p, int64_t i, int, const float* v) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = pack_word<T>(v + k * (N / 4));
    __stwb(reinterpret_cast<uint4*>(static_cast<T*>(p) + i), make_uint4(w[0], w[1], w[2], w[3]));
  }
};
struct Scalar {
  static constexpr int N = 1;
  using Raw = float;
  __device__ __forceinline__ static Raw load_raw(const void* p, int64_t i, int dt) { return ld(p, i, dt); }
  __device__ __forceinline__ static void unpack(const Raw& u, float* out) { out[0] = u; }
  __device__ __forceinline__ static void load(const void* p, int64_t i, int dt, float* out) { out[0] = ld(p, i, dt); }
  __device__ __forceinline__ static void store(void* p, int64_t i, int dt, const float* v) { st(p, i, dt, v[0]); }
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline int vec_width(int dt) { return dt == kF32 ? 4 : 8; }
inline bool vec_format(int dt) { return dt == kF32 || dt == kBF16 || dt == kF16; }

// Calls f(Vec<T>{}) when every format equals dt0, the format has a vector type, `multiple` is a
// whole number of vectors and every pointer is 16-byte aligned; f(Scalar{}) otherwise.
template <class F>
void dispatch(std::initializer_list<int> dts, std::initializer_list<const void*> ptrs, int64_t multiple, F&& f) {
  const int dt0 = *dts.begin();
  bool ok = vec_format(dt0) && multiple % vec_width(dt0) == 0;
  for (int d : dts) ok = ok && d == dt0;
  for (const void* p : ptrs) ok = ok && (p == nullptr || aligned16(p));
  if (ok && dt0 == kF32) return f(Vec<float>{});
  if (ok && dt0 == kBF16) return f(Vec<__nv_bfloat16>{});
  if (ok && dt0 == kF16) return f(Vec<__half>{});
  f(Scalar{});
}

// Calls f(std::integral_constant<int, K>{}) with K the vectors a lane keeps in registers over a
// row of d columns (LayerNorm): the fewest of 2, 3, 4 that hold the lane's share of the row, 4
// for wider rows (the rest re-read) and for the element-wise accessor (a rare mixed-format path).
template <class A, class F>
void with_cached(int64_t d, F&& f) {
  const int64_t per_lane = (d + 32 * A::N - 1) / (32 * A::N);
  if constexpr (A::N > 1) {
    if (per_lane <= 2) return f(std::integral_constant<int, 2>{});
    if (per_lane == 3) return f(std::integral_constant<int, 3>{});
  }
  f(std::integral_constant<int, 4>{});
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// dst[e] (=|+=) sum over segments of partial[s * count + e], for e < count, and, when dst2 is
// given, dst2[e] (=|+=) the same over partial[(segs + s) * count + e] (LayerNorm's dgamma and dbeta
// in one launch): one warp per element, lane l adding segments l, l + 32, ... in ascending order,
// the 32 lane sums then added by a fixed butterfly (deterministic; a thread per element would
// wait on its segments' loads one by one).
__global__ void sum_segments_kernel(const float* partial, int64_t segs, int64_t count, void* dst, int ddt, void* dst2,
                                    int ddt2, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) / 32, total = dst2 ? 2 * count : count;
  for (int64_t e = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; e < total; e += warps) {
    const bool second = e >= count;
    const int64_t i = second ? e - count : e;
    const float* src = second ? partial + segs * count : partial;
    float acc = 0.0f;
    for (int64_t s = lane; s < segs; s += 32) acc += src[s * count + i];
    acc = warp_sum(acc);
    void* out = second ? dst2 : dst;
    const int odt = second ? ddt2 : ddt;
    if (lane == 0) st(out, i, odt, accumulate ? ld(out, i, odt) + acc : acc);
  }
}
}  // namespace
}  // namespace trainlab::kern
