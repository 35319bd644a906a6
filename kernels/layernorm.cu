// kernels/layernorm.cu: LayerNorm forward and backward (declared in transformer_ops.cuh, which has
// the math, layout and the determinism of the parameter sums), one warp per row.
#include "device_common.cuh"
#include "row_access.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

#include <string>

namespace trainlab::kern {

namespace {
// One warp per row. Lane l owns the row's vectors at columns l*N + k*32*N (k = 0, 1, ...); the
// first K of them (K = 2, 3 or 4 as the width needs: a whole row of up to 1024 columns in bf16 /
// fp16, 512 in fp32) stay in registers between the passes over the row, so each row is read from
// DRAM once, with all of a lane's loads in flight together; vectors past those are read again.
constexpr int kRowsPerBlock = 8;  // forward: one warp per row, 256 threads

template <class A, int K>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    layernorm_fwd_kernel(const void* x, int xdt, const void* gamma, int gdt, const void* beta, int bdt, float eps,
                         int64_t rows, int64_t d, void* y, int ydt, float* mean, float* rstd) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t base = row * d, stride = 32 * A::N, j0 = lane * A::N, jt = j0 + K * stride;
  const float inv_d = 1.0f / static_cast<float>(d);
  float v[K][A::N];
  {
    typename A::Raw raw[K];  // all loads in flight before the first conversion
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) raw[k] = A::load_raw(x, base + j0 + k * stride, xdt);
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) A::unpack(raw[k], v[k]);
  }
  // Pass 1: the mean (per lane in column order, then the warp's butterfly).
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d)
#pragma unroll
      for (int e = 0; e < A::N; ++e) s += v[k][e];
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
#pragma unroll
    for (int e = 0; e < A::N; ++e) s += t[e];
  }
  const float m = warp_sum(s) * inv_d;
  // Pass 2: the variance from the squares of x - mean.
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d)
#pragma unroll
      for (int e = 0; e < A::N; ++e) q += (v[k][e] - m) * (v[k][e] - m);
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
#pragma unroll
    for (int e = 0; e < A::N; ++e) q += (t[e] - m) * (t[e] - m);
  }
  const float r = 1.0f / sqrtf(warp_sum(q) * inv_d + eps);
  if (lane == 0) mean[row] = m, rstd[row] = r;
  // Pass 3: y = (x - mean) * rstd * gamma + beta.
  auto out = [&](float* t, int64_t j) {
    float g[A::N], b[A::N];
    A::load(gamma, j, gdt, g);
    A::load(beta, j, bdt, b);
#pragma unroll
    for (int e = 0; e < A::N; ++e) t[e] = (t[e] - m) * r * g[e] + b[e];
    A::store(y, base + j, ydt, t);
  };
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (j0 + k * stride < d) out(v[k], j0 + k * stride);
  for (int64_t j = jt; j < d; j += stride) {
    float t[A::N];
    A::load(x, base + j, xdt, t);
    out(t, j);
  }
}

// LayerNorm backward in one pass over the rows, all three outputs:
//   dx (=|+=) rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma (per row);
//   partial[0, seg, c] = sum dy * xhat, partial[1, seg, c] = sum dy over the segment's rows.
// Block = segment: `warps` warps over rows r0 + w, r0 + w + warps, ... (ascending). Each warp
// keeps running column sums of its own rows in shared memory, at the end added in warp order.
// A lane only touches its own columns (no races, no atomics), stored lane-minor: column
// lane*N + k*32*N + e of the lane's vector k sits at slot (k*N + e)*32 + lane, so a warp's
// accesses hit 32 different banks. Rows are read once: x, dy (and dx when accumulating) are
// loaded together into registers (unconverted) for the row's sums, then reused for dx and the
// column sums (vectors past the K cached are re-read).
template <class A>
__host__ __device__ constexpr int64_t ln_slots(int64_t d) {  // shared floats of one warp's sums of one kind
  return (d + 32 * A::N - 1) / (32 * A::N) * 32 * A::N;
}

