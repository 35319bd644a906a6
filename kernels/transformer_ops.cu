// kernels/transformer_ops.cu: see transformer_ops.cuh for the math, layout, precision and the
// determinism of the reductions.
//
// Every kernel body is written once over an accessor: Vec<T> moves 16 bytes (4 fp32 or 8 bf16 /
// fp16 values) per load when all tensors of a call share format T and rows are whole vectors;
// Scalar converts element by element through ld()/st() with run-time format codes (mixed formats,
// odd widths). Row operations (LayerNorm) run one warp per row; their column reductions run over
// fixed row segments (see column sums below).
#define TRAINLAB_HD __host__ __device__
#include "backend/dropout_hash.h"
#include "device_common.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

#include <string>
#include <type_traits>

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

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
int vec_width(int dt) { return dt == kF32 ? 4 : 8; }
bool vec_format(int dt) { return dt == kF32 || dt == kBF16 || dt == kF16; }

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

// --- elementwise ---------------------------------------------------------------------------------
// Phi(x) as the CPU reference computes it (cpu_transformer_ops.cpp): 0.5 erfc(|x| / sqrt 2) from
// Numerical Recipes' erfc (fractional error < 1.2e-7 everywhere, the tail x << 0 included), here
// with the fast reciprocal and exponential (a few ulp). About 15 instructions without branches,
// where erff's two ranges cost ~40 in a mixed warp: GELU over the MLP's activations (4d wide) was
// bound by instruction issue, not by memory.
__device__ __forceinline__ float normal_cdf(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  const float half_erfc = 0.5f * t * __expf(fmaf(-z, z, p));  // Phi(-|x|)
  return x >= 0.0f ? 1.0f - half_erfc : half_erfc;
}
struct GeluOp {
  __device__ float operator()(float x, float, int64_t) const { return x * normal_cdf(x); }
};
struct GeluGradOp {  // dy * (Phi(x) + x phi(x))
  __device__ float operator()(float x, float dy, int64_t) const {
    return dy * (normal_cdf(x) + x * (0.39894228040143268f * __expf(-0.5f * x * x)));
  }
};
struct AddOp {
  __device__ float operator()(float a, float b, int64_t) const { return a + b; }
};
struct DropoutOp {
  uint64_t seed;
  uint32_t threshold;
  float scale;
  __device__ float operator()(float x, float, int64_t i) const {
    return dropout_hash(seed, static_cast<uint64_t>(i)) >= threshold ? x * scale : 0.0f;
  }
};

// y[i] = op(a[i], b[i], i) for elements [first, n) in vectors of A::N (b may be null). Each thread
// takes kMapUnroll vectors a block-width apart and issues all their loads before any math, so more
// bytes are in flight per thread (GELU's erff would otherwise stall each load in turn).
constexpr int kMapUnroll = 2;
template <class A, class Op>
__global__ void map_kernel(const void* a, int adt, const void* b, int bdt, void* y, int ydt, int64_t first, int64_t n,
                           Op op) {
  const int64_t count = (n - first) / A::N;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kMapUnroll;
  for (int64_t v0 = blockIdx.x * int64_t(blockDim.x) * kMapUnroll + threadIdx.x; v0 < count; v0 += step) {
    float x[kMapUnroll][A::N], w[kMapUnroll][A::N];
#pragma unroll
    for (int u = 0; u < kMapUnroll; ++u) {
      const int64_t v = v0 + int64_t(u) * blockDim.x;
      if (v >= count) continue;
      A::load(a, first + v * A::N, adt, x[u]);
      if (b) A::load(b, first + v * A::N, bdt, w[u]);
    }
#pragma unroll
    for (int u = 0; u < kMapUnroll; ++u) {
      const int64_t v = v0 + int64_t(u) * blockDim.x;
      if (v >= count) continue;
      const int64_t i = first + v * A::N;
      float out[A::N];
#pragma unroll
      for (int k = 0; k < A::N; ++k) out[k] = op(x[u][k], b ? w[u][k] : 0.0f, i + k);
      A::store(y, i, ydt, out);
    }
  }
}

