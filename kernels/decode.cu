// kernels/decode.cu: see decode.cuh for the math, layout and precision.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

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
  const int slice_log2 = decode_slice_log2(nvec);
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

// One block per head (decode_dev::attention_head), after the previous kernel.
__global__ void __launch_bounds__(512) decode_attention_kernel(const float* q, const float* kc, const float* vc,
                                                               const int32_t* state, int64_t dim, int64_t hd,
                                                               int64_t context, float scale, float* y) {
  extern __shared__ float4 sm4[];
  __shared__ float red[32];
  wait_for_previous_grid();
  attention_head(blockIdx.x, q, kc, vc, static_cast<int64_t>(state[1]) + 1, dim, hd, context, scale, y,
                 reinterpret_cast<float*>(sm4), red);
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
  const size_t shmem = static_cast<size_t>(decode_dev::attention_smem_floats(hd, context, threads)) * sizeof(float);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));  // as the CPU generator
  const cudaLaunchConfig_t cfg =
      launch_config(dim3(static_cast<unsigned>(heads)), dim3(static_cast<unsigned>(threads)), shmem, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel, q, kcache, vcache, state, dim, hd, context, scale, y));
  TL_LAUNCH_CHECK("decode_attention");
}

}  // namespace trainlab::kern
