// kernels/optim_adafactor.cu: see optim_adafactor.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "optim_adafactor.cuh"
#include "optim_table.cuh"

namespace trainlab::kern {

namespace {
constexpr int kThreads = 256;
constexpr int kPerBlock = kThreads * 4;  // elements a block of the element-wise passes covers

using AfTable = TensorTable<AfTensor>;

__device__ __forceinline__ float block_sum(float x, float* red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float s = 0.0f;
  for (int k = 0; k < kThreads / 32; ++k) s += red[k];
  __syncthreads();
  return s;
}

__device__ __forceinline__ float beta_t(const AfHyper& h, const DevScalars* sc) {
  return 1.0f - powf(sc->step, -h.decay_rate);
}

__global__ void __launch_bounds__(kThreads) stats_kernel(AfTable tab, AfHyper h, const DevScalars* sc) {
  __shared__ float red[kThreads / 32];
  const int ti = find_tensor(tab, blockIdx.x);
  const AfTensor& p = tab.t[ti];
  const int64_t b = blockIdx.x - tab.first_block[ti];
  const float beta = beta_t(h, sc), unscale = sc->grad_unscale;
  float w2 = 0.0f;
  if (p.rows > 0) {  // block b is row b
    float rs = 0.0f;
    for (int64_t j = threadIdx.x; j < p.cols; j += kThreads) {
      const int64_t e = b * p.cols + j;
      const float g = ld(p.grad, e, p.grad_dt) * unscale, u = g * g + h.eps1;
      rs += u;
      atomicAdd(&p.acc[3 + j], u);
      w2 += p.master[e] * p.master[e];
    }
    rs = block_sum(rs, red);
    w2 = block_sum(w2, red);
    if (threadIdx.x == 0) {
      const float r = beta * p.row[b] + (1.0f - beta) * (rs / static_cast<float>(p.cols));
      p.row[b] = r;
      atomicAdd(&p.acc[0], r);
      atomicAdd(&p.acc[2], w2);
    }
    return;
  }
  const int64_t end = min(p.n, (b + 1) * kPerBlock);
  for (int64_t e = b * kPerBlock + threadIdx.x; e < end; e += kThreads) {
    const float g = ld(p.grad, e, p.grad_dt) * unscale;
    p.v[e] = beta * p.v[e] + (1.0f - beta) * (g * g + h.eps1);
    w2 += p.master[e] * p.master[e];
  }
  w2 = block_sum(w2, red);
  if (threadIdx.x == 0) atomicAdd(&p.acc[2], w2);
}

__global__ void __launch_bounds__(kThreads) cols_kernel(AfTable tab, AfHyper h, const DevScalars* sc) {
  const int ti = find_tensor(tab, blockIdx.x);
  const AfTensor& p = tab.t[ti];
  const int64_t j = int64_t(blockIdx.x - tab.first_block[ti]) * kThreads + threadIdx.x;
  const float beta = beta_t(h, sc);
  if (j < p.cols) p.col[j] = beta * p.col[j] + (1.0f - beta) * (p.acc[3 + j] / static_cast<float>(p.rows));
}

// The unclipped update of element e.
__device__ __forceinline__ float update_of(const AfTensor& p, int64_t e, float g) {
  if (p.rows == 0) return g / sqrtf(p.v[e]);
  const float mean = p.acc[0] / static_cast<float>(p.rows);
  return g / sqrtf(p.row[e / p.cols] / mean) / sqrtf(p.col[e % p.cols]);
}

__global__ void __launch_bounds__(kThreads) rms_kernel(AfTable tab, const DevScalars* sc) {
  __shared__ float red[kThreads / 32];
  const int ti = find_tensor(tab, blockIdx.x);
  const AfTensor& p = tab.t[ti];
  const int64_t b = blockIdx.x - tab.first_block[ti], end = min(p.n, (b + 1) * kPerBlock);
  float sq = 0.0f;
  for (int64_t e = b * kPerBlock + threadIdx.x; e < end; e += kThreads) {
    const float u = update_of(p, e, ld(p.grad, e, p.grad_dt) * sc->grad_unscale);
    sq += u * u;
  }
  sq = block_sum(sq, red);
  if (threadIdx.x == 0) atomicAdd(&p.acc[1], sq);
}

__global__ void __launch_bounds__(kThreads) apply_kernel(AfTable tab, AfHyper h, const DevScalars* sc) {
  const int ti = find_tensor(tab, blockIdx.x);
  const AfTensor& p = tab.t[ti];
  const int64_t b = blockIdx.x - tab.first_block[ti], end = min(p.n, (b + 1) * kPerBlock);
  const float n = static_cast<float>(p.n);
  const float inv_clip = 1.0f / fmaxf(1.0f, sqrtf(p.acc[1] / n) / h.clip);
  const float a = h.relative_step ? fminf(1e-2f, 1.0f / sqrtf(sc->step)) * fmaxf(h.eps2, sqrtf(p.acc[2] / n)) : sc->lr;
  const float decay = p.decay != 0.0f ? 1.0f - a * h.weight_decay : 1.0f;
  for (int64_t e = b * kPerBlock + threadIdx.x; e < end; e += kThreads) {
    float u = update_of(p, e, ld(p.grad, e, p.grad_dt) * sc->grad_unscale) * inv_clip;
    if (p.m) u = p.m[e] = h.beta1 * p.m[e] + (1.0f - h.beta1) * u;
    float w = p.master[e] * decay - a * u;
    if (p.mask) w *= p.mask[e];
    p.master[e] = w;
    if (p.value) st(p.value, e, p.value_dt, w);
  }
}

int64_t element_blocks(const AfTensor& t) { return (t.n + kPerBlock - 1) / kPerBlock; }
}  // namespace

void launch_adafactor(const AfTensor* t, int count, const AfHyper& h, float* scratch, int64_t scratch_floats,
                      const DevScalars* sc, cudaStream_t s) {
  TL_CUDA_CHECK(cudaMemsetAsync(scratch, 0, static_cast<size_t>(scratch_floats) * sizeof(float), s));
  // Each pass over all the tables before the next: a table's later pass reads only its own sums.
  for_tables_by(t, count, [](const AfTensor& o) { return o.rows > 0 ? o.rows : element_blocks(o); },
                [&](const AfTable& tab, int blocks) {
                  stats_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
                  TL_LAUNCH_CHECK("adafactor_stats");
                });
  for_tables_by(t, count, [](const AfTensor& o) { return o.rows > 0 ? (o.cols + kThreads - 1) / kThreads : 0; },
                [&](const AfTable& tab, int blocks) {
                  cols_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
                  TL_LAUNCH_CHECK("adafactor_cols");
                });
  for_tables_by(t, count, element_blocks, [&](const AfTable& tab, int blocks) {
    rms_kernel<<<blocks, kThreads, 0, s>>>(tab, sc);
    TL_LAUNCH_CHECK("adafactor_rms");
  });
  for_tables_by(t, count, element_blocks, [&](const AfTable& tab, int blocks) {
    apply_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
    TL_LAUNCH_CHECK("adafactor_apply");
  });
}

}  // namespace trainlab::kern