// kinds: 2 (dgamma, dbeta), or 3 with the column sums of dx as stored (dx_sums: a bias gradient).
template <class A, int K>
__global__ void __launch_bounds__(256)
    layernorm_bwd_kernel(const void* x, int xdt, const void* gamma, int gdt, const float* mean, const float* rstd,
                         const void* dy, int dydt, int64_t rows, int64_t d, void* dx, int dxdt, bool accumulate,
                         int64_t rows_per_seg, int64_t segs, float* partial, int kinds) {
  extern __shared__ float acc[];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t P = ln_slots<A>(d);
  float* ag = acc + int64_t(w) * kinds * P;  // this warp's sums of dy * xhat, then of dy (then of dx)
  float* ab = ag + P;
  float* ao = ab + P;
  const bool dx_sums = kinds == 3;
  for (int64_t i = lane; i < kinds * P; i += 32) ag[i] = 0.0f;
  const int64_t stride = 32 * A::N, j0 = lane * A::N;
  const int64_t r0 = blockIdx.x * rows_per_seg, r1 = r0 + rows_per_seg < rows ? r0 + rows_per_seg : rows;
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t row = r0 + w; row < r1; row += warps) {
    const int64_t base = row * d;
    const float m = mean[row], r = rstd[row];
    typename A::Raw xr[K], yr[K], orr[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = j0 + k * stride;
      if (j < d) {
        xr[k] = A::load_raw(x, base + j, xdt);
        yr[k] = A::load_raw(dy, base + j, dydt);
        if (accumulate) orr[k] = A::load_raw(dx, base + j, dxdt);
      }
    }
    // Row sums of g and g * xhat.
    float sg = 0.0f, sgx = 0.0f;
    auto sums = [&](const float* xx, const float* gg, int64_t j) {
      float ga[A::N];
      A::load(gamma, j, gdt, ga);
#pragma unroll
      for (int e = 0; e < A::N; ++e) {
        const float t = gg[e] * ga[e];
        sg += t;
        sgx += t * ((xx[e] - m) * r);
      }
    };
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) {
        float xx[A::N], gg[A::N];
        A::unpack(xr[k], xx);
        A::unpack(yr[k], gg);
        sums(xx, gg, j0 + k * stride);
      }
    for (int64_t j = j0 + K * stride; j < d; j += stride) {
      float xx[A::N], gg[A::N];
      A::load(x, base + j, xdt, xx);
      A::load(dy, base + j, dydt, gg);
      sums(xx, gg, j);
    }
    const float mg = warp_sum(sg) * inv_d, mgx = warp_sum(sgx) * inv_d;
    // dx and the column sums of the lane's vector k.
    auto grads = [&](const float* xx, const float* gg, float* oo, int64_t k) {
      const int64_t j = j0 + k * stride;
      float ga[A::N];
      A::load(gamma, j, gdt, ga);
#pragma unroll
      for (int e = 0; e < A::N; ++e) {
        const float xh = (xx[e] - m) * r;
        const float t = r * (gg[e] * ga[e] - mg - xh * mgx);
        oo[e] = accumulate ? oo[e] + t : t;
        const int64_t slot = (k * A::N + e) * 32 + lane;
        ag[slot] += gg[e] * xh;
        ab[slot] += gg[e];
        if (dx_sums) ao[slot] += round_fmt(oo[e], dxdt);
      }
      A::store(dx, base + j, dxdt, oo);
    };
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (j0 + k * stride < d) {
        float xx[A::N], gg[A::N], oo[A::N];
        A::unpack(xr[k], xx);
        A::unpack(yr[k], gg);
        if (accumulate) A::unpack(orr[k], oo);
        grads(xx, gg, oo, k);
      }
    for (int64_t k = K; j0 + k * stride < d; ++k) {
      const int64_t j = j0 + k * stride;
      float xx[A::N], gg[A::N], oo[A::N];
      A::load(x, base + j, xdt, xx);
      A::load(dy, base + j, dydt, gg);
      if (accumulate) A::load(dx, base + j, dxdt, oo);
      grads(xx, gg, oo, k);
    }
  }
  __syncthreads();
  // Slot i (read bank-conflict free) holds column c of lane i % 32, vector k, element e.
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    const int64_t ke = i / 32, c = (ke / A::N) * stride + (i % 32) * A::N + ke % A::N;
    if (c >= d) continue;
    float tg = 0.0f, tb = 0.0f, to = 0.0f;
    for (int q = 0; q < warps; ++q) {
      const float* wq = acc + int64_t(q) * kinds * P;
      tg += wq[i], tb += wq[P + i];
      if (dx_sums) to += wq[2 * P + i];
    }
    partial[blockIdx.x * d + c] = tg;
    partial[(segs + blockIdx.x) * d + c] = tb;
    if (dx_sums) partial[(2 * segs + blockIdx.x) * d + c] = to;
  }
}
}  // namespace

