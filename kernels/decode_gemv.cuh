// kernels/decode_gemv.cuh: the one-sequence GEMV of the decoder (decode.cuh, "One sequence") and
// the LayerNorm arithmetic it shares with the LayerNorm kernel. Device code, included by
// decode.cu (and by tools/gemv_probe.cu, which times its variants); never by host C++.
//
// A grid of blocks of 256 threads, at most one wave (two blocks an SM: at most 128 registers),
// going round groups of R rows. Each block first puts the input into shared memory once (padded:
// see `padded`): x, or LN(x) computed by the block itself with the LayerNorm kernel's thread
// layout and order of sums (so bit for bit that kernel's h), which saves the LayerNorm kernel and
// its launch before every GEMV that takes a normalised input. A group of P warps then reads R rows
// side by side, each warp a piece of the columns, its 32 lanes along them, a lane keeping U
// 16-byte loads of each row in flight and reissuing each as soon as it has taken it; each x
// segment read from shared memory serves the R rows. The lanes' sums are added over the warp, the
// pieces' in piece order. The first weights, LayerNorm's gamma and beta and (but for int4) the
// rows' biases are loaded before the wait for the previous kernel, the residual a kAddTo row adds
// to right after it.
#pragma once
#include "decode_device.cuh"

namespace trainlab::kern::decode_dev {

constexpr int kNormThreads = 256;
constexpr int kNormPer = 12;  // values a thread: dims up to 3072 (the decoder's limit)

// The mean and 1 / sqrt(biased variance + 1e-5) of the D values that the kNormThreads threads of
// a block hold, thread t the values t, t + 256, ... in x[] (sums in that order, then the
// block's). Every thread gets both.
__device__ __forceinline__ void layer_norm_stats(const float (&x)[kNormPer], int64_t D, float* red, float& mean, float& rs) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    if (threadIdx.x + int64_t{i} * kNormThreads >= D) break;
    s += x[i];
  }
  mean = block_all_reduce<false>(s, red) / static_cast<float>(D);
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    if (threadIdx.x + int64_t{i} * kNormThreads >= D) break;
    v += (x[i] - mean) * (x[i] - mean);
  }
  const float var = block_all_reduce<false>(v, red) / static_cast<float>(D);
  rs = 1.0f / sqrtf(var + 1e-5f);
}

// h_k = (x_k - mean) rs gamma_k + beta_k for the thread's values (the layout above), handed to
// store(k, h_k); gamma(i, k) and beta(i, k) give the parameters of value i, channel k. One
// expression for the LayerNorm kernel and the tile GEMV, so their h agree bit for bit.
template <class Gamma, class Beta, class Store>
__device__ __forceinline__ void layer_norm_apply(const float (&x)[kNormPer], int64_t D, float mean, float rs, Gamma gamma,
                                                 Beta beta, Store store) {
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    if (k >= D) break;
    store(k, (x[i] - mean) * rs * gamma(i, k) + beta(i, k));
  }
}

constexpr int kTileThreads = kNormThreads;  // the block normalises x with the LayerNorm's layout

// Shared memory holds the input with one float of padding after the E values of each 16-byte
// weight load: lane l's values start at word (E + 1) l, so that the 32 lanes of a warp, reading
// vectors l, l + 32, ..., meet 32 different banks.
template <int E>
__device__ __forceinline__ int64_t padded(int64_t k) {
  return k / E * (E + 1) + k % E;
}
template <int E>
__host__ __device__ constexpr int64_t padded_floats(int64_t cols) {
  return cols / E * (E + 1);
}

// Shared memory of the tile GEMV (floats): the padded input, then, when it normalises its input,
// gamma and beta (16-byte aligned).
template <int E>
__host__ __device__ constexpr int64_t ln_params_offset(int64_t cols) {
  return (padded_floats<E>(cols) + 3) / 4 * 4;
}
template <int E>
__host__ __device__ constexpr int64_t tile_smem_floats(int64_t cols, bool ln) {
  return ln ? ln_params_offset<E>(cols) + 2 * cols : padded_floats<E>(cols);
}

// LayerNorm's gamma and beta into shared memory (ps: [2 cols]) by cp.async, issued before the
// wait for the previous kernel: constants, so that after it only x is on the critical path (loaded
// after the block's reductions, they were a DRAM round trip there: the streamed weights evict them
// from L2).
__device__ __forceinline__ void stage_ln_params(const DecodeGemv& g, float* ps) {
  if (!g.ln_gamma) return;
  for (int64_t k = 4 * threadIdx.x; k < g.cols; k += 4 * kTileThreads) {
    copy16_async(ps + k, g.ln_gamma + k);
    copy16_async(ps + g.cols + k, g.ln_beta + k);
  }
  copy_async_commit();
}

