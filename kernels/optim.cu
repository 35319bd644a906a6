// kernels/optim.cu: see optim.cuh for the math, layout and precision.
#include "device_common.cuh"
#include "optim.cuh"
#include "optim_table.cuh"

namespace trainlab::kern {

namespace {
constexpr int kThreads = 256;
constexpr int kPerBlock = kThreads * 2;  // elements a block covers (small: many blocks, short chains)
// AdamW: a thread updates 4 consecutive elements (16-byte loads of master, m, v and mask, the
// gradient and the value copy in one load / store each); a block covers kThreads * 4 elements.
constexpr int kAdamPerBlock = kThreads * 4;

// 4 consecutive values of a tensor in format dt from element i (i a multiple of 4, the tensor
// 16-byte aligned when fp32 and 8-byte aligned when 16-bit: see vec4_ok).
__device__ __forceinline__ void ld4(const void* p, int64_t i, int dt, float* o) {
  if (dt == kF32) {
    const float4 u = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    o[0] = u.x, o[1] = u.y, o[2] = u.z, o[3] = u.w;
  } else if (dt == kBF16) {
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(p) + i);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
  } else if (dt == kF16) {
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const __half*>(p) + i);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
    const float2 a = __half22float2(h[0]), b = __half22float2(h[1]);
    o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = ld(p, i + k, dt);
  }
}
__device__ __forceinline__ void st4(void* p, int64_t i, int dt, const float* v) {
  if (dt == kF32) {
    *reinterpret_cast<float4*>(static_cast<float*>(p) + i) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (dt == kBF16) {
    uint2 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
    h[0] = __floats2bfloat162_rn(v[0], v[1]);
    h[1] = __floats2bfloat162_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p) + i) = u;
  } else if (dt == kF16) {
    uint2 u;
    __half2* h = reinterpret_cast<__half2*>(&u);
    h[0] = __floats2half2_rn(v[0], v[1]);
    h[1] = __floats2half2_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__half*>(p) + i) = u;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) st(p, i + k, dt, v[k]);
  }
}

struct AdamConsts {
  float b1, b2, c1, c2, eps, step_size, inv_bc2_sqrt, decay;
};

// One element's update (PyTorch's order of operations, see optim.cuh); returns the new master.
__device__ __forceinline__ float adam_one(const AdamConsts& k, float g, float& m, float& v, float w) {
  m = k.b1 * m + k.c1 * g;
  v = k.b2 * v + k.c2 * g * g;
  w *= k.decay;
  return w - k.step_size * m / (sqrtf(v) * k.inv_bc2_sqrt + k.eps);
}

// vec4 != 0: every pointer of the tensor is aligned for 4-element loads (checked on the host):
// whole groups of 4 go through ld4/st4, the n % 4 tail element by element; else all elementwise.
__global__ void __launch_bounds__(kThreads) adamw_kernel(OptTable tab, OptHyper h, const DevScalars* sc,
                                                         unsigned vec4_mask) {
  const int ti = find_tensor(tab, blockIdx.x);
  const OptTensor& p = tab.t[ti];
  const float lr = sc->lr, t = sc->step, unscale = sc->grad_unscale;
  AdamConsts k;
  k.b1 = h.beta1, k.b2 = h.beta2, k.c1 = 1.0f - h.beta1, k.c2 = 1.0f - h.beta2, k.eps = h.eps;
  k.step_size = lr / (1.0f - powf(h.beta1, t));
  k.inv_bc2_sqrt = 1.0f / sqrtf(1.0f - powf(h.beta2, t));
  k.decay = p.decay != 0.0f ? 1.0f - lr * h.weight_decay : 1.0f;
  const int64_t begin = int64_t(blockIdx.x - tab.first_block[ti]) * kAdamPerBlock;
  const int64_t end = min(p.n, begin + kAdamPerBlock);
  const bool vec4 = (vec4_mask >> ti) & 1u;
  const int64_t i = begin + int64_t(threadIdx.x) * 4;
  if (i >= end) return;
  if (vec4 && i + 4 <= end) {
    float g[4], w[4], mask[4];
    const float4 m4 = *reinterpret_cast<const float4*>(p.m + i), v4 = *reinterpret_cast<const float4*>(p.v + i);
    ld4(p.grad, i, p.grad_dt, g);
    ld4(p.master, i, kF32, w);
    if (p.mask) ld4(p.mask, i, kF32, mask);
    float m[4] = {m4.x, m4.y, m4.z, m4.w}, v[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      w[e] = adam_one(k, g[e] * unscale, m[e], v[e], w[e]);
      if (p.mask) w[e] *= mask[e];
    }
    *reinterpret_cast<float4*>(p.m + i) = make_float4(m[0], m[1], m[2], m[3]);
    *reinterpret_cast<float4*>(p.v + i) = make_float4(v[0], v[1], v[2], v[3]);
    st4(p.master, i, kF32, w);
    if (p.value) st4(p.value, i, p.value_dt, w);
    return;
  }
  for (int64_t e = i; e < min(end, i + 4); ++e) {
    float m = p.m[e], v = p.v[e];
    float w = adam_one(k, ld(p.grad, e, p.grad_dt) * unscale, m, v, p.master[e]);
    if (p.mask) w *= p.mask[e];
    p.m[e] = m;
    p.v[e] = v;
    p.master[e] = w;
    if (p.value) st(p.value, e, p.value_dt, w);
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

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }
bool vec4_format(int dt) { return dt == kF32 || dt == kBF16 || dt == kF16; }
// Whether AdamW may update tensor o 4 elements at a time: master, m, v, mask 16-byte aligned, the
// gradient and the value copy aligned to 4 of their elements, both in a vector format.
bool vec4_ok(const OptTensor& o) {
  const unsigned gb = o.grad_dt == kF32 ? 16 : 8, vb = o.value_dt == kF32 ? 16 : 8;
  return aligned(o.master, 16) && aligned(o.m, 16) && aligned(o.v, 16) && (!o.mask || aligned(o.mask, 16)) &&
         vec4_format(o.grad_dt) && aligned(o.grad, gb) && (!o.value || (vec4_format(o.value_dt) && aligned(o.value, vb)));
}
}  // namespace

void launch_set_scalars(DevScalars* dst, const DevScalars& v, cudaStream_t s) {
  set_scalars_kernel<<<1, 1, 0, s>>>(dst, v);
  TL_LAUNCH_CHECK("set_scalars");
}
void launch_adamw(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s) {
  static_assert(kMaxTensors <= 32, "the vec4 flags of a table are one 32-bit mask");
  for_tables(t, count, kAdamPerBlock, [&](const OptTable& tab, int blocks) {
    unsigned vec4 = 0;
    for (int i = 0; i < tab.count; ++i) vec4 |= vec4_ok(tab.t[i]) ? 1u << i : 0u;
    adamw_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc, vec4);
    TL_LAUNCH_CHECK("adamw");
  });
}
void launch_sgd(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s) {
  for_tables(t, count, kPerBlock, [&](const OptTable& tab, int blocks) {
    sgd_kernel<<<blocks, kThreads, 0, s>>>(tab, h, sc);
    TL_LAUNCH_CHECK("sgd");
  });
}
void launch_all_finite(const OptTensor* t, int count, int* flag, cudaStream_t s) {
  for_tables(t, count, kPerBlock, [&](const OptTable& tab, int blocks) {
    finite_kernel<<<blocks, kThreads, 0, s>>>(tab, flag);
    TL_LAUNCH_CHECK("all_finite");
  });
}

}  // namespace trainlab::kern
