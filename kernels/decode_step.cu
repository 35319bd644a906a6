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

// A lane's share of one GEMV phase: S = 2^slice_log2 lanes a row (the GEMV kernel's rule, so rows
// are summed in the same order), 32/S rows a warp; warp w of block b takes the row group
// b * warps + w, then every (grid warps)-th after it. `base` is the warp's current first row (the
// same for all lanes of the warp, so the shuffles see whole warps).
template <int F>
struct GemvLane {
  static constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  static constexpr int E = 4 * Fmt<F>::kPerWord;  // weights a 16-byte load
  int slice_log2, S, sub, slot;
  int64_t base, stride, nvec;
  uint4 u[kDepth];
  float su[kDepth];
  float bias;

  __device__ int64_t row(const DecodeMatrix& m) const {  // idle slices read the last row and write nothing
    const int64_t r = base + slot;
    return r < m.rows ? r : m.rows - 1;
  }
  // kDepth 16-byte vectors of the current row from vector v0 on, every S-th.
  __device__ void load(const DecodeMatrix& m, int64_t v0) {
    const int64_t r = row(m);
    const uint4* wrow = static_cast<const uint4*>(m.w) + r * nvec;
    const __half* sc = static_cast<const __half*>(m.scales) + (kScaled ? r * (m.cols / m.group) : 0);
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      const int64_t v = v0 + int64_t{i} * S;
      u[i] = v < nvec ? __ldg(wrow + v) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kScaled) su[i] = v < nvec ? __half2float(sc[v * E / m.group]) : 0.0f;
    }
  }
  // A new row: its first vectors and its bias.
  __device__ void start_row(const DecodeMatrix& m) {
    load(m, sub);
    bias = m.bias ? __ldg(m.bias + row(m)) : 0.0f;
  }
  // The first rows of matrix m: where they start, and their first weights (issued now, consumed
  // after the barrier).
  __device__ void prefetch(const DecodeMatrix& m) {
    nvec = m.cols / E;
    slice_log2 = decode_slice_log2(nvec);
    S = 1 << slice_log2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    sub = lane & (S - 1);
    slot = lane >> slice_log2;
    base = (static_cast<int64_t>(blockIdx.x) * warps + warp) * (32 >> slice_log2);
    stride = static_cast<int64_t>(gridDim.x) * warps * (32 >> slice_log2);
    if (base < m.rows) start_row(m);
  }
  // Whether the block has any row of m (uniform over the block).
  __device__ bool block_has_rows(const DecodeMatrix& m) const {
    return static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) * (32 >> slice_log2) < m.rows;
  }
};

struct Epilogue {
  int kind = kStore;
  float* y = nullptr;
  float *kc = nullptr, *vc = nullptr;  // kQkvScatter
  int64_t p = 0;
};