// The input of the tile GEMV into shared memory: xs[k] = x[k], or LN(x)[k] when g.ln_gamma is
// set (x read through L2: the previous kernel wrote it; gamma and beta from ps, stage_ln_params),
// at padded<E>(k). Ends with a barrier.
template <int E>
__device__ __forceinline__ void stage_input(const DecodeGemv& g, float* xs, const float* ps, float* red) {
  const int64_t K = g.cols;
  if (!g.ln_gamma) {
    const float4* x4 = reinterpret_cast<const float4*>(g.x);
    for (int64_t k = threadIdx.x; k < K / 4; k += kTileThreads) {
      const float4 v = __ldcg(x4 + k);
      float* d = xs + padded<E>(4 * k);  // E is a multiple of 4: the four stay together
      d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
    }
    __syncthreads();
    return;
  }
  float x[kNormPer];
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int64_t k = threadIdx.x + int64_t{i} * kNormThreads;
    x[i] = k < K ? __ldcg(g.x + k) : 0.0f;
  }
  copy_async_wait();  // this thread's gamma and beta; the reductions' barriers publish everyone's
  float mean, rs;
  layer_norm_stats(x, K, red, mean, rs);
  layer_norm_apply(
      x, K, mean, rs, [&](int, int64_t k) { return ps[k]; }, [&](int, int64_t k) { return ps[K + k]; },
      [&](int64_t k, float h) { xs[padded<E>(k)] = h; });
  __syncthreads();
}

// The sum of one 16-byte load's weights times x[0 .. E) (scalars: the padded layout), in
// Fmt<F>::word's order within each word and the words' sums paired.
template <int F>
__device__ __forceinline__ float dot_padded(const uint4 u, const float* x) {
  const uint32_t wd[4] = {u.x, u.y, u.z, u.w};
  float p[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float* xj = x + j * Fmt<F>::kPerWord;
    const uint32_t w = wd[j];
    if constexpr (F == kDecF32) {
      p[j] = __uint_as_float(w) * xj[0];
    } else if constexpr (F == kDecBF16) {
      p[j] = __uint_as_float(w << 16) * xj[0] + __uint_as_float(w & 0xffff0000u) * xj[1];
    } else if constexpr (F == kDecI8) {
      const uint32_t b = w ^ 0x80808080u;
      p[j] = (Fmt<F>::code(b, 0) * xj[0] + Fmt<F>::code(b, 1) * xj[1]) + (Fmt<F>::code(b, 2) * xj[2] + Fmt<F>::code(b, 3) * xj[3]);
    } else {  // the low and high nibbles of the four bytes apart, each then one byte permute (Fmt<kDecI8>::code)
      const uint32_t b = w ^ 0x88888888u, lo = b & 0x0F0F0F0Fu, hi = (b >> 4) & 0x0F0F0F0Fu;
      const auto c = [](uint32_t v, int i) { return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7540u + static_cast<unsigned>(i))) - 8388616.0f; };
      p[j] = ((c(lo, 0) * xj[0] + c(hi, 0) * xj[1]) + (c(lo, 1) * xj[2] + c(hi, 1) * xj[3])) +
             ((c(lo, 2) * xj[4] + c(hi, 2) * xj[5]) + (c(lo, 3) * xj[6] + c(hi, 3) * xj[7]));
    }
  }
  return (p[0] + p[1]) + (p[2] + p[3]);
}

// A warp's R rows from `base` (rows past the last read the last row and write nothing) over its
// piece [v_begin, v_end) of a row's 16-byte vectors: lane l reads v_begin + l, + 32, ..., U of
// them a row in flight.
template <int F, int R, int U>
struct TileStream {
  static constexpr bool kScaled = F == kDecI8 || F == kDecI4;
  static constexpr int E = 4 * Fmt<F>::kPerWord;  // weights a 16-byte load
  const DecodeGemv& g;
  const int64_t nvec, v_end;
  // A vector's scale group: v >> shift (groups of 2^shift vectors; per-channel scales: every
  // vector of a row in group 0), or v / per for other group sizes; no 64-bit division a load.
  uint32_t shift = 0, per = 0;
  const uint4* wrow[R];
  const __half* sc[R];
  uint4 u[U][R];
  float su[U][R];
  __device__ TileStream(const DecodeGemv& gemv, int64_t end) : g(gemv), nvec(gemv.cols / E), v_end(end) {
    if constexpr (kScaled) {
      const auto vpg = static_cast<uint32_t>(g.group / E);  // vectors a group (groups hold whole vectors)
      if (vpg >= nvec) shift = 31;  // one group a row (v < 2^31)
      else if ((vpg & (vpg - 1)) == 0) shift = __ffs(vpg) - 1;
      else per = vpg;
    }
  }
  __device__ __forceinline__ uint32_t group_of(int64_t v) const {
    return per ? static_cast<uint32_t>(v) / per : static_cast<uint32_t>(v) >> shift;
  }
  __device__ __forceinline__ void start(int64_t base) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = base + r < g.rows ? base + r : g.rows - 1;
      wrow[r] = reinterpret_cast<const uint4*>(g.w) + row * nvec;
      sc[r] = static_cast<const __half*>(g.scales) + (kScaled ? row * (g.cols / g.group) : 0);
    }
  }
  __device__ __forceinline__ void load(int i, int64_t v) {
    if (v >= v_end) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      u[i][r] = load_stream(wrow[r] + v);
      if constexpr (kScaled) su[i][r] = __half2float(sc[r][group_of(v)]);
    }
  }
  __device__ __forceinline__ void prefetch(int64_t v0) {
#pragma unroll
    for (int i = 0; i < U; ++i) load(i, v0 + int64_t{32} * i);
  }
};

