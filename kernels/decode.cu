// kernels/decode.cu: see decode.cuh for the math, layout and precision.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "decode.cuh"
#include "device_common.cuh"

namespace trainlab::kern {

namespace {

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

// Programmatic dependent launch (sm_90): a kernel launched with the attribute may start while the
// previous one finishes; it waits here, before touching global memory, until that grid has
// completed and its writes are visible, and lets the next kernel start launching right away.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The two's-complement field of `bits` bits at bit `lo` of w.
template <int bits>
__device__ __forceinline__ int32_t sext(uint32_t w, int lo) {
  return static_cast<int32_t>(w << (32 - bits - lo)) >> (32 - bits);
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
template <>
struct Fmt<kDecI8> {
  static constexpr int kPerWord = 4;
  __device__ static float word(uint32_t w, const float* x) {
    const float4 a = *reinterpret_cast<const float4*>(x);
    return static_cast<float>(sext<8>(w, 0)) * a.x + static_cast<float>(sext<8>(w, 8)) * a.y +
           static_cast<float>(sext<8>(w, 16)) * a.z + static_cast<float>(sext<8>(w, 24)) * a.w;
  }
};
template <>
struct Fmt<kDecI4> {
  static constexpr int kPerWord = 8;
  // Eight two's-complement nibbles, the lowest first.
  __device__ static float word(uint32_t w, const float* x) {
    const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
    return static_cast<float>(sext<4>(w, 0)) * a.x + static_cast<float>(sext<4>(w, 4)) * a.y +
           static_cast<float>(sext<4>(w, 8)) * a.z + static_cast<float>(sext<4>(w, 12)) * a.w +
           static_cast<float>(sext<4>(w, 16)) * b.x + static_cast<float>(sext<4>(w, 20)) * b.y +
           static_cast<float>(sext<4>(w, 24)) * b.z + static_cast<float>(sext<4>(w, 28)) * b.w;
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
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int jw = (j + rot) & 3;
      const uint32_t w = jw == 0 ? u.x : jw == 1 ? u.y : jw == 2 ? u.z : u.w;
      acc += Fmt<F>::word(w, x + jw * Fmt<F>::kPerWord);
    }
    return acc;
  }
}

constexpr int kDepth = 8;  // 16-byte weight loads in flight per lane

template <int F>
__global__ void __launch_bounds__(512) decode_gemv_kernel(DecodeGemv g, int slice_log2) {
  extern __shared__ float4 smem4[];
  const int64_t K = g.cols;
  float* xs = reinterpret_cast<float*>(smem4);  // x' [K]
  float* gs = xs + K;                           // LayerNorm gamma, beta [K] each
  float* bs = gs + K;
  __shared__ float red[32];
  constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  constexpr int E = 4 * Fmt<F>::kPerWord;  // weights per 16-byte load

  // Rows: a slice of S lanes per row, 32/S rows per warp.
  const int S = 1 << slice_log2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane & (S - 1), slot = lane >> slice_log2;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + warp) * (32 >> slice_log2) + slot;
  const bool valid = row < g.rows;
  const int64_t r = valid ? row : g.rows - 1;  // idle slices read a valid row and write nothing
  const int64_t nvec = K / E;
  const uint4* wrow = reinterpret_cast<const uint4*>(g.w) + r * nvec;
  const __half* sc = static_cast<const __half*>(g.scales) + (kScaled ? r * (K / g.group) : 0);
  uint4 u[kDepth];
  float su[kDepth];
  auto load = [&](int64_t v0) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      u[i] = v < nvec ? __ldg(wrow + v) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kScaled) su[i] = v < nvec ? __half2float(sc[v * E / g.group]) : 0.0f;
    }
  };
  // The weights, their scales and the LayerNorm parameters do not depend on earlier kernels: the
  // first loads are issued before waiting for the previous kernel (programmatic dependent launch
  // lets this kernel start while that one finishes), so their latency hides behind it.
  load(sub);
  if (g.prologue != kPlain)
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) gs[k] = g.gamma[k], bs[k] = g.beta[k];
  wait_for_previous_grid();
  // Token and position: read once per block (the step's first kernel reads them from host memory
  // and publishes them to device memory for the kernels after it).
  __shared__ int32_t st[2];
  if (g.state && threadIdx.x < 2) {
    st[threadIdx.x] = static_cast<const volatile int32_t*>(g.state)[threadIdx.x];  // host-written: no stale cache
    if (g.state_out && blockIdx.x == 0) g.state_out[threadIdx.x] = st[threadIdx.x];
  }
  __syncthreads();

  // Prologue: the input vector into shared memory, layer-normalised when asked.
  if (g.prologue == kEmbedLayerNorm) {
    const int64_t t = st[0], p = st[1];
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      const float v = g.tok[t * K + k] + g.pos[p * K + k];
      xs[k] = v;
      if (blockIdx.x == 0) g.x_out[k] = v;
    }
  } else {
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) xs[k] = g.x[k];
  }
  if (g.prologue != kPlain) {
    float s = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += xs[k];
    const float mean = block_all_reduce<false>(s, red) / static_cast<float>(K);
    float v = 0.0f;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) v += (xs[k] - mean) * (xs[k] - mean);
    const float var = block_all_reduce<false>(v, red) / static_cast<float>(K);
    const float rs = 1.0f / sqrtf(var + 1e-5f);
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) xs[k] = (xs[k] - mean) * rs * gs[k] + bs[k];
  }
  __syncthreads();

  float acc = 0.0f;
  for (int64_t v0 = sub;;) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      if (v >= nvec) break;
      const float part = dot16<F>(u[i], xs + v * E, sub);
      if constexpr (kScaled) acc += su[i] * part;
      else acc += part;
    }
    v0 += int64_t{kDepth} * S;
    if (v0 >= nvec) break;
    load(v0);
  }
  for (int o = S >> 1; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (!valid || sub != 0) return;
  const float v = acc + (g.bias ? g.bias[row] : 0.0f);
  switch (g.epilogue) {
    case kStore: g.y[row] = v; break;
    case kAddTo: g.y[row] += v; break;
    case kGelu: g.y[row] = gelu_f(v); break;
    case kQkvScatter: {
      const int64_t d = g.rows / 3, p = st[1];
      if (row < d) g.y[row] = v;
      else if (row < 2 * d) g.kcache[p * d + row - d] = v;
      else g.vcache[p * d + row - 2 * d] = v;
      break;
    }
  }
}

