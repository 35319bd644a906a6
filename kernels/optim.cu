// kernels/optim.cu: see optim.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "optim.cuh"

namespace trainlab::kern {

namespace {
constexpr int kThreads = 256;
constexpr int kPerBlock = kThreads * 2;  // elements a block covers (small: many blocks, short chains)

struct OptTable {
  OptTensor t[kMaxTensors];
  int first_block[kMaxTensors + 1];
  int count;
};

__device__ __forceinline__ int find_tensor(const OptTable& tab, int block) {
  int i = 0;
  while (i + 1 < tab.count && block >= tab.first_block[i + 1]) ++i;
  return i;
}

__global__ void __launch_bounds__(kThreads) adamw_kernel(OptTable tab, OptHyper h, const DevScalars* sc) {
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const float lr = sc->lr, t = sc->step, unscale = sc->grad_unscale;
  const float bc1 = 1.0f - powf(h.beta1, t);
  const float inv_bc2_sqrt = 1.0f / sqrtf(1.0f - powf(h.beta2, t));
  const float step_size = lr / bc1;
  const float decay = p.decay != 0.0f ? 1.0f - lr * h.weight_decay : 1.0f;
  const float c1 = 1.0f - h.beta1, c2 = 1.0f - h.beta2;
  const int64_t begin = int64_t(blockIdx.x - tab.first_block[ti]) * kPerBlock;
  const int64_t end = min(p.n, begin + kPerBlock);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float gi = ld(p.grad, i, p.grad_dt) * unscale;
    const float mi = h.beta1 * p.m[i] + c1 * gi;
    const float vi = h.beta2 * p.v[i] + c2 * gi * gi;
    p.m[i] = mi;
    p.v[i] = vi;
    float wi = p.master[i] * decay;
    wi -= step_size * mi / (sqrtf(vi) * inv_bc2_sqrt + h.eps);
    if (p.mask) wi *= p.mask[i];
    p.master[i] = wi;
    if (p.value) st(p.value, i, p.value_dt, wi);
  }
}

__global__ void __launch_bounds__(kThreads) sgd_kernel(OptTable tab, OptHyper h, const DevScalars* sc) {
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const float lr = sc->lr, unscale = sc->grad_unscale;
  const float wd = p.decay != 0.0f ? h.weight_decay : 0.0f;
  const int64_t begin = int64_t(blockIdx.x - tab.first_block[ti]) * kPerBlock;
  const int64_t end = min(p.n, begin + kPerBlock);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float gi = ld(p.grad, i, p.grad_dt) * unscale + wd * p.master[i];
    if (p.m && h.beta1 != 0.0f) {
      const float b = h.beta1 * p.m[i] + gi;
      p.m[i] = b;
      gi = h.nesterov ? gi + h.beta1 * b : b;
    }
    float wi = p.master[i] - lr * gi;
    if (p.mask) wi *= p.mask[i];
    p.master[i] = wi;
    if (p.value) st(p.value, i, p.value_dt, wi);
  }
}

__global__ void __launch_bounds__(kThreads) finite_kernel(OptTable tab, int* flag) {
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const int64_t begin = int64_t(blockIdx.x - tab.first_block[ti]) * kPerBlock;
  const int64_t end = min(p.n, begin + kPerBlock);
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) bad |= !isfinite(ld(p.grad, i, p.grad_dt));
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

__global__ void set_scalars_kernel(DevScalars* dst, DevScalars v) { *dst = v; }

template <class Launch>
void for_tables(const OptTensor* t, int count, Launch&& launch) {
  for (int off = 0; off < count; off += kMaxTensors) {
    OptTable tab{};
    tab.count = 0;
    int blocks = 0;
    for (int i = off; i < count && tab.count < kMaxTensors; ++i) {
      if (t[i].n <= 0) continue;
      tab.t[tab.count] = t[i];
      tab.first_block[tab.count] = blocks;
      blocks += static_cast<int>((t[i].n + kPerBlock - 1) / kPerBlock);
      ++tab.count;
    }
    tab.first_block[tab.count] = blocks;
    if (blocks > 0) launch(tab, blocks);
  }
}
}  // namespace

void launch_set_scalars(DevScalars* dst, const DevScalars& v, cudaStream_t s) {
  set_scalars_kernel<<<1, 1, 0, s>>>(dst, v);
  TL_LAUNCH_CHECK("set_scalars");
}
void launch_adamw(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s) {
  for_tables(t, count, [&](const OptTable& tab, int blocks) {
    adamw_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
    TL_LAUNCH_CHECK("adamw");
  });
}
void launch_sgd(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s) {
  for_tables(t, count, [&](const OptTable& tab, int blocks) {
    sgd_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
    TL_LAUNCH_CHECK("sgd");
  });
}
void launch_all_finite(const OptTensor* t, int count, int* flag, cudaStream_t s) {
  for_tables(t, count, [&](const OptTable& tab, int blocks) {
    finite_kernel<<<blocks, kThreads, 0, s>>>(tab, flag);
    TL_LAUNCH_CHECK("all_finite");
  });
}

}  // namespace trainlab::kern
