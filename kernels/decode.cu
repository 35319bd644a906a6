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

// A lane's stream along one weight row: kDepth 16-byte loads in flight (and, for int8 / int4, the
// scale of each load's group), issued ahead of the sums that use them. Rows past the last read the
// last row (idle slices compute and write nothing). Both GEMV kernels below stream this way.
template <int F>
struct RowStream {
  static constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  const DecodeGemv& g;
  const int64_t nvec, end;  // a row's vectors; this lane reads those before `end`
  const int S;
  uint4 u[kDepth];
  float su[kDepth];
  const uint4* wrow = nullptr;
  const __half* sc = nullptr;
  __device__ RowStream(const DecodeGemv& gemv, int64_t vectors, int stride, int64_t stop)
      : g(gemv), nvec(vectors), end(stop), S(stride) {}
  __device__ __forceinline__ void start(int64_t row) {
    const int64_t r = row < g.rows ? row : g.rows - 1;
    wrow = reinterpret_cast<const uint4*>(g.w) + r * nvec;
    sc = static_cast<const __half*>(g.scales) + (kScaled ? r * (g.cols / g.group) : 0);
  }
  __device__ __forceinline__ void load(int64_t v0) {
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      u[i] = v < end ? load_stream(wrow + v) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kScaled) {
        constexpr int kWeights = 4 * Fmt<F>::kPerWord;  // weights per 16-byte load
        su[i] = v < end ? __half2float(sc[v * kWeights / g.group]) : 0.0f;
      }
    }
  }
};

// The batched GEMV (decode.cuh, "Batched decoding"): one wave of blocks at most (the grid is sized
// by occupancy, gemv_shape), going round tiles of rows, slices of S lanes a row
// (decode_slice_log2) with kDepth loads in flight a lane; each 16-byte weight load multiplied
// with the x of every sequence (read from global memory, which L1 keeps for the block) and summed
// into one accumulator a sequence.
template <int F>
__global__ void __launch_bounds__(512) decode_gemv_batch_kernel(DecodeGemv g, int slice_log2) {
  __shared__ int32_t position;
  constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  constexpr int E = 4 * Fmt<F>::kPerWord;
  const int64_t K = g.cols, nvec = K / E;
  const int nb = g.batch;
  const int S = 1 << slice_log2, rows_per_warp = 32 >> slice_log2;
  const int lane = threadIdx.x & 31, sub = lane & (S - 1), slot = lane >> slice_log2;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x >> 5);
  const int64_t gw = int64_t{blockIdx.x} * (blockDim.x >> 5) + (threadIdx.x >> 5);
  RowStream<F> w(g, nvec, S, nvec);
  int64_t row = gw * rows_per_warp + slot;
  w.start(row);
  w.load(sub);  // before waiting for the previous kernel (PDL)
  wait_for_previous_grid();
  if (threadIdx.x == 0) position = g.state ? g.state[1] : 0;
  __syncthreads();
  for (int64_t first = gw * rows_per_warp; first < g.rows; first += warps * rows_per_warp) {
    if (first != gw * rows_per_warp) {
      row = first + slot;
      w.start(row);
      w.load(sub);
    }
    float acc[kMaxBatch];
#pragma unroll
    for (int b = 0; b < kMaxBatch; ++b) acc[b] = 0.0f;
    for (int64_t v0 = sub;;) {
#pragma unroll
      for (int i = 0; i < kDepth; ++i) {
        const int64_t v = v0 + int64_t{i} * S;
        if (v >= nvec) break;
#pragma unroll
        for (int b = 0; b < kMaxBatch; ++b) {
          if (b >= nb) break;
          const float part = dot16<F>(w.u[i], g.x + b * K + v * E, sub);
          if constexpr (kScaled) acc[b] += w.su[i] * part;
          else acc[b] += part;
        }
      }
      v0 += int64_t{kDepth} * S;
      if (v0 >= nvec) break;
      w.load(v0);
    }
#pragma unroll
    for (int b = 0; b < kMaxBatch; ++b) {
      if (b >= nb) break;
      float a = acc[b];
      for (int o = S >> 1; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (row < g.rows && sub == 0) gemv_epilogue(g, row, a, position, b);
    }
  }
}