template <class Op>
void run_map(const void* a, int adt, const void* b, int bdt, void* y, int ydt, int64_t n, Op op, cudaStream_t s,
             const char* name) {
  if (n <= 0) return;
  const int bd = b ? bdt : adt;
  int64_t done = 0;
  dispatch({adt, bd, ydt}, {a, b, y}, 0, [&](auto acc) {  // flat: no row width to respect
    using A = decltype(acc);
    const int64_t whole = n / A::N * A::N;
    if (whole > 0)
      map_kernel<A, Op><<<blocks_for(whole / A::N, 256 * kMapUnroll), 256, 0, s>>>(a, adt, b, bdt, y, ydt, 0, whole,
                                                                                 op);
    done = whole;
  });
  if (done < n) map_kernel<Scalar, Op><<<1, 256, 0, s>>>(a, adt, b, bdt, y, ydt, done, n, op);  // the tail
  TL_LAUNCH_CHECK(name);
}

// --- embedding -----------------------------------------------------------------------------------
template <class A>
__global__ void embedding_fwd_kernel(const void* tok, int tdt, int64_t vocab, const void* pos, int pdt,
                                     const int32_t* idx, int64_t n, int64_t T, int64_t d, void* out, int odt) {
  const int64_t per_row = d / A::N, total = n * per_row;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = v / per_row, c = (v % per_row) * A::N;
    const int32_t r = idx[i];
    float t[A::N], p[A::N];
    if (r >= 0 && r < vocab) {
      A::load(tok, static_cast<int64_t>(r) * d + c, tdt, t);
    } else {
#pragma unroll
      for (int k = 0; k < A::N; ++k) t[k] = 0.0f;
    }
    A::load(pos, (i % T) * d + c, pdt, p);
#pragma unroll
    for (int k = 0; k < A::N; ++k) t[k] += p[k];
    A::store(out, i * d + c, odt, t);
  }
}

constexpr int kColsPerThread = 4;
constexpr int kReduceThreads = 256;

// Rows per segment of the column reductions: about 256, at most 128 segments.
int64_t segments_for(int64_t rows) {
  int64_t s = (rows + 255) / 256;
  return s < 1 ? 1 : s > 128 ? 128 : s;
}