struct GemvShape {
  int slice_log2, threads;
  int64_t blocks;
};

GemvShape gemv_shape(const DecodeGemv& g, int sm_count) {
  const int per_vec = g.format == kDecF32 ? 4 : g.format == kDecBF16 ? 8 : g.format == kDecI8 ? 16 : 32;
  const int64_t nvec = g.cols / per_vec;
  int slice_log2 = 0;
  while (slice_log2 < 5 && (int64_t{2} << slice_log2) <= nvec) ++slice_log2;
  // One wave: the fewest warps a block (4, 8 or 16) that brings the blocks down to one per SM, since
  // a token's kernels are latency-bound and every extra wave of blocks costs a whole prologue and
  // load round trip. Where even 16 warps leave more blocks than SMs (large models), 8 warps: blocks
  // of 256 threads of which several fit an SM at once.
  auto blocks = [&](int w) {
    const int64_t rows_per_block = int64_t{w} * (32 >> slice_log2);
    return (g.rows + rows_per_block - 1) / rows_per_block;
  };
  const int warps = blocks(4) <= sm_count ? 4 : blocks(8) <= sm_count ? 8 : blocks(16) <= sm_count ? 16 : 8;
  return {slice_log2, warps * 32, blocks(warps)};
}

// One block per head. Scores: a thread per key, the q.k dot product from 16-byte loads of the
// key row (independent loads, one round trip). Values: threads own 4 channels each (hd/4
// threads read one value row, coalesced) and split the positions into groups, summed at the end.
__global__ void __launch_bounds__(512) decode_attention_kernel(const float* q, const float* kc, const float* vc,
                                                               const int32_t* state, int64_t dim, int64_t hd,
                                                               int64_t context, float scale, float* y) {
  extern __shared__ float4 sm4[];
  __shared__ float red[32];
  float* qs = reinterpret_cast<float*>(sm4);  // [hd]
  float* sc = qs + hd;                        // [context] scores, then probabilities
  float* part = sc + (context + 3) / 4 * 4;   // [groups, hd], 16-byte aligned
  wait_for_previous_grid();
  const int64_t h = blockIdx.x, len = static_cast<int64_t>(state[1]) + 1, off = h * hd, hd4 = hd / 4;
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = q[off + c];
  __syncthreads();
  const float4* q4 = reinterpret_cast<const float4*>(qs);
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const float4* k4 = reinterpret_cast<const float4*>(kc + j * dim + off);
    float dot = 0.0f;
#pragma unroll 16
    for (int64_t c = 0; c < hd4; ++c) {
      const float4 a = __ldcg(k4 + c), b = q4[c];  // (written by earlier kernels: L2, not the read-only path)
      dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    sc[j] = dot * scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, sc[j]);
  mx = block_all_reduce<true>(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sum += (sc[j] = expf(sc[j] - mx));
  sum = block_all_reduce<false>(sum, red);  // (its barriers also publish sc)
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) sc[j] /= sum;  // p_j, as the CPU
  __syncthreads();
  const int64_t groups = blockDim.x / hd4, c4 = threadIdx.x % hd4, gi = threadIdx.x / hd4;
  if (gi < groups) {
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (int64_t j = gi; j < len; j += groups) {
      const float p = sc[j];
      const float4 v = __ldcg(reinterpret_cast<const float4*>(vc + j * dim + off) + c4);
      a.x += p * v.x, a.y += p * v.y, a.z += p * v.z, a.w += p * v.w;
    }
    reinterpret_cast<float4*>(part + gi * hd)[c4] = a;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float a = 0.0f;
    for (int64_t p = 0; p < groups; ++p) a += part[p * hd + c];
    y[off + c] = a;
  }
}

