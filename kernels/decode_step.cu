// kernels/decode_step.cu: one token of the char-gpt decoder in one cooperative kernel (decode.cuh,
// "Step"). At the `small` size a token is 31 dependent GEMV / attention phases of a few
// microseconds of work each; as separate kernels every boundary costs a grid drain and launch
// (about 6 us a kernel measured on the H200, even replayed from a CUDA graph with programmatic
// dependent launch). Here the blocks stay resident and meet at a grid-wide barrier instead, and
// they load the next phase's weights before they wait at it.
#include <cooperative_groups.h>

#include <cmath>

#include "decode.cuh"
#include "decode_device.cuh"

namespace trainlab::kern {

namespace {

using namespace decode_dev;
namespace cg = cooperative_groups;

constexpr int kStepThreads = 512;

// A lane's share of one GEMV phase over the grid: S = 2^slice_log2 lanes a row (decode_slice_log2,
// as the GEMV kernel: the same sums), 32/S rows a warp. The warp takes the row group `base` (in
// rows), then every `stride`-th; the groups go round the blocks first (warp w of block b: group
// w * blocks + b), so that every SM gets a share.
template <int F>
struct GemvLane {
  static constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  static constexpr int E = 4 * Fmt<F>::kPerWord;  // weights a 16-byte load
  const DecodeMatrix* m;
  int64_t rows;
  int slice_log2, S, sub, slot;
  int64_t base, stride, nvec;
  uint4 u[kDepth];
  float su[kDepth];
  float bias;

  __device__ int64_t row() const {  // idle slices read the last row and write nothing
    const int64_t j = base + slot;
    return j < rows ? j : rows - 1;
  }
  // kDepth 16-byte vectors of the current row from vector v0 on, every S-th.
  __device__ void load(int64_t v0) {
    const int64_t r = row();
    const uint4* wrow = static_cast<const uint4*>(m->w) + r * nvec;
    const __half* sc = static_cast<const __half*>(m->scales) + (kScaled ? r * (m->cols / m->group) : 0);
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      u[i] = v < nvec ? load_stream(wrow + v) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kScaled) su[i] = v < nvec ? __half2float(sc[v * E / m->group]) : 0.0f;
    }
  }
  // A new row group: the first vectors and the bias of the lane's row.
  __device__ void start_row() {
    load(sub);
    bias = m->bias ? __ldg(m->bias + row()) : 0.0f;
  }
  // Where the lane's rows of the whole matrix start, and their first weights (issued now,
  // consumed after the barrier).
  __device__ void prefetch(const DecodeMatrix& mat) {
    m = &mat;
    rows = mat.rows;
    nvec = mat.cols / E;
    slice_log2 = decode_slice_log2(nvec);
    S = 1 << slice_log2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, per_warp = 32 >> slice_log2;
    sub = lane & (S - 1);
    slot = lane >> slice_log2;
    base = (static_cast<int64_t>(warp) * gridDim.x + blockIdx.x) * per_warp;
    stride = static_cast<int64_t>(gridDim.x) * warps * per_warp;
    if (base < rows) start_row();
  }
  // Whether the block has any row (grid phases; uniform over the block): warp 0 has its first.
  __device__ bool block_has_rows() const { return static_cast<int64_t>(blockIdx.x) * (32 >> slice_log2) < rows; }
};

// kQkvHead: q into y, k and v into the caches' row p (section by row / dim); kResidual: y[row] =
// src[row] + v (the other residual buffer).
enum StepEpilogue : int { kQkvHead = 10, kResidual = 11 };

struct Epilogue {
  int kind = kStore;
  float* y = nullptr;
  float *kc = nullptr, *vc = nullptr;  // kQkvHead: the caches, row p; q into y [dim]
  int64_t p = 0, dim = 0;
  const float* src = nullptr;  // kResidual
};