// partial[seg, v, c] = sum over rows r of segment seg (ascending) with idx[r] == v of dout[r, c].
// Grid: (segments, vocab, column chunks of kReduceThreads * kColsPerThread). Per 256 rows, the
// rows of token v are first listed in ascending order (warp ballots, warp counts added in warp
// order), then summed a few rows at a time so their loads are in flight together.
__global__ void __launch_bounds__(kReduceThreads)
    embedding_tok_partial_kernel(const void* dout, int gdt, const int32_t* idx, int64_t n, int64_t rows_per_seg,
                                 int64_t d, int64_t vocab, float* partial) {
  static_assert(kReduceThreads == 256, "one row of 256 per thread when listing a token's rows");
  __shared__ int32_t hits[kReduceThreads];
  __shared__ int warp_hits[kReduceThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t seg = blockIdx.x, v = blockIdx.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * kReduceThreads * kColsPerThread + threadIdx.x;
  const int64_t r0 = seg * rows_per_seg, r1 = r0 + rows_per_seg < n ? r0 + rows_per_seg : n;
  float acc[kColsPerThread] = {};
  for (int64_t base = r0; base < r1; base += kReduceThreads) {
    const bool hit = base + threadIdx.x < r1 && idx[base + threadIdx.x] == v;
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    __syncthreads();  // the previous chunk's list is no longer read
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kReduceThreads / 32; ++w) before += w < warp ? warp_hits[w] : 0, total += warp_hits[w];
    if (hit) hits[before + __popc(ballot & ((1u << lane) - 1u))] = threadIdx.x;
    __syncthreads();
#pragma unroll 4
    for (int k = 0; k < total; ++k) {
      const int64_t row = (base + hits[k]) * d;
#pragma unroll
      for (int q = 0; q < kColsPerThread; ++q) {
        const int64_t c = c0 + q * kReduceThreads;
        if (c < d) acc[q] += ld(dout, row + c, gdt);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kColsPerThread; ++q) {
    const int64_t c = c0 + q * kReduceThreads;
    if (c < d) partial[(seg * vocab + v) * d + c] = acc[q];
  }
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

// dpos[t, c] (=|+=) sum_b dout[b*T + t, c] (b ascending); rows t >= T zeroed unless accumulating.
__global__ void embedding_pos_kernel(const void* dout, int gdt, int64_t n, int64_t T, int64_t d, void* dpos, int pdt,
                                     int64_t pos_rows, bool accumulate) {
  const int64_t total = pos_rows * d, B = n / T;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / d, c = e % d;
    if (t >= T) {
      if (!accumulate) st(dpos, e, pdt, 0.0f);
      continue;
    }
    float acc = accumulate ? ld(dpos, e, pdt) : 0.0f;
#pragma unroll 8
    for (int64_t b = 0; b < B; ++b) acc += ld(dout, (b * T + t) * d + c, gdt);  // loads issued 8 at a time
    st(dpos, e, pdt, acc);
  }
}

// --- LayerNorm -----------------------------------------------------------------------------------
// One warp per row. Lane l owns the row's vectors at columns l*N + k*32*N (k = 0, 1, ...); the
// first K of them (K = 2, 3 or 4 as the width needs: a whole row of up to 1024 columns in bf16 /
// fp16, 512 in fp32) stay in registers between the passes over the row, so each row is read from
// DRAM once, with all of a lane's loads in flight together; vectors past those are read again.
constexpr int kRowsPerBlock = 8;  // forward: one warp per row, 256 threads

template <class A, int K>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    layernorm_fwd_kernel(const void* x, int xdt, const void* gamma, int gdt, const void* beta, int bdt, float eps,
                         int64_t rows, int64_t d, void* y, int ydt, float* mean, float* rstd) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t base = row * d, stride = 32 * A::N, j0 = lane * A::N, jt = j0 + K * stride;
  const float inv_d = 1.0f / static_cast<float>(d);
  float v[K][A::N];
  {
    typename A::Raw raw[K];  // all loads in flight before the first conversion
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) raw[k] = A::load_raw(x, base + j0 + k * stride, xdt);
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) A::unpack(raw[k], v[k]);
  }
  // Pass 1: the mean (per lane in column order, then the warp's butterfly).
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d)
#pragma unroll
      for (int e = 0; e < A::N; ++e) s += v[k][e];
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
#pragma unroll
    for (int e = 0; e < A::N; ++e) s += t[e];
  }
  const float m = warp_sum(s) * inv_d;
  // Pass 2: the variance from the squares of x - mean.
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d)
#pragma unroll
      for (int e = 0; e < A::N; ++e) q += (v[k][e] - m) * (v[k][e] - m);
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
#pragma unroll
    for (int e = 0; e < A::N; ++e) q += (t[e] - m) * (t[e] - m);
  }
  const float r = 1.0f / sqrtf(warp_sum(q) * inv_d + eps);
  if (lane == 0) mean[row] = m, rstd[row] = r;
  // Pass 3: y = (x - mean) * rstd * gamma + beta.
  auto out = [&](float* t, int64_t j) {
    float g[A::N], b[A::N];
    A::load(gamma, j, gdt, g);
    A::load(beta, j, bdt, b);
#pragma unroll
    for (int e = 0; e < A::N; ++e) t[e] = (t[e] - m) * r * g[e] + b[e];
    A::store(y, base + j, ydt, t);
  };
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d) out(v[k], j0 + k * stride);
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
    out(t, j);
  }
}