// The one-sequence GEMV on a normalised input (decode.cuh, "One sequence"): blocks of four warps,
// as many as the rows need (the GPU starts each as another ends, so no block waits on a slow
// one's tail), warp w taking piece w % wpr of rows (w / wpr) * (32 / S) + slot. A lane keeps D
// 16-byte loads in flight and reissues each one as soon as it has taken it (rolling), so it never
// waits with none in flight; x comes from global memory through L1 (no block-wide prologue). The
// pieces' sums are added in piece order.
constexpr int kRowsThreads = 128;
constexpr int kRowsDepth = 4;  // loads in flight a lane (as measured: BENCHMARKS.md, decoding)
template <int F>
__global__ void __launch_bounds__(kRowsThreads) decode_gemv_rows_kernel(DecodeGemv g, int slice_log2, int wpr_log2) {
  constexpr int D = kRowsDepth;
  __shared__ float piece_sum[kRowsThreads / 32][32];
  constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  constexpr int E = 4 * Fmt<F>::kPerWord;  // weights per 16-byte load
  const int64_t nvec = g.cols / E;
  const int S = 1 << slice_log2, rows_per_warp = 32 >> slice_log2, wpr = 1 << wpr_log2;
  const int lane = threadIdx.x & 31, sub = lane & (S - 1), slot = lane >> slice_log2;
  const int warp = threadIdx.x >> 5, piece = warp & (wpr - 1);
  const int64_t per_piece = ((nvec + wpr - 1) / wpr + S - 1) / S * S;
  const int64_t v_begin = piece * per_piece, v_end = min(nvec, v_begin + per_piece);
  const int64_t row = (int64_t{blockIdx.x} * ((kRowsThreads / 32) >> wpr_log2) + (warp >> wpr_log2)) * rows_per_warp + slot;
  const int64_t r = row < g.rows ? row : g.rows - 1;  // rows past the last read the last (and write nothing)
  const uint4* wrow = reinterpret_cast<const uint4*>(g.w) + r * nvec;
  const __half* sc = static_cast<const __half*>(g.scales) + (kScaled ? r * (g.cols / g.group) : 0);
  uint4 u[D];
  float su[D];
  const auto load = [&](int i, int64_t v) {
    if (v >= v_end) return;
    u[i] = load_stream(wrow + v);
    if constexpr (kScaled) su[i] = __half2float(sc[v * E / g.group]);
  };
#pragma unroll
  for (int i = 0; i < D; ++i) load(i, v_begin + sub + int64_t{i} * S);  // before waiting for the previous kernel (PDL)
  wait_for_previous_grid();
  float acc[2] = {0.0f, 0.0f};  // two chains: even and odd loads
  for (int64_t v0 = v_begin + sub; v0 < v_end; v0 += int64_t{D} * S) {
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      if (v >= v_end) break;
      const uint4 w = u[i];
      const float s = kScaled ? su[i] : 1.0f;
      load(i, v + int64_t{D} * S);
      const float part = dot16<F>(w, g.x + v * E, sub);
      if constexpr (kScaled) acc[i & 1] += s * part;
      else acc[i & 1] += part;
    }
  }
  float sum = acc[0] + acc[1];
  for (int o = S >> 1; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (wpr > 1) {
    if (sub == 0) piece_sum[warp][slot] = sum;
    __syncthreads();
    if (piece == 0 && sub == 0)
      for (int p = 1; p < wpr; ++p) sum += piece_sum[warp + p][slot];
  }
  if (row < g.rows && sub == 0 && piece == 0) gemv_epilogue(g, row, sum, g.state ? g.state[1] : 0);
}

// Batched LayerNorm (decode.cuh): block b normalises sequence b's x (or its embedding sum, stored
// into x_out) into h. A thread holds the values k = t, t + 256, ... in registers (sums in that
// order, then the block's, for the mean and then the biased variance); its gamma and beta are
// loaded before waiting for the previous kernel, so only x is on the critical path.
constexpr int kNormThreads = 256;
constexpr int kNormPer = 12;  // values a thread: dims up to 3072 (the decoder's limit)
__global__ void __launch_bounds__(kNormThreads) decode_batch_norm_kernel(DecodeBatchNorm n) {
  __shared__ float red[32];
  __shared__ int32_t st[2];
  const int64_t D = n.dim;
  float gm[kNormPer], bt[kNormPer], x[kNormPer];
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    gm[i] = k < D ? __ldg(n.gamma + k) : 0.0f, bt[i] = k < D ? __ldg(n.beta + k) : 0.0f;
  }
  wait_for_previous_grid();
  const int b = blockIdx.x;
  const volatile int32_t* state = n.state;  // host-written when mapped: no stale cache
  if (threadIdx.x == 0) st[0] = state[2 + b], st[1] = state[1] + b * n.pos_step;
  if (n.state_out && b == 0)
    for (int i = threadIdx.x; i < 2 + n.batch; i += blockDim.x) n.state_out[i] = state[i];
  __syncthreads();
  const float* tok = n.tok ? n.tok + int64_t{st[0]} * D : nullptr;
  const float* pos = n.tok ? n.pos + int64_t{st[1]} * D : nullptr;
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    if (k >= D) break;
    if (tok) {
      x[i] = tok[k] + pos[k];
      n.x_out[b * D + k] = x[i];
    } else {
      x[i] = __ldcg(n.x + b * D + k);
    }
    s += x[i];
  }
  const float mean = block_all_reduce<false>(s, red) / static_cast<float>(D);
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    if (threadIdx.x + int64_t{i} * kNormThreads >= D) break;
    v += (x[i] - mean) * (x[i] - mean);
  }
  const float var = block_all_reduce<false>(v, red) / static_cast<float>(D);
  const float rs = 1.0f / sqrtf(var + 1e-5f);
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    if (k >= D) break;
    n.h[b * D + k] = (x[i] - mean) * rs * gm[i] + bt[i];
  }
}