// The lane's rows against x' (in shared memory after the prologue's barrier), with the
// epilogue; y is indexed by matrix row (kQkvHead: see Epilogue).
template <int F>
__device__ void gemv_rows(GemvLane<F>& ln, const float* xs, const Epilogue& e) {
  for (bool first = true; ln.base < ln.rows; ln.base += ln.stride, first = false) {
    if (!first) ln.start_row();
    float acc = 0.0f;
    for (int64_t v0 = ln.sub;;) {
#pragma unroll
      for (int i = 0; i < kDepth; ++i) {
        const int64_t v = v0 + int64_t{i} * ln.S;
        if (v >= ln.nvec) break;
        const float part = dot16<F>(ln.u[i], xs + v * GemvLane<F>::E, ln.sub);
        if constexpr (GemvLane<F>::kScaled) acc += ln.su[i] * part;
        else acc += part;
      }
      v0 += int64_t{kDepth} * ln.S;
      if (v0 >= ln.nvec) break;
      ln.load(v0);
    }
    for (int o = ln.S >> 1; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (ln.base + ln.slot < ln.rows && ln.sub == 0) {
      const int64_t row = ln.row();
      const float v = acc + ln.bias;
      switch (e.kind) {
        case kStore: e.y[row] = v; break;
        case kAddTo: e.y[row] = __ldcg(e.y + row) + v; break;
        case kGelu: e.y[row] = gelu_f(v); break;
        case kQkvHead: {
          const int64_t sec = row / e.dim, c = row % e.dim;  // q, k or v; channel
          if (sec == 0) e.y[c] = v;
          else (sec == 1 ? e.kc : e.vc)[e.p * e.dim + c] = v;
          break;
        }
        case kResidual: e.y[row] = __ldcg(e.src + row) + v; break;
      }
    }
  }
}

// LayerNorm parameters into shared memory (before the barrier: they are constants).
__device__ void stage_ln(const float* gamma, const float* beta, int64_t K, float* gs, float* bs) {
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) gs[k] = __ldg(gamma + k), bs[k] = __ldg(beta + k);
}

// LayerNorm of xs [K] in place (mean, biased variance, eps 1e-5, as the GEMV kernel). Each thread
// first reads only the elements it wrote itself (same stride), so no barrier is needed before.
__device__ void layer_norm_smem(float* xs, int64_t K, const float* gs, const float* bs, float* red) {
  float s = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += xs[k];
  const float mean = block_all_reduce<false>(s, red) / static_cast<float>(K);
  float v = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) v += (xs[k] - mean) * (xs[k] - mean);
  const float var = block_all_reduce<false>(v, red) / static_cast<float>(K);
  const float rs = 1.0f / sqrtf(var + 1e-5f);
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) xs[k] = (xs[k] - mean) * rs * gs[k] + bs[k];
}

// x' = x (written by other blocks: read through L2) into xs, layer-normalised when `ln`, then a
// barrier.
__device__ void load_x(const float* x, int64_t K, bool ln, float* xs, const float* gs, const float* bs, float* red) {
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) xs[k] = __ldcg(x + k);
  if (ln) layer_norm_smem(xs, K, gs, bs, red);
  __syncthreads();
}

// Shared memory: the layer table, x' [4D], gamma and beta [D], attention's scratch.
size_t step_smem_bytes(const DecodeStep& s) {
  const int64_t D = s.dim, hd = D / s.heads;
  const size_t table = (static_cast<size_t>(s.layers) * sizeof(DecodeLayer) + 15) / 16 * 16;
  return table + static_cast<size_t>(6 * D + attention_run_smem_floats(hd, s.context, s.attn.splits, kStepThreads)) *
                     sizeof(float);
}

