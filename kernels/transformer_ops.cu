// kernels/transformer_ops.cu: see transformer_ops.cuh for the math, layout, precision and the
// determinism of the reductions. The accessors (Vec / Scalar) and the segment sums are in
// row_access.cuh; LayerNorm is in layernorm.cu.
#define TRAINLAB_HD __host__ __device__
#include "tensor/dropout_hash.h"
#include "device_common.cuh"
#include "row_access.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

#include <string>
#include <type_traits>

namespace trainlab::kern {

namespace {
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
  uint64_t seed, first;  // first: the element index of x[0] in the tensor the mask is drawn for
  uint32_t threshold;
  float scale;
  __device__ float operator()(float x, float, int64_t i) const {
    return dropout_hash(seed, first + static_cast<uint64_t>(i)) >= threshold ? x * scale : 0.0f;
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

void launch_dropout(const void* x, int x_dt, float p, uint64_t seed, uint64_t first, void* y, int y_dt, int64_t n,
                    cudaStream_t s) {
  const DropoutOp op{seed, first, dropout_threshold(p), 1.0f / (1.0f - p)};
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
