// kernels/optim_lean.cu: see optim_lean.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "optim_lean.cuh"
#include "optim_table.cuh"

namespace trainlab::kern {

namespace {
constexpr int kThreads = 256;
constexpr int kLionPerBlock = kThreads * 4;

__global__ void __launch_bounds__(kThreads) lion_kernel(OptTable tab, LionHyperDev h, const DevScalars* sc) {
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const float lr = sc->lr, unscale = sc->grad_unscale;
  const float decay = p.decay != 0.0f ? 1.0f - lr * h.weight_decay : 1.0f;
  const int64_t begin = int64_t(blockIdx.x - tab.first_block[ti]) * kLionPerBlock;
  const int64_t end = min(p.n, begin + kLionPerBlock);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float g = ld(p.grad, i, p.grad_dt) * unscale;
    const float m = ld(p.m, i, p.m_dt);
    const float c = h.beta1 * m + (1.0f - h.beta1) * g;
    const float sgn = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    float w = p.master[i] * decay - lr * sgn;
    if (p.mask) w *= p.mask[i];
    st(p.m, i, p.m_dt, h.beta2 * m + (1.0f - h.beta2) * g);
    p.master[i] = w;
    if (p.value) st(p.value, i, p.value_dt, w);
  }
}

// Index of the entry of map[0..255] nearest to x, ties to the lower (tensor/dynamic_map.h's rule
// and search).
__device__ __forceinline__ uint8_t quantize(const float* map, float x) {
  int lo = 0;
#pragma unroll
  for (int step = 128; step > 0; step >>= 1) lo += map[lo + step] <= x ? step : 0;
  if (lo == 255) return 255;
  return static_cast<uint8_t>(x - map[lo] <= map[lo + 1] - x ? lo : lo + 1);
}

// The block's maximum of a and of b (every thread gets both).
__device__ __forceinline__ void block_max2(float& a, float& b, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, o));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    red[warp] = a;
    red[kThreads / 32 + warp] = b;
  }
  __syncthreads();
  a = red[0];
  b = red[kThreads / 32];
  for (int k = 1; k < kThreads / 32; ++k) {
    a = fmaxf(a, red[k]);
    b = fmaxf(b, red[kThreads / 32 + k]);
  }
}

template <int kPer>  // elements a thread: block / kThreads
__global__ void __launch_bounds__(kThreads) adamw8bit_kernel(OptTable tab, OptHyper h, const float* maps,
                                                             const DevScalars* sc) {
  __shared__ float map[512];
  __shared__ float red[2 * kThreads / 32];
  for (int k = threadIdx.x; k < 512; k += kThreads) map[k] = maps[k];
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const int64_t qb = blockIdx.x - tab.first_block[ti];
  const int64_t begin = qb * kPer * kThreads;
  const float lr = sc->lr, t = sc->step, unscale = sc->grad_unscale;
  const float step_size = lr / (1.0f - powf(h.beta1, t));
  const float inv_bc2_sqrt = 1.0f / sqrtf(1.0f - powf(h.beta2, t));
  const float decay = p.decay != 0.0f ? 1.0f - lr * h.weight_decay : 1.0f;
  const float ma = p.m_absmax[qb], va = p.v_absmax[qb];
  __syncthreads();
  float m[kPer], v[kPer];
  float m_max = 0.0f, v_max = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = begin + k * kThreads + threadIdx.x;
    m[k] = v[k] = 0.0f;
    if (i >= p.n) continue;
    const float g = ld(p.grad, i, p.grad_dt) * unscale;
    m[k] = h.beta1 * (map[p.m_code[i]] * ma) + (1.0f - h.beta1) * g;
    v[k] = h.beta2 * (map[256 + p.v_code[i]] * va) + (1.0f - h.beta2) * g * g;
    m_max = fmaxf(m_max, fabsf(m[k]));
    v_max = fmaxf(v_max, v[k]);
    float w = p.master[i] * decay;
    w -= step_size * m[k] / (sqrtf(v[k]) * inv_bc2_sqrt + h.eps);
    if (p.mask) w *= p.mask[i];
    p.master[i] = w;
    if (p.value) st(p.value, i, p.value_dt, w);
  }
  block_max2(m_max, v_max, red);
  const float m_inv = m_max > 0.0f ? 1.0f / m_max : 0.0f, v_inv = v_max > 0.0f ? 1.0f / v_max : 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = begin + k * kThreads + threadIdx.x;
    if (i >= p.n) continue;
    p.m_code[i] = quantize(map, m[k] * m_inv);
    p.v_code[i] = quantize(map + 256, v[k] * v_inv);
  }
  if (threadIdx.x == 0) {
    p.m_absmax[qb] = m_max;
    p.v_absmax[qb] = v_max;
  }
}
}  // namespace

void launch_lion(const OptTensor* t, int count, const LionHyperDev& h, const DevScalars* sc, cudaStream_t s) {
  for_tables(t, count, kLionPerBlock, [&](const OptTable& tab, int blocks) {
    lion_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
    TL_LAUNCH_CHECK("lion");
  });
}

void launch_adamw8bit(const OptTensor* t, int count, const OptHyper& h, int block, const float* maps,
                      const DevScalars* sc, cudaStream_t s) {
  for_tables(t, count, block, [&](const OptTable& tab, int blocks) {
    if (block == 2048)
      adamw8bit_kernel<8><<<blocks, kThreads, 0, s>>>(tab, h, maps, sc);
    else if (block == 256)
      adamw8bit_kernel<1><<<blocks, kThreads, 0, s>>>(tab, h, maps, sc);
    else
      throw_cuda_error(cudaErrorInvalidValue, "adamw8bit: block must be 256 or 2048", __FILE__, __LINE__);
    TL_LAUNCH_CHECK("adamw8bit");
  });
}

}  // namespace trainlab::kern