void launch_layernorm_forward(const void* x, int x_dt, const void* gamma, int g_dt, const void* beta, int b_dt,
                              float eps, int64_t rows, int64_t d, void* y, int y_dt, float* mean, float* rstd,
                              cudaStream_t s) {
  if (rows <= 0 || d <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch({x_dt, g_dt, b_dt, y_dt}, {x, gamma, beta, y}, d, [&](auto acc) {
    using A = decltype(acc);
    with_cached<A>(d, [&](auto k) {
      layernorm_fwd_kernel<A, decltype(k)::value><<<blocks, 32 * kRowsPerBlock, 0, s>>>(
          x, x_dt, gamma, g_dt, beta, b_dt, eps, rows, d, y, y_dt, mean, rstd);
    });
  });
  TL_LAUNCH_CHECK("layernorm_forward");
}

namespace {
// LayerNorm backward's launch shape, a function of (rows, d) alone, so the same rows always fall
// into the same segments in the same order (bit-identical parameter sums run to run): segments of
// kLnSegRows rows (at most kLnMaxSegs of them), one block each, of as many warps (8 at most) as
// give the warps' column sums (2 * d fp32 a warp, d rounded up to whole vectors of the lanes)
// kLnSmemBudget bytes of shared memory.
constexpr int64_t kLnSegRows = 64, kLnMaxSegs = 1024;
constexpr int64_t kLnSmemBudget = 96 * 1024, kLnSmemMax = 200 * 1024;
struct LnBwdShape {
  int64_t segs, per;
};
LnBwdShape ln_bwd_shape(int64_t rows) {
  LnBwdShape p{};
  const int64_t segs = (rows + kLnSegRows - 1) / kLnSegRows;
  p.segs = rows <= 0 ? 0 : segs < 1 ? 1 : segs > kLnMaxSegs ? kLnMaxSegs : segs;
  p.per = p.segs > 0 ? (rows + p.segs - 1) / p.segs : 0;
  return p;
}
int ln_bwd_warps(int64_t slots, int kinds) {
  const int64_t w = kLnSmemBudget / (4 * kinds * slots);
  return static_cast<int>(w < 1 ? 1 : w > 8 ? 8 : w);
}
}  // namespace

int64_t layernorm_backward_workspace(int64_t rows, int64_t d) { return 3 * ln_bwd_shape(rows).segs * d; }

void launch_layernorm_backward(const void* x, int x_dt, const void* gamma, int g_dt, const float* mean,
                               const float* rstd, const void* dy, int dy_dt, int64_t rows, int64_t d, void* dx,
                               int dx_dt, bool accumulate_dx, void* dgamma, int dg_dt, void* dbeta, int db_dt,
                               bool accumulate_params, float* partial, cudaStream_t s, void* dx_sums, int ds_dt) {
  if (d <= 0) return;
  const int kinds = dx_sums ? 3 : 2;
  if (4 * kinds * (d + 255) > kLnSmemMax)
    throw Error("layernorm_backward: rows of " + std::to_string(d) + " columns are wider than the CUDA kernel's " +
                std::to_string(kLnSmemMax / (4 * kinds) - 255) + " (one warp's column sums must fit in shared memory)");
  const LnBwdShape p = ln_bwd_shape(rows);
  if (p.segs > 0) {
    dispatch({x_dt, g_dt, dy_dt, dx_dt}, {x, gamma, dy, dx}, d, [&](auto acc) {
      using A = decltype(acc);
      const int64_t slots = ln_slots<A>(d);
      const int warps = ln_bwd_warps(slots, kinds);
      const size_t smem = static_cast<size_t>(warps) * kinds * static_cast<size_t>(slots) * sizeof(float);
      with_cached<A>(d, [&](auto k) {
        auto* kernel = &layernorm_bwd_kernel<A, decltype(k)::value>;
        if (smem > 48 * 1024)
          TL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        kernel<<<static_cast<unsigned>(p.segs), 32 * warps, smem, s>>>(x, x_dt, gamma, g_dt, mean, rstd, dy, dy_dt, rows,
                                                                       d, dx, dx_dt, accumulate_dx, p.per, p.segs,
                                                                       partial, kinds);
      });
    });
    TL_LAUNCH_CHECK("layernorm_backward (dx, parameter partial sums)");
  }
  sum_segments_kernel<<<blocks_for(2 * d * 32, 256), 256, 0, s>>>(partial, p.segs, d, dgamma, dg_dt, dbeta, db_dt,
                                                                   accumulate_params);
  TL_LAUNCH_CHECK("layernorm_backward (parameter sums)");
  if (dx_sums) {
    sum_segments_kernel<<<blocks_for(d * 32, 256), 256, 0, s>>>(partial + 2 * p.segs * d, p.segs, d, dx_sums, ds_dt,
                                                                nullptr, 0, accumulate_params);
    TL_LAUNCH_CHECK("layernorm_backward (dx column sums)");
  }
}

}  // namespace trainlab::kern