struct GemvShape {
  int slice_log2, threads;
  int64_t blocks;
};

// Blocks of decode_gemv_batch_kernel<F> that fit one SM (cached: the decoder asks for every launch).
int gemv_blocks_per_sm(int format) {
  static std::mutex mu;
  static std::map<int, int> cache;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(format); it != cache.end()) return it->second;
  int n = 0;
  cudaError_t e = cudaSuccess;
  switch (format) {
    case kDecF32: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_batch_kernel<kDecF32>, 512, 0); break;
    case kDecBF16: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_batch_kernel<kDecBF16>, 512, 0); break;
    case kDecI8: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_batch_kernel<kDecI8>, 512, 0); break;
    default: e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_gemv_batch_kernel<kDecI4>, 512, 0); break;
  }
  TL_CUDA_CHECK(e);
  n = std::max(n, 1);
  cache[format] = n;
  return n;
}

GemvShape gemv_shape(const DecodeGemv& g, int sm_count) {
  const int64_t nvec = g.cols / decode_weights_per_load(g.format);
  const int slice_log2 = decode_slice_log2(nvec), rows_per_warp = 32 >> slice_log2;
  auto blocks = [&](int w) {
    const int64_t rows_per_block = int64_t{w} * rows_per_warp;
    return (g.rows + rows_per_block - 1) / rows_per_block;
  };
  // Small matrices: the fewest warps a block (4, 8 or 16) that brings the blocks down to one per
  // SM. Otherwise blocks of 16 warps, as many as fit the GPU at once (one wave), going round the rows.
  for (const int w : {4, 8, 16})
    if (blocks(w) <= sm_count) return {slice_log2, w * 32, blocks(w)};
  return {slice_log2, 512, std::min(blocks(16), int64_t{sm_count} * gemv_blocks_per_sm(g.format))};
}

// Flash-decoding (decode.cuh, "Attention"): block (h, r) takes run r of head h
// (decode_dev::attention_run), after the previous kernel.
__global__ void __launch_bounds__(kAttnThreads) decode_attention_kernel(DecodeAttention a) {
  extern __shared__ float4 sm4[];
  __shared__ float red[32];
  wait_for_previous_grid();
  if (blockIdx.z > 0) {  // sequence z of a batch (decode.cuh)
    const int64_t z = blockIdx.z;
    a.q += z * a.dim, a.y += z * a.dim, a.k += z * a.kv_stride, a.v += z * a.kv_stride;
    a.part += z * a.splits * a.dim, a.stats += z * a.splits * a.heads * 2, a.tickets += z * a.heads;
  }
  attention_run(a, static_cast<int64_t>(a.state[1]) + int64_t{blockIdx.z} * a.pos_step + 1, blockIdx.x, blockIdx.y, reinterpret_cast<float*>(sm4), red);
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

// Every decode kernel that uses shared memory asks for the same split of the SM's memory between
// L1 and shared memory, so that consecutive kernels (overlapping under PDL) never wait for an SM
// to drain and be reconfigured. Set once per kernel; a hint, so an error is cleared rather than
// raised. The one-sequence GEMV (next to no shared memory, x read through L1) keeps the driver's
// choice: it was measured that way (BENCHMARKS.md, decoding, fourth measurement).
template <class Kernel>
void same_carveout(Kernel k) {
  if (cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 50) != cudaSuccess) cudaGetLastError();
}
// The one-sequence GEMV's launch (decode_gemv_rows_kernel): lanes a row 2^slice_log2 (the slice
// rule), warps a row 2^wpr_log2: doubled (up to the block's four) while each lane keeps more than
// 2 kRowsDepth loads, or while the rows give fewer than 16 warps an SM and each lane keeps 3
// loads (a few long rows: gpt2's out in bf16 went from 6.8 to 5.0 us with four warps a row;
// at 1.5-2 loads a lane int8 seemed to lose, so not that far: BENCHMARKS.md, decoding, fifth).
void launch_decode_gemv_rows(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  const int64_t nvec = g.cols / decode_weights_per_load(g.format);
  const int slice_log2 = decode_slice_log2(nvec);
  int wpr_log2 = 0;
  const auto more = [&](int w) {  // doubling from 2^w warps a row pays
    const int64_t lanes_after = int64_t{2} << (slice_log2 + w);
    return nvec > int64_t{2} * kRowsDepth * lanes_after ||
           (((g.rows << w) >> (5 - slice_log2)) < int64_t{16} * sm_count && nvec >= 3 * lanes_after);
  };
  while (wpr_log2 < 2 && more(wpr_log2)) ++wpr_log2;
  const int64_t rows_per_block = int64_t{(kRowsThreads / 32) >> wpr_log2} * (32 >> slice_log2);
  const auto blocks = static_cast<unsigned>((g.rows + rows_per_block - 1) / rows_per_block);
  const cudaLaunchConfig_t cfg = launch_config(dim3(blocks), dim3(kRowsThreads), 0, s, pdl);
  switch (g.format) {
    case kDecF32: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_rows_kernel<kDecF32>, g, slice_log2, wpr_log2)); break;
    case kDecBF16: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_rows_kernel<kDecBF16>, g, slice_log2, wpr_log2)); break;
    case kDecI8: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_rows_kernel<kDecI8>, g, slice_log2, wpr_log2)); break;
    case kDecI4: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_rows_kernel<kDecI4>, g, slice_log2, wpr_log2)); break;
  }
  TL_LAUNCH_CHECK("decode_gemv_rows");
}
}  // namespace