// The rows of m against x' in shared memory (after the prologue's barrier), with the epilogue.
template <int F>
__device__ void gemv_rows(GemvLane<F>& ln, const DecodeMatrix& m, const float* xs, const Epilogue& e) {
  for (bool first = true; ln.base < m.rows; ln.base += ln.stride, first = false) {
    if (!first) ln.start_row(m);
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
      ln.load(m, v0);
    }
    for (int o = ln.S >> 1; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    const int64_t row = ln.base + ln.slot;
    if (row < m.rows && ln.sub == 0) {
      const float v = acc + ln.bias;
      switch (e.kind) {
        case kStore: e.y[row] = v; break;
        case kAddTo: e.y[row] = __ldcg(e.y + row) + v; break;
        case kGelu: e.y[row] = gelu_f(v); break;
        case kQkvScatter: {
          const int64_t d = m.rows / 3;
          if (row < d) e.y[row] = v;
          else if (row < 2 * d) e.kc[e.p * d + row - d] = v;
          else e.vc[e.p * d + row - 2 * d] = v;
          break;
        }
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
  return table + static_cast<size_t>(6 * D + attention_smem_floats(hd, s.context, kStepThreads)) * sizeof(float);
}

template <int F>
__global__ void __launch_bounds__(kStepThreads, 1)
    decode_step_kernel(DecodeStep s, int32_t token, int32_t position, float scale) {
  cg::grid_group grid = cg::this_grid();
  extern __shared__ float4 smem4[];
  __shared__ float red[32];
  const int64_t D = s.dim, hd = D / s.heads, p = position;
  // The layer table, copied once (8-byte words) so that the phases find their pointers in shared memory.
  auto* table = reinterpret_cast<DecodeLayer*>(smem4);
  {
    const int64_t words = s.layers * static_cast<int64_t>(sizeof(DecodeLayer) / 8);
    const auto* src = reinterpret_cast<const unsigned long long*>(s.layer);
    auto* dst = reinterpret_cast<unsigned long long*>(table);
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = __ldg(src + i);
  }
  float* xs = reinterpret_cast<float*>(smem4) + (s.layers * sizeof(DecodeLayer) + 15) / 16 * 4;  // [4D]
  float* gs = xs + 4 * D;  // [D]
  float* bs = gs + D;      // [D]
  float* scratch = bs + D;  // attention
  __syncthreads();

  GemvLane<F> ln;
  for (int64_t l = 0; l < s.layers; ++l) {
    const DecodeLayer& L = table[l];
    // h = LN1(x) (layer 0: x = tok[t] + pos[p], block 0 keeps it as the residual stream);
    // q | k | v = W h + b, k and v into the cache row p.
    ln.prefetch(L.qkv);
    stage_ln(L.ln1_w, L.ln1_b, D, gs, bs);
    if (l > 0) grid.sync();
    if (ln.block_has_rows(L.qkv)) {
      if (l == 0) {
        for (int64_t k = threadIdx.x; k < D; k += blockDim.x) {
          const float v = __ldg(s.tok + token * D + k) + __ldg(s.pos + p * D + k);
          xs[k] = v;
          if (blockIdx.x == 0) s.x[k] = v;
        }
        layer_norm_smem(xs, D, gs, bs, red);
        __syncthreads();
      } else {
        load_x(s.x, D, true, xs, gs, bs, red);
      }
      gemv_rows(ln, L.qkv, xs, Epilogue{kQkvScatter, s.q, L.k, L.v, p});
    }
    // att = softmax(q K^T / sqrt(hd)) V over positions 0..p, a block a head.
    grid.sync();
    for (int64_t h = blockIdx.x; h < s.heads; h += gridDim.x) {
      attention_head(h, s.q, L.k, L.v, p + 1, D, hd, s.context, scale, s.att, scratch, red);
      __syncthreads();  // the scratch is rewritten by the next head
    }
    // x += W att + b
    ln.prefetch(L.proj);
    grid.sync();
    if (ln.block_has_rows(L.proj)) {
      load_x(s.att, D, false, xs, gs, bs, red);
      gemv_rows(ln, L.proj, xs, Epilogue{kAddTo, s.x});
    }
    // f = GELU(W LN2(x) + b)
    ln.prefetch(L.fc);
    stage_ln(L.ln2_w, L.ln2_b, D, gs, bs);
    grid.sync();
    if (ln.block_has_rows(L.fc)) {
      load_x(s.x, D, true, xs, gs, bs, red);
      gemv_rows(ln, L.fc, xs, Epilogue{kGelu, s.f});
    }
    // x += W f + b
    ln.prefetch(L.out);
    grid.sync();
    if (ln.block_has_rows(L.out)) {
      load_x(s.f, 4 * D, false, xs, gs, bs, red);
      gemv_rows(ln, L.out, xs, Epilogue{kAddTo, s.x});
    }
  }
  // logits = W LN(x)
  ln.prefetch(s.head);
  stage_ln(s.ln_w, s.ln_b, D, gs, bs);
  grid.sync();
  if (ln.block_has_rows(s.head)) {
    load_x(s.x, D, true, xs, gs, bs, red);
    gemv_rows(ln, s.head, xs, Epilogue{kStore, s.logits});
  }
}

using StepKernel = void (*)(DecodeStep, int32_t, int32_t, float);

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
  float scale = 1.0f / std::sqrt(static_cast<float>(s.dim / s.heads));  // as the CPU generator
  DecodeStep arg = s;
  void* args[] = {&arg, &token, &position, &scale};
  TL_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(step_kernel(s.format)), dim3(blocks),
                                            dim3(kStepThreads), args, step_smem_bytes(s), stream));
  TL_LAUNCH_CHECK("decode_step");
}

}  // namespace trainlab::kern