// LayerNorm backward in one pass over the rows, all three outputs:
//   dx (=|+=) rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma (per row);
//   partial[0, seg, c] = sum dy * xhat, partial[1, seg, c] = sum dy over the segment's rows.
// Block = segment: `warps` warps over rows r0 + w, r0 + w + warps, ... (ascending). Each warp
// keeps running column sums of its own rows in shared memory, at the end added in warp order.
// A lane only touches its own columns (no races, no atomics), stored lane-minor: column
// lane*N + k*32*N + e of the lane's vector k sits at slot (k*N + e)*32 + lane, so a warp's
// accesses hit 32 different banks. Rows are read once: x, dy (and dx when accumulating) are
// loaded together into registers (unconverted) for the row's sums, then reused for dx and the
// column sums (vectors past the K cached are re-read).
template <class A>
__host__ __device__ constexpr int64_t ln_slots(int64_t d) {  // shared floats of one warp's sums of one kind
  return (d + 32 * A::N - 1) / (32 * A::N) * 32 * A::N;
}

// kinds: 2 (dgamma, dbeta), or 3 with the column sums of dx as stored (dx_sums: a bias gradient).
template <class A, int K>
__global__ void __launch_bounds__(256)
    layernorm_bwd_kernel(const void* x, int xdt, const void* gamma, int gdt, const float* mean, const float* rstd,
                         const void* dy, int dydt, int64_t rows, int64_t d, void* dx, int dxdt, bool accumulate,
                         int64_t rows_per_seg, int64_t segs, float* partial, int kinds) {
  extern __shared__ float acc[];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t P = ln_slots<A>(d);
  float* ag = acc + int64_t(w) * kinds * P;  // this warp's sums of dy * xhat, then of dy (then of dx)
  float* ab = ag + P;
  float* ao = ab + P;
  const bool dx_sums = kinds == 3;
  for (int64_t i = lane; i < kinds * P; i += 32) ag[i] = 0.0f;
  const int64_t stride = 32 * A::N, j0 = lane * A::N;
  const int64_t r0 = blockIdx.x * rows_per_seg, r1 = r0 + rows_per_seg < rows ? r0 + rows_per_seg : rows;
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t row = r0 + w; row < r1; row += warps) {
    const int64_t base = row * d;
    const float m = mean[row], r = rstd[row];
    typename A::Raw xr[K], yr[K], orr[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = j0 + k * stride;
      if (j < d) {
        xr[k] = A::load_raw(x, base + j, xdt);
        yr[k] = A::load_raw(dy, base + j, dydt);
        if (accumulate) orr[k] = A::load_raw(dx, base + j, dxdt);
      }
    }
    // Row sums of g and g * xhat.
    float sg = 0.0f, sgx = 0.0f;
    auto sums = [&](const float* xx, const float* gg, int64_t j) {
      float ga[A::N];
      A::load(gamma, j, gdt, ga);
#pragma unroll
      for (int e = 0; e < A::N; ++e) {
        const float t = gg[e] * ga[e];
        sg += t;
        sgx += t * ((xx[e] - m) * r);
      }
    };
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) {
        float xx[A::N], gg[A::N];
        A::unpack(xr[k], xx);
        A::unpack(yr[k], gg);
        sums(xx, gg, j0 + k * stride);
      }
    for (int64_t j = j0 + K * stride; j < d; j += stride) {
      float xx[A::N], gg[A::N];
      A::load(x, base + j, xdt, xx);
      A::load(dy, base + j, dydt, gg);
      sums(xx, gg, j);
    }
    const float mg = warp_sum(sg) * inv_d, mgx = warp_sum(sgx) * inv_d;
    // dx and the column sums of the lane's vector k.
    auto grads = [&](const float* xx, const float* gg, float* oo, int64_t k) {
      const int64_t j = j0 + k * stride;
      float ga[A::N];
      A::load(gamma, j, gdt, ga);
#pragma unroll
      for (int e = 0; e < A::N; ++e) {
        const float xh = (xx[e] - m) * r;
        const float t = r * (gg[e] * ga[e] - mg - xh * mgx);
        oo[e] = accumulate ? oo[e] + t : t;
        const int64_t slot = (k * A::N + e) * 32 + lane;
        ag[slot] += gg[e] * xh;
        ab[slot] += gg[e];
        if (dx_sums) ao[slot] += round_fmt(oo[e], dxdt);
      }
      A::store(dx, base + j, dxdt, oo);
    };
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) {
        float xx[A::N], gg[A::N], oo[A::N];
        A::unpack(xr[k], xx);
        A::unpack(yr[k], gg);
        if (accumulate) A::unpack(orr[k], oo);
        grads(xx, gg, oo, k);
      }
    for (int64_t k = K; j0 + k * stride < d; ++k) {
      const int64_t j = j0 + k * stride;
      float xx[A::N], gg[A::N], oo[A::N];
      A::load(x, base + j, xdt, xx);
      A::load(dy, base + j, dydt, gg);
      if (accumulate) A::load(dx, base + j, dxdt, oo);
      grads(xx, gg, oo, k);
    }
  }
  __syncthreads();
  // Slot i (read bank-conflict free) holds column c of lane i % 32, vector k, element e.
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    const int64_t ke = i / 32, c = (ke / A::N) * stride + (i % 32) * A::N + ke % A::N;
    if (c >= d) continue;
    float tg = 0.0f, tb = 0.0f, to = 0.0f;
    for (int q = 0; q < warps; ++q) {
      const float* wq = acc + int64_t(q) * kinds * P;
      tg += wq[i], tb += wq[P + i];
      if (dx_sums) to += wq[2 * P + i];
    }
    partial[blockIdx.x * d + c] = tg;
    partial[(segs + blockIdx.x) * d + c] = tb;
    if (dx_sums) partial[(2 * segs + blockIdx.x) * d + c] = to;
  }
}