void prepare_decode_kernels() {
  static const bool done = [] {
    same_carveout(decode_attention_kernel);
    same_carveout(decode_gemv_batch_kernel<kDecF32>);
    same_carveout(decode_gemv_batch_kernel<kDecBF16>);
    same_carveout(decode_gemv_batch_kernel<kDecI8>);
    same_carveout(decode_gemv_batch_kernel<kDecI4>);
    same_carveout(decode_batch_norm_kernel);
    return true;
  }();
  (void)done;
}

void prepare_decode_gemv_batch(int format) { gemv_blocks_per_sm(format); }

void launch_decode_gemv_batch(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  if (g.layout == kTcChunks) return launch_decode_gemv_tc(g, pdl, s);
  if (g.batch < 1 || g.batch > kMaxBatch) throw_cuda_error(cudaErrorInvalidValue, "decode_gemv_batch: batch 1..16", __FILE__, __LINE__);
  if (g.batch == 1 && !g.batch_sums) return launch_decode_gemv_rows(g, sm_count, pdl, s);
  const GemvShape sh = gemv_shape(g, sm_count);
  const cudaLaunchConfig_t cfg = launch_config(dim3(static_cast<unsigned>(sh.blocks)), dim3(static_cast<unsigned>(sh.threads)), 0, s, pdl);
  switch (g.format) {
    case kDecF32: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_batch_kernel<kDecF32>, g, sh.slice_log2)); break;
    case kDecBF16: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_batch_kernel<kDecBF16>, g, sh.slice_log2)); break;
    case kDecI8: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_batch_kernel<kDecI8>, g, sh.slice_log2)); break;
    case kDecI4: TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_batch_kernel<kDecI4>, g, sh.slice_log2)); break;
  }
  TL_LAUNCH_CHECK("decode_gemv_batch");
}

void launch_decode_batch_norm(const DecodeBatchNorm& n, bool pdl, cudaStream_t s) {
  if (n.dim > int64_t{kNormThreads} * kNormPer)
    throw_cuda_error(cudaErrorInvalidValue, "decode_batch_norm: dim above 3072", __FILE__, __LINE__);
  const cudaLaunchConfig_t cfg = launch_config(dim3(static_cast<unsigned>(n.batch)), dim3(kNormThreads), 0, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_batch_norm_kernel, n));
  TL_LAUNCH_CHECK("decode_batch_norm");
}

int decode_attention_splits(int64_t heads, int64_t context, int sm_count) {
  const int64_t want = (2 * sm_count + heads - 1) / heads, most = std::max<int64_t>(1, (context + 15) / 16);
  return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

int64_t decode_attention_scratch_floats(int64_t heads, int64_t dim, int splits) { return int64_t{splits} * (dim + 2 * heads); }

void launch_decode_attention(const DecodeAttention& a, bool pdl, cudaStream_t s) {
  const size_t shmem =
      static_cast<size_t>(attention_run_smem_floats(a.dim / a.heads, a.context, a.splits, kAttnThreads)) * sizeof(float);
  const cudaLaunchConfig_t cfg =
      launch_config(dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.splits), static_cast<unsigned>(a.batch)),
                    dim3(kAttnThreads), shmem, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attention_kernel, a));
  TL_LAUNCH_CHECK("decode_attention");
}

}  // namespace trainlab::kern
