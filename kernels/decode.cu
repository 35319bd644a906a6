// kernels/decode.cu: see decode.cuh for the math, layout and precision.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "decode.cuh"
#include "decode_device.cuh"
#include "decode_gemv.cuh"
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
  // The warp's biases into L2; for fp32 and bf16 this also keeps the loads above before the wait.
  if ((F == kDecBF16 || F == kDecF32) && g.bias && sub == 0)
    prefetch_l2_strided(g.bias, row, 0, g.rows, warps * rows_per_warp);
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

// Batched LayerNorm (decode.cuh): block b normalises sequence b's x (or its embedding sum, stored
// into x_out) into h. A thread holds the values k = t, t + 256, ... in registers (sums in that
// order, then the block's, for the mean and then the biased variance); its gamma and beta are
// loaded before waiting for the previous kernel, so only x is on the critical path.
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
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    x[i] = 0.0f;
    if (k >= D) continue;
    if (tok) {
      x[i] = tok[k] + pos[k];
      n.x_out[b * D + k] = x[i];
    } else {
      x[i] = __ldcg(n.x + b * D + k);
    }
  }
  float mean, rs;
  layer_norm_stats(x, D, red, mean, rs);
  layer_norm_apply(
      x, D, mean, rs, [&](int i, int64_t) { return gm[i]; }, [&](int i, int64_t) { return bt[i]; },
      [&](int64_t k, float h) { n.h[b * D + k] = h; });
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

// The one-sequence GEMV (decode_gemv.cuh). Blocks of decode_gemv_tile_kernel<F, R, U, P> an SM
// with the most shared memory a block takes (an input of 12288 floats, padded): set by
// prepare_decode_kernels, outside any stream capture.
constexpr int kTileSmemMost = 64 * 1024;
template <int F, int R, int U, int P>
int& tile_blocks_per_sm() {
  static int n = 1;
  return n;
}
template <int F, int R, int U, int P>
void prepare_tile() {
  const auto k = decode_gemv_tile_kernel<F, R, U, P>;
  same_carveout(k);
  TL_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kTileSmemMost));
  int n = 0;
  TL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, kTileThreads, kTileSmemMost));
  tile_blocks_per_sm<F, R, U, P>() = std::max(n, 1);
}

template <int F, int R, int U, int P>
void launch_tile(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  constexpr int E = 4 * Fmt<F>::kPerWord, G = kTileThreads / 32 / P;
  const size_t smem = static_cast<size_t>(tile_smem_floats<E>(g.cols, g.ln_gamma != nullptr)) * sizeof(float);
  const int64_t groups = (g.rows + R - 1) / R, want = (groups + G - 1) / G;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(want, int64_t{sm_count} * tile_blocks_per_sm<F, R, U, P>()));
  const cudaLaunchConfig_t cfg = launch_config(dim3(blocks), dim3(kTileThreads), smem, s, pdl);
  TL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_gemv_tile_kernel<F, R, U, P>, g));
  TL_LAUNCH_CHECK("decode_gemv_tile");
}

// The tile GEMV's shapes (R rows a group, U loads in flight a lane of each row, P warps a group
// splitting the columns), the one table that both preparing and launching go through: calls
// fn.template operator()<R, U, P>() for shape i of kTileShapes.
constexpr int kTileShapes = 5;
template <class Fn>
void with_tile_shape(int i, Fn&& fn) {
  switch (i) {
    case 0: return fn.template operator()<4, 2, 1>();
    case 1: return fn.template operator()<4, 2, 4>();
    case 2: return fn.template operator()<4, 2, 2>();
    case 3: return fn.template operator()<2, 4, 1>();
    default: return fn.template operator()<1, 8, 1>();
  }
}

// The shape for a matrix (measured with tools/gemv_probe.cu on the H200 at gpt2's and xl's sizes,
// bf16, int8 and int4: BENCHMARKS.md, decoding, sixth measurement): many rows, four rows a warp;
// long rows (256 or more 16-byte vectors), four rows a group of four or two warps that split the
// columns; otherwise two rows a warp, or one with fewer than 1536 rows.
int tile_shape(int64_t rows, int64_t nvec) {
  return rows >= 4096 ? 0 : nvec >= 384 ? 1 : nvec >= 256 ? 2 : rows >= 1536 ? 3 : 4;
}

template <int F>
void launch_tile_rule(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  with_tile_shape(tile_shape(g.rows, g.cols / (4 * Fmt<F>::kPerWord)),
                  [&]<int R, int U, int P>() { launch_tile<F, R, U, P>(g, sm_count, pdl, s); });
}

void launch_decode_gemv_one(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  if (g.cols > int64_t{kNormThreads} * kNormPer * 4 || (g.ln_gamma && g.cols > int64_t{kNormThreads} * kNormPer))
    throw_cuda_error(cudaErrorInvalidValue,
                     ("decode_gemv: an input of " + std::to_string(g.cols) + " values, at most " +
                      std::to_string(kNormThreads * kNormPer * (g.ln_gamma ? 1 : 4)) + (g.ln_gamma ? " to normalise" : ""))
                         .c_str(),
                     __FILE__, __LINE__);
  switch (g.format) {
    case kDecF32: return launch_tile_rule<kDecF32>(g, sm_count, pdl, s);
    case kDecBF16: return launch_tile_rule<kDecBF16>(g, sm_count, pdl, s);
    case kDecI8: return launch_tile_rule<kDecI8>(g, sm_count, pdl, s);
    default: return launch_tile_rule<kDecI4>(g, sm_count, pdl, s);
  }
}

template <int F>
void prepare_tiles() {
  for (int i = 0; i < kTileShapes; ++i) with_tile_shape(i, []<int R, int U, int P>() { prepare_tile<F, R, U, P>(); });
}
}  // namespace

void prepare_decode_kernels() {
  static std::mutex mu;
  static std::set<int> done;  // devices prepared: a function's attributes are set per device
  int device = 0;
  TL_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(device).second) return;
  prepare_decode_attention();
  same_carveout(decode_gemv_batch_kernel<kDecF32>);
  same_carveout(decode_gemv_batch_kernel<kDecBF16>);
  same_carveout(decode_gemv_batch_kernel<kDecI8>);
  same_carveout(decode_gemv_batch_kernel<kDecI4>);
  same_carveout(decode_batch_norm_kernel);
  prepare_tiles<kDecF32>();
  prepare_tiles<kDecBF16>();
  prepare_tiles<kDecI8>();
  prepare_tiles<kDecI4>();
}

void prepare_decode_gemv_batch(int format) { gemv_blocks_per_sm(format); }

void launch_decode_gemv_batch(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s) {
  if (g.layout == kTcChunks) return launch_decode_gemv_tc(g, pdl, s);
  if (g.batch < 1 || g.batch > kMaxBatch) throw_cuda_error(cudaErrorInvalidValue, "decode_gemv_batch: batch 1..16", __FILE__, __LINE__);
  if (g.batch == 1 && !g.batch_sums) return launch_decode_gemv_one(g, sm_count, pdl, s);
  if (g.ln_gamma) throw_cuda_error(cudaErrorInvalidValue, "decode_gemv_batch: LayerNorm in one sequence's GEMV only", __FILE__, __LINE__);
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
  const int64_t least = (context + kAttnRunKeys - 1) / kAttnRunKeys;
  return static_cast<int>(std::max({int64_t{1}, std::min(want, most), least}));
}

int64_t decode_attention_scratch_floats(int64_t heads, int64_t dim, int splits) { return int64_t{splits} * (dim + 2 * heads); }


}  // namespace trainlab::kern