// partial[seg, c] = sum of x[r, c] over the segment's rows. Block (32 columns, 8 row lanes): lane
// ty takes rows ty, ty + 8, ... (ascending) and the 8 lane sums are added in lane order.
__global__ void column_partial_kernel(const void* x, int xdt, int64_t rows, int64_t cols, int64_t rows_per_seg,
                                      float* partial) {
  __shared__ float sx[8][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = blockIdx.x * int64_t(32) + tx, seg = blockIdx.y;
  const int64_t r0 = seg * rows_per_seg, r1 = r0 + rows_per_seg < rows ? r0 + rows_per_seg : rows;
  float a = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (int64_t r = r0 + ty; r < r1; r += 8) a += ld(x, r * cols + c, xdt);
  sx[ty][tx] = a;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t = 0.0f;
    for (int k = 0; k < 8; ++k) t += sx[k][tx];
    partial[seg * cols + c] = t;
  }
}
}  // namespace

// --- launchers -------------------------------------------------------------------------------------
void launch_add(const void* a, int a_dt, const void* b, int b_dt, void* out, int out_dt, int64_t n, cudaStream_t s) {
  run_map(a, a_dt, b, b_dt, out, out_dt, n, AddOp{}, s, "add");
}

void launch_gelu_forward(const void* x, int x_dt, void* y, int y_dt, int64_t n, cudaStream_t s) {
  run_map(x, x_dt, nullptr, x_dt, y, y_dt, n, GeluOp{}, s, "gelu_forward");
}

void launch_gelu_backward(const void* x, int x_dt, const void* dy, int dy_dt, void* dx, int dx_dt, int64_t n,
                          cudaStream_t s) {
  run_map(x, x_dt, dy, dy_dt, dx, dx_dt, n, GeluGradOp{}, s, "gelu_backward");
}

void launch_dropout(const void* x, int x_dt, float p, uint64_t seed, void* y, int y_dt, int64_t n, cudaStream_t s) {
  const DropoutOp op{seed, dropout_threshold(p), 1.0f / (1.0f - p)};
  run_map(x, x_dt, nullptr, x_dt, y, y_dt, n, op, s, "dropout");
}

void launch_embedding_forward(const void* tok, int tok_dt, int64_t vocab, const void* pos, int pos_dt,
                              const int32_t* idx, int64_t n, int64_t T, int64_t d, void* out, int out_dt,
                              cudaStream_t s) {
  if (n <= 0 || d <= 0) return;
  dispatch({tok_dt, pos_dt, out_dt}, {tok, pos, out}, d, [&](auto acc) {
    using A = decltype(acc);
    embedding_fwd_kernel<A><<<blocks_for(n * d / A::N, 256), 256, 0, s>>>(tok, tok_dt, vocab, pos, pos_dt, idx, n, T, d,
                                                                           out, out_dt);
  });
  TL_LAUNCH_CHECK("embedding_forward");
}

