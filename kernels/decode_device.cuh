// kernels/decode_device.cuh: device code shared by the decode kernels (decode.cu: one kernel per
// operation; decode_step.cu: the whole token in one cooperative kernel). Never included by host
// C++. The math and layouts are those of decode.cuh.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "decode.cuh"
#include "device_common.cuh"

namespace trainlab::kern::decode_dev {

// The launch, with programmatic dependent launch allowed when `pdl` (the attribute array lives
// in static storage: the config only points at it).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, bool pdl) {
  static cudaLaunchAttribute attr = [] {
    cudaLaunchAttribute a{};
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
    return a;
  }();
  cudaLaunchConfig_t c{};
  c.gridDim = grid;
  c.blockDim = block;
  c.dynamicSmemBytes = shmem;
  c.stream = s;
  c.attrs = pdl ? &attr : nullptr;
  c.numAttrs = pdl ? 1 : 0;
  return c;
}

// Every decode kernel that uses shared memory asks for the same split of the SM's memory between
// L1 and shared memory, so that consecutive kernels (overlapping under PDL) never wait for an SM
// to drain and be reconfigured. Set once per kernel; a hint, so an error is cleared rather than
// raised.
template <class Kernel>
void same_carveout(Kernel k) {
  if (cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 50) != cudaSuccess) cudaGetLastError();
}

// Programmatic dependent launch (sm_90): a kernel launched with the attribute may start while the
// previous one finishes; it waits here, before touching global memory, until that grid has
// completed and its writes are visible, and lets the next kernel start launching right away.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The GEMV's epilogue for one finished row (decode.cuh) of sequence b (batched: y [batch, rows],
// q [batch, d], the caches b * kv_stride apart, sequence b at position + b * pos_step): v, the
// row's sum with its bias added, written; kAddTo writes prior + v, prior being y's value before
// the kernel (read by the caller).
__device__ __forceinline__ void gemv_write(const DecodeGemv& g, int64_t row, float v, int32_t position, int b,
                                           float prior) {
  float* y = g.y + b * (g.epilogue == kQkvScatter ? g.rows / 3 : g.rows);
  switch (g.epilogue) {
    case kStore: y[row] = v; break;
    case kAddTo: y[row] = prior + v; break;
    case kGelu: y[row] = gelu_f(v); break;
    case kQkvScatter: {
      const int64_t d = g.rows / 3, p = position + int64_t{b} * g.pos_step, kv = b * g.kv_stride;
      if (row < d) y[row] = v;
      else if (row < 2 * d) g.kcache[kv + p * d + row - d] = v;
      else g.vcache[kv + p * d + row - 2 * d] = v;
      break;
    }
  }
}
__device__ __forceinline__ void gemv_epilogue(const DecodeGemv& g, int64_t row, float acc, int32_t position,
                                              int b = 0) {
  const float v = acc + (g.bias ? g.bias[row] : 0.0f);
  gemv_write(g, row, v, position, b, g.epilogue == kAddTo ? g.y[b * g.rows + row] : 0.0f);
}

// Sum or max over the block (blockDim.x a multiple of 32); every thread gets the result.
template <bool kMax>
__device__ float block_all_reduce(float v, float* shared /* [32] */) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // a previous reduction may still read `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (kMax ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  return v;
}