// The tile GEMV: blocks of 8 warps in groups of P warps; a group takes R rows at a time (groups
// dealt round the blocks first, so that small matrices spread over the SMs), its P warps a piece
// of the columns each, their sums added in piece order through shared memory.
template <int F, int R, int U, int P>
__global__ void __launch_bounds__(kTileThreads, 2) decode_gemv_tile_kernel(DecodeGemv g) {
  constexpr int kWarps = kTileThreads / 32, G = kWarps / P;  // groups a block
  extern __shared__ float4 tile_smem[];
  __shared__ float red[32];
  __shared__ float piece_sum[kWarps][R];
  __shared__ int32_t position;
  using Stream = TileStream<F, R, U>;
  constexpr int E = Stream::E;
  float* xs = reinterpret_cast<float*>(tile_smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, piece = warp % P, slot = warp / P;
  const int64_t nvec = g.cols / E;
  const int64_t per = ((nvec + P - 1) / P + 31) / 32 * 32;  // a piece's vectors: whole rounds of the warp
  const int64_t v_begin = piece * per, v_end = min(nvec, v_begin + per);
  const int64_t first = (int64_t{blockIdx.x} + int64_t{gridDim.x} * slot) * R, step = int64_t{gridDim.x} * G * R;
  float* ps = xs + ln_params_offset<E>(g.cols);
  Stream s(g, v_end);
  s.start(first);
  s.prefetch(v_begin + lane);  // before waiting for the previous kernel (PDL)
  stage_ln_params(g, ps);
  // The group's biases into L2, which for fp32 and bf16 also keeps the loads above before the
  // wait (prefetch_l2_strided). The int8 and int4 kernels issue their first loads before the wait
  // without it, and measured 1-2% slower with it.
  if ((F == kDecBF16 || F == kDecF32) && g.bias && piece == 0 && lane < R)
    prefetch_l2_strided(g.bias, first, lane, g.rows, step);
  // The epilogue's operands off its critical path: lane r < R of a group's first warp writes row
  // base + r; its bias (a constant) is loaded before the wait, the value kAddTo adds to (written by
  // earlier kernels) right after it. (Rows of later groups: at the group's start.) int4 reads both
  // in the epilogue: two more registers through the loop made its four-row kernels spill.
  constexpr bool kEarly = F != kDecI4;
  const bool writer = kEarly && piece == 0 && lane < R;
  const auto bias_of = [&](int64_t row) { return writer && g.bias && row < g.rows ? __ldg(g.bias + row) : 0.0f; };
  const auto prior_of = [&](int64_t row) {
    return writer && g.epilogue == kAddTo && row < g.rows ? __ldcg(g.y + row) : 0.0f;
  };
  float bias = bias_of(first + lane);
  wait_for_previous_grid();
  float prior = prior_of(first + lane);
  if (threadIdx.x == 0) position = g.state ? g.state[1] : 0;
  stage_input<E>(g, xs, ps, red);
  for (int64_t base = first; base < g.rows; base += step) {
    if (base != first) {
      s.start(base);
      s.prefetch(v_begin + lane);
      bias = bias_of(base + lane);
      prior = prior_of(base + lane);
    }
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int64_t v0 = v_begin + lane; v0 < v_end; v0 += int64_t{32} * U) {
#pragma unroll
      for (int i = 0; i < U; ++i) {
        const int64_t v = v0 + int64_t{32} * i;
        if (v >= v_end) break;
        uint4 w[R];
        float sw[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w[r] = s.u[i][r], sw[r] = Stream::kScaled ? s.su[i][r] : 1.0f;
        s.load(i, v + int64_t{32} * U);
        float xv[E];
#pragma unroll
        for (int e = 0; e < E; ++e) xv[e] = xs[v * (E + 1) + e];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float part = dot_padded<F>(w[r], xv);
          if constexpr (Stream::kScaled) acc[r] += sw[r] * part;
          else acc[r] += part;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
      for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if constexpr (P > 1) {  // the group's pieces meet at a barrier of their own (id 1 + slot)
      if (lane < R) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (lane == r) piece_sum[warp][r] = acc[r];
      }
      asm volatile("bar.sync %0, %1;" ::"r"(1 + slot), "r"(32 * P) : "memory");
      if (piece == 0 && lane < R) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (lane == r)
            for (int q = 1; q < P; ++q) acc[r] += piece_sum[warp + q][r];
      }
      asm volatile("bar.sync %0, %1;" ::"r"(1 + slot), "r"(32 * P) : "memory");  // sums read before the next rows
    }
    if (piece == 0 && lane < R && base + lane < g.rows) {
      float a = acc[0];
#pragma unroll
      for (int r = 1; r < R; ++r)
        if (lane == r) a = acc[r];
      if constexpr (kEarly) gemv_write(g, base + lane, a + bias, position, 0, prior);
      else gemv_epilogue(g, base + lane, a, position);
    }
  }
}

}  // namespace trainlab::kern::decode_dev