// Phases of a layer (5) and of the step (5 L + 1), with a grid barrier between consecutive ones,
// every phase spread over the whole grid:
//  A  h = LN1(x) (layer 0: x = tok[t] + pos[p], stored by block 0); q | k | v = W_qkv h + b, q
//     into s.q, k and v into the caches' row p;
//  B  attention (flash-decoding: the heads' runs of positions go round the blocks, the last run
//     of a head combines them into s.att);
//  C  x_next = x + W_proj att + b (the other residual buffer);
//  D  f = GELU(W_fc LN2(x_next) + b);
//  E  x_next += W_out f + b;
// and the head: logits = W LN(x). Before each barrier a block loads its first weights of the
// next phase. The two x buffers alternate by layer (C reads one and writes the other).
template <int F>
__global__ void __launch_bounds__(kStepThreads, 1)
    decode_step_kernel(DecodeStep s, int32_t token, int32_t position) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float4 smem4[];
  __shared__ float red[32];
  const int64_t D = s.dim, p = position;
  // The layer table, copied once (8-byte words) so that the phases find their pointers in shared memory.
  auto* table = reinterpret_cast<DecodeLayer*>(smem4);
  {
    const int64_t words = s.layers * static_cast<int64_t>(sizeof(DecodeLayer) / 8);
    const auto* src = reinterpret_cast<const unsigned long long*>(s.layer);
    auto* dst = reinterpret_cast<unsigned long long*>(table);
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = __ldg(src + i);
  }
  float* xs = reinterpret_cast<float*>(smem4) + (s.layers * sizeof(DecodeLayer) + 15) / 16 * 4;  // [4D]
  float* gs = xs + 4 * D;   // [D]
  float* bs = gs + D;       // [D]
  float* scratch = bs + D;  // attention
  __syncthreads();

  int64_t n_stamp = 0;
  auto stamp = [&] {
    if (s.stamps && blockIdx.x == 0 && threadIdx.x == 0) {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      s.stamps[n_stamp] = t;
    }
    ++n_stamp;
  };
  // The barrier between two phases (and a time stamp when profiling).
  auto barrier = [&] {
    grid.sync();
    stamp();
  };
  stamp();

  GemvLane<F> ln;
  for (int64_t l = 0; l < s.layers; ++l) {
    const DecodeLayer& L = table[l];
    float* x = (l & 1) ? s.x2 : s.x;
    float* x_next = (l & 1) ? s.x : s.x2;
    // A: LayerNorm and q, k, v.
    ln.prefetch(L.qkv);
    stage_ln(L.ln1_w, L.ln1_b, D, gs, bs);
    if (l > 0) barrier();
    if (ln.block_has_rows()) {
      if (l == 0) {
        for (int64_t k = threadIdx.x; k < D; k += blockDim.x) {
          const float v = __ldg(s.tok + token * D + k) + __ldg(s.pos + p * D + k);
          xs[k] = v;
          if (blockIdx.x == 0) x[k] = v;
        }
        layer_norm_smem(xs, D, gs, bs, red);
        __syncthreads();
      } else {
        load_x(x, D, true, xs, gs, bs, red);
      }
      Epilogue e{kQkvHead, s.q, L.k, L.v, p, D};
      gemv_rows(ln, xs, e);
    }
    // B: attention (the projection's first weights load meanwhile).
    ln.prefetch(L.proj);
    barrier();
    {
      DecodeAttention a = s.attn;
      a.q = s.q, a.k = L.k, a.v = L.v, a.y = s.att;
      for (int64_t item = blockIdx.x; item < s.heads * a.splits; item += gridDim.x)
        attention_run(a, p + 1, item / a.splits, item % a.splits, scratch, red);
    }
    barrier();
    // C: the projection and the residual.
    if (ln.block_has_rows()) {
      load_x(s.att, D, false, xs, gs, bs, red);
      Epilogue e{kResidual, x_next};
      e.src = x;
      gemv_rows(ln, xs, e);
    }
    // D: LayerNorm, fc, GELU.
    ln.prefetch(L.fc);
    stage_ln(L.ln2_w, L.ln2_b, D, gs, bs);
    barrier();
    if (ln.block_has_rows()) {
      load_x(x_next, D, true, xs, gs, bs, red);
      gemv_rows(ln, xs, Epilogue{kGelu, s.f});
    }
    // E: out and the residual.
    ln.prefetch(L.out);
    barrier();
    if (ln.block_has_rows()) {
      load_x(s.f, 4 * D, false, xs, gs, bs, red);
      gemv_rows(ln, xs, Epilogue{kAddTo, x_next});
    }
  }
  // logits = W LN(x)
  ln.prefetch(s.head);
  stage_ln(s.ln_w, s.ln_b, D, gs, bs);
  barrier();
  if (ln.block_has_rows()) {
    load_x((s.layers & 1) ? s.x2 : s.x, D, true, xs, gs, bs, red);
    gemv_rows(ln, xs, Epilogue{kStore, s.logits});
  }
  __syncthreads();
  stamp();
}

using StepKernel = void (*)(DecodeStep, int32_t, int32_t);

StepKernel step_kernel(int format) {
  switch (format) {
    case kDecBF16: return decode_step_kernel<kDecBF16>;
    case kDecI8: return decode_step_kernel<kDecI8>;
    case kDecI4: return decode_step_kernel<kDecI4>;
    default: return decode_step_kernel<kDecF32>;
  }
}

}  // namespace

int decode_step_blocks(const DecodeStep& s, int device) {
  int coop = 0, sms = 0, max_smem = 0;
  TL_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  TL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TL_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const size_t smem = step_smem_bytes(s);
  if (!coop || smem > static_cast<size_t>(max_smem)) return 0;
  const StepKernel k = step_kernel(s.format);
  TL_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  TL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kStepThreads, smem));
  return per_sm >= 1 ? sms : 0;
}

void launch_decode_step(const DecodeStep& s, int32_t token, int32_t position, int blocks, cudaStream_t stream) {
  DecodeStep arg = s;
  void* args[] = {&arg, &token, &position};
  TL_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(step_kernel(s.format)), dim3(blocks),
                                            dim3(kStepThreads), args, step_smem_bytes(s), stream));
  TL_LAUNCH_CHECK("decode_step");
}

}  // namespace trainlab::kern