// A 16-byte weight load that streams: not kept in L1 (each weight is read once a step), and L2
// asked to fetch the 256-byte line around it from DRAM (the lane reads on along the row).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80+);
// copy_async_commit() closes the thread's group, copy_async_wait() waits for its groups.
__device__ __forceinline__ void copy16_async(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Asks L2 for the line holding p (a hint: nothing waits for it, no register receives it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Asks L2 for v[b + offset], b = begin, begin + stride, ... while b + offset < end (a GEMV's
// biases, which its epilogue reads last). Called between a kernel's first weight loads and
// wait_for_previous_grid(), it also keeps those loads before the wait: its trip count is known
// only at run time, so the loop ends the basic block, and ptxas no longer moves the wait
// (ACQBULK) to the top of it, above the loads (it did in the fp32 and bf16 tile and batched GEMVs
// and in the tensor-core GEMV: SASS and times in BENCHMARKS.md, decoding, seventh and eighth
// measurements; tools/pdl_order_check.sh checks the order).
__device__ __forceinline__ void prefetch_l2_strided(const float* v, int64_t begin, int64_t offset, int64_t end,
                                                    int64_t stride) {
  for (int64_t b = begin; b + offset < end; b += stride) prefetch_l2(v + b + offset);
}

// Per format: weights per 32-bit word and the dot product of one word with its x values.
template <int F>
struct Fmt;
template <>
struct Fmt<kDecF32> {
  static constexpr int kPerWord = 1;
  __device__ static float word(uint32_t w, const float* x) { return __uint_as_float(w) * x[0]; }
};
template <>
struct Fmt<kDecBF16> {
  static constexpr int kPerWord = 2;
  // A bf16 is the high half of an fp32: shifting it up is the exact conversion.
  __device__ static float word(uint32_t w, const float* x) {
    const float2 a = *reinterpret_cast<const float2*>(x);
    return __uint_as_float(w << 16) * a.x + __uint_as_float(w & 0xffff0000u) * a.y;
  }
};
// int8 and int4 codes become floats without I2F (a quarter-rate instruction on sm_90): a code
// biased to n >= 0 and placed in the mantissa of 2^23 is the float 2^23 + n exactly, and taking
// 2^23 + bias away leaves the code exactly (the sums pair up so that the chains stay short).
template <>
struct Fmt<kDecI8> {
  static constexpr int kPerWord = 4;
  __device__ static float code(uint32_t biased, int i) {  // byte i of `biased` (code + 128)
    return __uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7540u + static_cast<unsigned>(i))) - 8388736.0f;
  }
  __device__ static float word(uint32_t w, const float* x) {
    const float4 a = *reinterpret_cast<const float4*>(x);
    const uint32_t b = w ^ 0x80808080u;  // each byte's two's complement -> biased by 128
    return (code(b, 0) * a.x + code(b, 1) * a.y) + (code(b, 2) * a.z + code(b, 3) * a.w);
  }
};
template <>
struct Fmt<kDecI4> {
  static constexpr int kPerWord = 8;
  __device__ static float code(uint32_t biased, int i) {  // nibble i of `biased` (code + 8)
    return __uint_as_float(0x4B000000u | ((biased >> (4 * i)) & 0xFu)) - 8388616.0f;
  }
  // Eight two's-complement nibbles, the lowest first.
  __device__ static float word(uint32_t w, const float* x) {
    const float4 a = *reinterpret_cast<const float4*>(x), c = *reinterpret_cast<const float4*>(x + 4);
    const uint32_t b = w ^ 0x88888888u;  // each nibble's two's complement -> biased by 8
    return ((code(b, 0) * a.x + code(b, 1) * a.y) + (code(b, 2) * a.z + code(b, 3) * a.w)) +
           ((code(b, 4) * c.x + code(b, 5) * c.y) + (code(b, 6) * c.z + code(b, 7) * c.w));
  }
};

// The four words of a 16-byte load against x [4 * kPerWord]. Lanes start at different words
// (rot) so that the lanes of a slice, whose x segments lie a multiple of 128 bytes apart, read
// different shared-memory banks.
template <int F>
__device__ __forceinline__ float dot16(const uint4 u, const float* x, int rot) {
  if constexpr (F == kDecF32) {
    const float4 a = *reinterpret_cast<const float4*>(x);
    return __uint_as_float(u.x) * a.x + __uint_as_float(u.y) * a.y + __uint_as_float(u.z) * a.z +
           __uint_as_float(u.w) * a.w;
  } else {
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int jw = (j + rot) & 3;
      const uint32_t w = jw == 0 ? u.x : jw == 1 ? u.y : jw == 2 ? u.z : u.w;
      p[j] = Fmt<F>::word(w, x + jw * Fmt<F>::kPerWord);
    }
    return (p[0] + p[1]) + (p[2] + p[3]);
  }
}

constexpr int kDepth = 8;  // 16-byte weight loads in flight per lane

// log2 of the lanes that share a row: a power of two up to 32, at most half the row's 16-byte
// vectors so that every lane has loads in flight. Host and device use the same rule.
__host__ __device__ inline int decode_slice_log2(int64_t nvec) {
  int s = 0;
  while (s < 5 && (int64_t{2} << s) <= nvec) ++s;
  return s;
}

// The last run's block of head h combines its `runs` runs (after the ticket): their weights
// exp(m_r - M) / L into shared memory (sc: at least `runs` floats), loaded in parallel; then every
// channel's sum over the runs with independent loads (a chain of dependent L2 round trips per run
// was most of the kernel's time); writes y's head and resets the ticket for the next launch.
__device__ inline void attention_combine(const DecodeAttention& a, int64_t h, int64_t runs, float* sc, float* red) {
  __threadfence();
  const int64_t splits = a.splits, hd = a.dim / a.heads, off = h * hd;
  const float* st = a.stats + 2 * h * splits;
  float m = -INFINITY;
  for (int64_t q = threadIdx.x; q < runs; q += blockDim.x) {
    sc[q] = __ldcg(st + 2 * q);
    m = fmaxf(m, sc[q]);
  }
  m = block_all_reduce<true>(m, red);
  float l = 0.0f;
  for (int64_t q = threadIdx.x; q < runs; q += blockDim.x) {
    const float w = sc[q] > -INFINITY ? expf(sc[q] - m) : 0.0f;
    l += w * __ldcg(st + 2 * q + 1);
    sc[q] = w;
  }
  l = block_all_reduce<false>(l, red);  // (its barriers also publish sc)
  const float* run_sums = a.part + h * splits * hd;
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 8
    for (int64_t q = 0; q < runs; ++q) acc += sc[q] * __ldcg(run_sums + q * hd + c);
    a.y[off + c] = acc / l;
  }
  if (threadIdx.x == 0) a.tickets[h] = 0u;
}

