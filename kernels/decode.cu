// kernels/decode.cu: see decode.cuh for the math, layout and precision.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "decode.cuh"
#include "decode_device.cuh"
#include "device_common.cuh"

namespace trainlab::kern {

namespace {

using namespace decode_dev;

// Programmatic dependent launch (sm_90): a kernel launched with the attribute may start while the
// previous one finishes; it waits here, before touching global memory, until that grid has
// completed and its writes are visible, and lets the next kernel start launching right away.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The input vector x' [K] into shared memory (decode.cuh's prologues), with 16-byte loads; the
// LayerNorm's gamma and beta are read where they are applied (no shared memory of their own, so
// that more blocks fit an SM). `st` holds the token and position.
__device__ void gemv_prologue(const DecodeGemv& g, const int32_t* st, float* xs, float* red) {
  const int64_t K4 = g.cols / 4;
  float4* x4 = reinterpret_cast<float4*>(xs);
  if (g.prologue == kEmbedLayerNorm) {
    const float4* t4 = reinterpret_cast<const float4*>(g.tok + int64_t{st[0]} * g.cols);
    const float4* p4 = reinterpret_cast<const float4*>(g.pos + int64_t{st[1]} * g.cols);
    for (int64_t k = threadIdx.x; k < K4; k += blockDim.x) {
      const float4 a = t4[k], b = p4[k];
      const float4 v = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
      x4[k] = v;
      if (blockIdx.x == 0) reinterpret_cast<float4*>(g.x_out)[k] = v;
    }
  } else {
    for (int64_t k = threadIdx.x; k < K4; k += blockDim.x) x4[k] = __ldcg(reinterpret_cast<const float4*>(g.x) + k);
  }
  if (g.prologue == kPlain) return;  // the caller's barrier publishes xs
  const int64_t K = g.cols;
  __syncthreads();
  float s = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += xs[k];
  const float mean = block_all_reduce<false>(s, red) / static_cast<float>(K);
  float v = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) v += (xs[k] - mean) * (xs[k] - mean);
  const float var = block_all_reduce<false>(v, red) / static_cast<float>(K);
  const float rs = 1.0f / sqrtf(var + 1e-5f);
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) xs[k] = (xs[k] - mean) * rs * __ldg(g.gamma + k) + __ldg(g.beta + k);
}

// The GEMV's epilogue for one finished row (decode.cuh).
__device__ __forceinline__ void gemv_epilogue(const DecodeGemv& g, int64_t row, float acc, int32_t position) {
  const float v = acc + (g.bias ? g.bias[row] : 0.0f);
  switch (g.epilogue) {
    case kStore: g.y[row] = v; break;
    case kAddTo: g.y[row] += v; break;
    case kGelu: g.y[row] = gelu_f(v); break;
    case kQkvScatter: {
      const int64_t d = g.rows / 3, p = position;
      if (row < d) g.y[row] = v;
      else if (row < 2 * d) g.kcache[p * d + row - d] = v;
      else g.vcache[p * d + row - 2 * d] = v;
      break;
    }
  }
}

// One wave of blocks (the grid is sized by occupancy, gemv_shape); each slice of S lanes takes
// the row groups of its warp grid-stride: row = (warp_global + i * warps_in_grid) * (32 / S) +
// slot. A row is summed as before (decode_slice_log2's slice, kDepth loads in flight a lane, the
// same order as decode_step.cu's phases). The first row's weights are loaded before the prologue.
template <int F>
__global__ void __launch_bounds__(512) decode_gemv_kernel(DecodeGemv g, int slice_log2) {
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);  // x' [K]
  __shared__ float red[32];
  __shared__ int32_t st[2];
  constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  constexpr int E = 4 * Fmt<F>::kPerWord;  // weights per 16-byte load
  const int64_t K = g.cols, nvec = K / E;
  const int S = 1 << slice_log2, rows_per_warp = 32 >> slice_log2;
  const int lane = threadIdx.x & 31, sub = lane & (S - 1), slot = lane >> slice_log2;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x >> 5);
  const int64_t gw = int64_t{blockIdx.x} * (blockDim.x >> 5) + (threadIdx.x >> 5);
  uint4 u[kDepth];
  float su[kDepth];
  const uint4* wrow = nullptr;
  const __half* sc = nullptr;
  auto start_row = [&](int64_t row) {
    const int64_t r = row < g.rows ? row : g.rows - 1;  // idle slices read a valid row and write nothing
    wrow = reinterpret_cast<const uint4*>(g.w) + r * nvec;
    sc = static_cast<const __half*>(g.scales) + (kScaled ? r * (K / g.group) : 0);
  };
  auto load = [&](int64_t v0) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      u[i] = v < nvec ? __ldg(wrow + v) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kScaled) su[i] = v < nvec ? __half2float(sc[v * E / g.group]) : 0.0f;
    }
  };
  int64_t row = gw * rows_per_warp + slot;
  start_row(row);
  load(sub);  // independent of earlier kernels: issued before waiting for them (PDL)
  wait_for_previous_grid();
  if (g.state && threadIdx.x < 2) {
    st[threadIdx.x] = static_cast<const volatile int32_t*>(g.state)[threadIdx.x];  // host-written: no stale cache
    if (g.state_out && blockIdx.x == 0) g.state_out[threadIdx.x] = st[threadIdx.x];
  }
  __syncthreads();
  gemv_prologue(g, st, xs, red);
  __syncthreads();
  const int32_t position = st[1];
  for (int64_t first = gw * rows_per_warp; first < g.rows; first += warps * rows_per_warp) {
    if (first != gw * rows_per_warp) {
      row = first + slot;
      start_row(row);
      load(sub);
    }
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
    if (row < g.rows && sub == 0) gemv_epilogue(g, row, acc, position);
  }
}