namespace {
// Token-gradient segments: 512 rows each (a block lists and sums one token's rows of a segment;
// longer segments mean fewer partial sums, segs * vocab * d of them), at most 128.
int64_t token_segments(int64_t n) {
  const int64_t s = (n + 511) / 512;
  return s < 1 ? 1 : s > 128 ? 128 : s;
}
}  // namespace

int64_t embedding_backward_workspace(int64_t n, int64_t vocab, int64_t d) { return token_segments(n) * vocab * d; }

void launch_embedding_backward(const void* dout, int dout_dt, const int32_t* idx, int64_t n, int64_t T, int64_t d,
                               void* dtok, int dtok_dt, int64_t vocab, void* dpos, int dpos_dt, int64_t pos_rows,
                               bool accumulate, float* partial, cudaStream_t s) {
  if (d <= 0) return;
  const int64_t segs = token_segments(n), per = (n + segs - 1) / segs;
  const int64_t chunks = (d + kReduceThreads * kColsPerThread - 1) / (kReduceThreads * kColsPerThread);
  if (n > 0) {
    embedding_tok_partial_kernel<<<dim3(static_cast<unsigned>(segs), static_cast<unsigned>(vocab),
                                        static_cast<unsigned>(chunks)),
                                   kReduceThreads, 0, s>>>(dout, dout_dt, idx, n, per, d, vocab, partial);
    TL_LAUNCH_CHECK("embedding_backward (token partial sums)");
  }
  sum_segments_kernel<<<blocks_for(vocab * d * 32, 256), 256, 0, s>>>(partial, n > 0 ? segs : 0, vocab * d, dtok, dtok_dt,
                                                                      nullptr, 0, accumulate);
  TL_LAUNCH_CHECK("embedding_backward (token sums)");
  embedding_pos_kernel<<<blocks_for(pos_rows * d, 256), 256, 0, s>>>(dout, dout_dt, n, T, d, dpos, dpos_dt, pos_rows,
                                                                      accumulate);
  TL_LAUNCH_CHECK("embedding_backward (positions)");
}