// A run's results for the combination (its sums of e_j v_j by channel, `mine`, already stored):
// its max and sum of exponentials, then the head's ticket; true in the block that takes the last.
__device__ inline bool attention_run_done(const DecodeAttention& a, int64_t h, int64_t r, int64_t runs, float mx, float sum,
                                          bool empty) {
  __shared__ bool last;
  if (threadIdx.x == 0) a.stats[2 * (h * a.splits + r)] = empty ? -INFINITY : mx, a.stats[2 * (h * a.splits + r) + 1] = sum;
  __threadfence();  // the run's results are visible before the ticket is taken
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(a.tickets + h, 1u) == static_cast<unsigned>(runs - 1);
  __syncthreads();
  return last;
}

// Flash-decoding, one run: run r of the a.splits equal runs of head h's positions [0, len).
// Scores: a warp a key (lanes over the head's channels). The run's unnormalised sum of
// exp(score - m) v, its max m and its sum of exponentials go to the scratch; the block that
// finishes the head's last run (a ticket per head) combines the runs in run order
// (deterministic), writes y's head and resets the ticket for the next launch. The cache and q
// are read through L2 (just written by other blocks). Any block size (a multiple of 32, at least
// hd / 4); smem: attention_run_smem_floats.
__device__ inline void attention_run(const DecodeAttention& a, int64_t len, int64_t h, int64_t r, float* smem, float* red) {
  const int64_t splits = a.splits, hd = a.dim / a.heads, off = h * hd, hd4 = hd / 4;
  const int64_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  float* qs = smem;                           // [hd]
  float* part = qs + hd;                      // [groups, hd]
  float* sc = part + (blockDim.x / hd4) * hd; // [max(run, splits)] scores, exponentials; runs' weights
  const int64_t run = (len + splits - 1) / splits, j0 = min(len, r * run), n = min(len, j0 + run) - j0;
  __syncthreads();  // a previous run of this block may still read the shared memory
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = __ldcg(a.q + off + c);
  __syncthreads();
  for (int64_t j = warp; j < n; j += warps) {
    const float4* k4 = reinterpret_cast<const float4*>(a.k + (j0 + j) * a.dim + off);
    float dot = 0.0f;
    for (int64_t c = lane; c < hd4; c += 32) {
      const float4 x = __ldcg(k4 + c), y = reinterpret_cast<const float4*>(qs)[c];
      dot += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) sc[j] = dot * a.scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, sc[j]);
  mx = block_all_reduce<true>(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += (sc[j] = expf(sc[j] - mx));
  sum = block_all_reduce<false>(sum, red);  // (its barriers also publish sc)
  const int64_t groups = blockDim.x / hd4, c4 = threadIdx.x % hd4, gi = threadIdx.x / hd4;
  if (gi < groups) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int64_t j = gi; j < n; j += groups) {
      const float p = sc[j];
      const float4 v = __ldcg(reinterpret_cast<const float4*>(a.v + (j0 + j) * a.dim + off) + c4);
      acc.x += p * v.x, acc.y += p * v.y, acc.z += p * v.z, acc.w += p * v.w;
    }
    reinterpret_cast<float4*>(part + gi * hd)[c4] = acc;
  }
  __syncthreads();
  float* mine = a.part + (h * splits + r) * hd;
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t g = 0; g < groups; ++g) acc += part[g * hd + c];
    mine[c] = acc;
  }
  if (attention_run_done(a, h, r, splits, mx, sum, n == 0)) attention_combine(a, h, splits, sc, red);
}

// Floats of shared memory attention_run needs with `threads` threads.
__host__ __device__ inline int64_t attention_run_smem_floats(int64_t hd, int64_t context, int64_t splits, int threads) {
  const int64_t run = (context + splits - 1) / splits;
  return hd + (threads / (hd / 4)) * hd + (run > splits ? run : splits);  // sc: scores, then the runs' weights
}

}  // namespace trainlab::kern::decode_dev