struct GemvShape {
  int slice_log2, threads;
  int64_t blocks;
};

// Blocks of decode_gemv_kernel<F> that fit one SM (cached: the decoder asks for every launch).
int gemv_blocks_per_sm(int format, int threads, size_t shmem) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, size_t>, int> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(format, threads, shmem);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  int n = 0;
  cudaError_t e = cudaSuccess;
  switch (format) {
    case kDecF32: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_kernel<kDecF32>, threads, shmem); break;
    case kDecBF16: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_kernel<kDecBF16>, threads, shmem); break;
    case kDecI8: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_kernel<kDecI8>, threads, shmem); break;
    default: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_kernel<kDecI4>, threads, shmem); break;
  }
  TL_CUDA_CHECK(e);
  n = std::max(n, 1);
  cache[key] = n;
  return n;
}

GemvShape gemv_shape(const DecodeGemv& g, int sm_count, size_t shmem) {
  const int per_vec = g.format == kDecF32 ? 4 : g.format == kDecBF16 ? 8 : g.format == kDecI8 ? 16 : 32;
  const int64_t nvec = g.cols / per_vec;
  const int slice_log2 = decode_slice_log2(nvec);
  // Small matrices: the fewest warps a block (4, 8 or 16) that brings the blocks down to one per
  // SM (a token's kernels are latency-bound). Large ones: blocks of 16 warps, as many as fit the
  // GPU at once (one wave, each block's prologue paid once), the warps going round the rows.
  auto blocks = [&](int w) {
    const int64_t rows_per_block = int64_t{w} * (32 >> slice_log2);
    return (g.rows + rows_per_block - 1) / rows_per_block;
  };
  for (const int w : {4, 8, 16})
    if (blocks(w) <= sm_count) return {slice_log2, w * 32, blocks(w)};
  const int64_t wave = int64_t{sm_count} * gemv_blocks_per_sm(g.format, 512, shmem);
  return {slice_log2, 512, std::min(blocks(16), wave)};
}

// Flash-decoding (decode.cuh, "Attention"): block (h, r) takes run r of head h
// (decode_dev::attention_run), after the previous kernel.
__global__ void __launch_bounds__(kAttnThreads) decode_attention_kernel(DecodeAttention a) {
  extern __shared__ float4 sm4[];
  __shared__ float red[32];
  wait_for_previous_grid();
  attention_run(a, static_cast<int64_t>(a.state[1]) + 1, blockIdx.x, blockIdx.y, reinterpret_cast<float*>(sm4), red);
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

void prepare_decode_gemv(int format, int64_t cols) {
  gemv_blocks_per_sm(format, 512, static_cast<size_t>(cols) * sizeof(float));
}

void launch_decode_gemv(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  const size_t shmem = static_cast<size_t>(g.cols) * sizeof(float);
  const GemvShape sh = gemv_shape(g, sm_count, shmem);
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

int decode_attention_splits(int64_t heads, int64_t context, int sm_count) {
  const int64_t want = (2 * sm_count + heads - 1) / heads, most = std::max<int64_t>(1, (context + 15) / 16);
  return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

int64_t decode_attention_scratch_floats(int64_t heads, int64_t dim, int splits) { return int64_t{splits} * (dim + 2 * heads); }

void launch_decode_attention(const DecodeAttention& a, bool pdl, cudaStream_t s) {
  const size_t shmem =
      static_cast<size_t>(attention_run_smem_floats(a.dim / a.heads, a.context, a.splits, kAttnThreads)) * sizeof(float);
  const cudaLaunchConfig_t cfg = launch_config(dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.splits)),
                                               dim3(kAttnThreads), shmem, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel, a));
  TL_LAUNCH_CHECK("decode_attention");
}

}  // namespace trainlab::kern