// The launch, with programmatic dependent launch allowed when `pdl` (the attribute array lives
// in static storage: the config only points at it).
cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, bool pdl) {
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

// Every decode kernel asks for the same split of the SM's memory between L1 and shared memory, so
// that consecutive kernels (overlapping under PDL) never wait for an SM to drain and be
// reconfigured. Set once per kernel; a hint, so an error is cleared rather than raised.
template <class Kernel>
void same_carveout(Kernel k) {
  if (cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 50) != cudaSuccess) cudaGetLastError();
}
}  // namespace

void prepare_decode_kernels() {
  static const bool done = [] {
    same_carveout(decode_gemv_kernel<kDecF32>);
    same_carveout(decode_gemv_kernel<kDecBF16>);
    same_carveout(decode_gemv_kernel<kDecI8>);
    same_carveout(decode_gemv_kernel<kDecI4>);
    same_carveout(decode_attention_kernel);
    return true;
  }();
  (void)done;
}

void launch_decode_gemv(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  const GemvShape sh = gemv_shape(g, sm_count);
  const size_t shmem = static_cast<size_t>(g.prologue == kPlain ? g.cols : 3 * g.cols) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(sh.blocks));
  const cudaLaunchConfig_t cfg = launch_config(grid, dim3(static_cast<unsigned>(sh.threads)), shmem, s, pdl);
  switch (g.format) {
    case kDecF32: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_kernel<kDecF32>, g, sh.slice_log2)); break;
    case kDecBF16: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_kernel<kDecBF16>, g, sh.slice_log2)); break;
    case kDecI8: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_kernel<kDecI8>, g, sh.slice_log2)); break;
    case kDecI4: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_kernel<kDecI4>, g, sh.slice_log2)); break;
  }
  TL_LAUNCH_CHECK("decode_gemv");
}

void launch_decode_attention(const float* q, const float* kcache, const float* vcache, const int32_t* state,
                             int64_t heads, int64_t dim, int64_t context, float* y, bool pdl, cudaStream_t s) {
  const int64_t hd = dim / heads;
  const int threads = 512;
  const int64_t groups = threads / (hd / 4);
  const size_t shmem = static_cast<size_t>(hd + (context + 3) / 4 * 4 + groups * hd) * sizeof(float);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));  // as the CPU generator
  const cudaLaunchConfig_t cfg =
      launch_config(dim3(static_cast<unsigned>(heads)), dim3(static_cast<unsigned>(threads)), shmem, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel, q, kcache, vcache, state, dim, hd, context, scale, y));
  TL_LAUNCH_CHECK("decode_attention");
}

}  // namespace trainlab::kern