void launch_layernorm_forward(const void* x, int x_dt, const void* gamma, int g_dt, const void* beta, int b_dt,
                              float eps, int64_t rows, int64_t d, void* y, int y_dt, float* mean, float* rstd,
                              cudaStream_t s) {
  if (rows <= 0 || d <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch({x_dt, g_dt, b_dt, y_dt}, {x, gamma, beta, y}, d, [&](auto acc) {
    using A = decltype(acc);
    with_cached<A>(d, [&](auto k) {
      layernorm_fwd_kernel<A, decltype(k)::value><<<blocks, 32 * kRowsPerBlock, 0, s>>>(
          x, x_dt, gamma, g_dt, beta, b_dt, eps, rows, d, y, y_dt, mean, rstd);
    });
  });
  TL_LAUNCH_CHECK("layernorm_forward");
}

namespace {
// LayerNorm backward's launch shape, a function of (rows, d) alone, so the same rows always fall
// into the same segments in the same order (bit-identical parameter sums run to run): segments of
// kLnSegRows rows (at most kLnMaxSegs of them), one block each, of as many warps (8 at most) as
// give the warps' column sums (2 * d fp32 a warp, d rounded up to whole vectors of the lanes)
// kLnSmemBudget bytes of shared memory.
constexpr int64_t kLnSegRows = 64, kLnMaxSegs = 1024;
constexpr int64_t kLnSmemBudget = 96 * 1024, kLnSmemMax = 200 * 1024;
struct LnBwdShape {
  int64_t segs, per;
};
LnBwdShape ln_bwd_shape(int64_t rows) {
  LnBwdShape p{};
  const int64_t segs = (rows + kLnSegRows - 1) / kLnSegRows;
  p.segs = rows <= 0 ? 0 : segs < 1 ? 1 : segs > kLnMaxSegs ? kLnMaxSegs : segs;
  p.per = p.segs > 0 ? (rows + p.segs - 1) / p.segs : 0;
  return p;
}
int ln_bwd_warps(int64_t slots, int kinds) {
  const int64_t w = kLnSmemBudget / (4 * kinds * slots);
  return static_cast<int>(w < 1 ? 1 : w > 8 ? 8 : w);
}
}  // namespace

int64_t layernorm_backward_workspace(int64_t rows, int64_t d) { return 3 * ln_bwd_shape(rows).segs * d; }

void launch_layernorm_backward(const void* x, int x_dt, const void* gamma, int g_dt, const float* mean,
                               const float* rstd, const void* dy, int dy_dt, int64_t rows, int64_t d, void* dx,
                               int dx_dt, bool accumulate_dx, void* dgamma, int dg_dt, void* dbeta, int db_dt,
                               bool accumulate_params, float* partial, cudaStream_t s, void* dx_sums, int ds_dt) {
  if (d <= 0) return;
  const int kinds = dx_sums ? 3 : 2;
  if (4 * kinds * (d + 255) > kLnSmemMax)
    throw Error("layernorm_backward: rows of " + std::to_string(d) + " columns are wider than the CUDA kernel's " +
                std::to_string(kLnSmemMax / (4 * kinds) - 255) + " (one warp's column sums must fit in shared memory)");
  const LnBwdShape p = ln_bwd_shape(rows);
  if (p.segs > 0) {
    dispatch({x_dt, g_dt, dy_dt, dx_dt}, {x, gamma, dy, dx}, d, [&](auto acc) {
      using A = decltype(acc);
      const int64_t slots = ln_slots<A>(d);
      const int warps = ln_bwd_warps(slots, kinds);
      const size_t smem = static_cast<size_t>(warps) * kinds * static_cast<size_t>(slots) * sizeof(float);
      with_cached<A>(d, [&](auto k) {
        auto* kernel = &layernorm_bwd_kernel<A, decltype(k)::value>;
        if (smem > 48 * 1024)
          TL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        kernel<<<static_cast<unsigned>(p.segs), 32 * warps, smem, s>>>(x, x_dt, gamma, g_dt, mean, rstd, dy, dy_dt, rows,
                                                                       d, dx, dx_dt, accumulate_dx, p.per, p.segs,
                                                                       partial, kinds);
      });
    });
    TL_LAUNCH_CHECK("layernorm_backward (dx, parameter partial sums)");
  }
  sum_segments_kernel<<<blocks_for(2 * d * 32, 256), 256, 0, s>>>(partial, p.segs, d, dgamma, dg_dt, dbeta, db_dt,
                                                                   accumulate_params);
  TL_LAUNCH_CHECK("layernorm_backward (parameter sums)");
  if (dx_sums) {
    sum_segments_kernel<<<blocks_for(d * 32, 256), 256, 0, s>>>(partial + 2 * p.segs * d, p.segs, d, dx_sums, ds_dt,
                                                                nullptr, 0, accumulate_params);
    TL_LAUNCH_CHECK("layernorm_backward (dx column sums)");
  }
}

int64_t column_sums_workspace(int64_t rows, int64_t cols) { return segments_for(rows) * cols; }

void launch_column_sums(const void* x, int x_dt, int64_t rows, int64_t cols, void* out, int out_dt, bool accumulate,
                        float* partial, cudaStream_t s) {
  if (cols <= 0) return;
  const int64_t segs = rows > 0 ? segments_for(rows) : 0, per = rows > 0 ? (rows + segs - 1) / segs : 0;
  if (segs > 0) {
    column_partial_kernel<<<dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(segs)), dim3(32, 8), 0,
                            s>>>(x, x_dt, rows, cols, per, partial);
    TL_LAUNCH_CHECK("column_sums (partial sums)");
  }
  sum_segments_kernel<<<blocks_for(cols * 32, 256), 256, 0, s>>>(partial, segs, cols, out, out_dt, nullptr, 0,
                                                                  accumulate);
  TL_LAUNCH_CHECK("column_sums");
}

}  // namespace trainlab::kern
