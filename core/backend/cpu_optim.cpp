// CpuBackend's lean optimizers (backend.h states their numerics): Lion, 8-bit AdamW and Adafactor.
// Plain loops over fp32 panels that the compiler vectorises; a 16-bit gradient is converted a panel
// at a time (workspace slot 0), a 16-bit moment (Lion's bf16 state) in slot 1.
#include <algorithm>
#include <cmath>

#include "backend/cpu_backend.h"
#include "backend/host_timing.h"
#include "backend/cpu_numeric.h"
#include "backend/cpu_panels.h"
#include "tensor/dynamic_map.h"
#include "util/error.h"

namespace trainlab {

using cpu::elem_ptr;
using cpu::from_f32;
using cpu::kPanel;
using cpu::to_f32;

namespace {

const float* mask_of(const ParamSlot& p) { return p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr; }

void write_value(ParamSlot& p, const float* w, size_t n) {
  if (p.value && p.value->defined() && !p.value->same_storage(*p.master)) from_f32(w, p.value->dtype(), p.value->raw(), n);
}

TL_VECTOR_CLONES void lion_kernel(float* __restrict w, const float* __restrict g, float* __restrict m,
                                  const float* __restrict mask, size_t n, float unscale, float decay, float lr, float b1,
                                  float b2) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * unscale;
    const float c = b1 * m[i] + (1.0f - b1) * gi;
    const float s = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
    const float wi = w[i] * decay - lr * s;
    w[i] = mask ? wi * mask[i] : wi;
    m[i] = b2 * m[i] + (1.0f - b2) * gi;
  }
}

// One quantization block of 8-bit AdamW: m, v dequantized into mf, vf, updated with g, the weight
// updated, and the block stored back (codes, absmax).
struct Adam8Consts {
  float b1, b2, eps, step_size, inv_bc2_sqrt, decay, unscale;
};
void adam8_block(const Adam8Consts& k, float* w, const float* g, const float* mask, uint8_t* mc, uint8_t* vc,
                 float& m_absmax, float& v_absmax, size_t n, float* mf, float* vf) {
  const DynamicMap& sm = dynamic_map_signed();
  const DynamicMap& um = dynamic_map_unsigned();
  float m_max = 0.0f, v_max = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * k.unscale;
    const float mi = k.b1 * (sm[mc[i]] * m_absmax) + (1.0f - k.b1) * gi;
    const float vi = k.b2 * (um[vc[i]] * v_absmax) + (1.0f - k.b2) * gi * gi;
    mf[i] = mi;
    vf[i] = vi;
    m_max = std::max(m_max, std::fabs(mi));
    v_max = std::max(v_max, vi);
    float wi = w[i] * k.decay;
    wi -= k.step_size * mi / (std::sqrt(vi) * k.inv_bc2_sqrt + k.eps);
    w[i] = mask ? wi * mask[i] : wi;
  }
  const float m_inv = m_max > 0.0f ? 1.0f / m_max : 0.0f, v_inv = v_max > 0.0f ? 1.0f / v_max : 0.0f;
  for (size_t i = 0; i < n; ++i) {
    mc[i] = dynamic_quantize(sm, mf[i] * m_inv);
    vc[i] = dynamic_quantize(um, vf[i] * v_inv);
  }
  m_absmax = m_max;
  v_absmax = v_max;
}

}  // namespace

void CpuBackend::lion_step(std::span<ParamSlot> params, const LionHyper& h) {
  TL_HOST_TIMED("lion", optimizer_cost(params, 1, op_flops::kLion));
  const float lr = m_scalars.lr, unscale = m_scalars.grad_unscale;
  for (auto& p : params) {
    if (!p.m || !p.m->defined()) throw Error("lion_step: optimizer state (m) missing");
    const size_t n = static_cast<size_t>(p.master->numel());
    float* w = p.master->data<float>();
    const float* mask = mask_of(p);
    const bool g32 = p.grad->dtype() == DType::F32, m32 = p.m->dtype() == DType::F32;
    float* gbuf = g32 ? nullptr : slot_buffer(0, std::min<size_t>(n, kPanel));
    float* mbuf = m32 ? nullptr : slot_buffer(1, std::min<size_t>(n, kPanel));
    const float decay = p.decay ? 1.0f - lr * h.weight_decay : 1.0f;
    for (size_t off = 0; off < n; off += kPanel) {
      const size_t len = std::min<size_t>(kPanel, n - off);
      const int64_t o = static_cast<int64_t>(off);
      const float* g = g32 ? p.grad->data<float>() + off : gbuf;
      if (!g32) to_f32(p.grad->dtype(), elem_ptr(*p.grad, o), gbuf, len);
      float* m = m32 ? p.m->data<float>() + off : mbuf;
      if (!m32) to_f32(p.m->dtype(), elem_ptr(*p.m, o), mbuf, len);
      lion_kernel(w + off, g, m, mask ? mask + off : nullptr, len, unscale, decay, lr, h.beta1, h.beta2);
      if (!m32) from_f32(mbuf, p.m->dtype(), elem_ptr(*p.m, o), len);
    }
    write_value(p, w, n);
  }
}

void CpuBackend::adamw8bit_step(std::span<ParamSlot> params, std::span<const Quant8State> state, const AdamWHyper& h,
                                int block) {
  if (state.size() != params.size()) throw Error("adamw8bit_step: one state per parameter expected");
  if (block <= 0 || kPanel % block != 0) throw Error("adamw8bit_step: block must divide " + std::to_string(kPanel));
  const float lr = m_scalars.lr, t = m_scalars.step;
  Adam8Consts k{h.beta1, h.beta2, h.eps, lr / (1.0f - std::pow(h.beta1, t)),
                1.0f / std::sqrt(1.0f - std::pow(h.beta2, t)), 1.0f, m_scalars.grad_unscale};
  const size_t B = static_cast<size_t>(block);
  float* mf = slot_buffer(1, 2 * B);
  float* vf = mf + B;
  for (size_t i = 0; i < params.size(); ++i) {
    ParamSlot& p = params[i];
    const Quant8State& s = state[i];
    const size_t n = static_cast<size_t>(p.master->numel());
    if (!s.m_code || static_cast<size_t>(s.m_code->numel()) != n || !s.v_absmax ||
        static_cast<size_t>(s.v_absmax->numel()) != (n + B - 1) / B)
      throw Error("adamw8bit_step: 8-bit state of parameter " + std::to_string(i) + " does not match it");
    float* w = p.master->data<float>();
    const float* mask = mask_of(p);
    auto* mc = static_cast<uint8_t*>(s.m_code->raw());
    auto* vc = static_cast<uint8_t*>(s.v_code->raw());
    float* ma = s.m_absmax->data<float>();
    float* va = s.v_absmax->data<float>();
    k.decay = p.decay ? 1.0f - lr * h.weight_decay : 1.0f;
    const bool g32 = p.grad->dtype() == DType::F32;
    float* gbuf = g32 ? nullptr : slot_buffer(0, std::min<size_t>(n, kPanel));
    for (size_t off = 0; off < n; off += kPanel) {
      const size_t len = std::min<size_t>(kPanel, n - off);
      const float* g = g32 ? p.grad->data<float>() + off : gbuf;
      if (!g32) to_f32(p.grad->dtype(), elem_ptr(*p.grad, static_cast<int64_t>(off)), gbuf, len);
      for (size_t b = 0; b < len; b += B) {  // kPanel is a multiple of B: blocks never straddle panels
        const size_t e = off + b, bl = std::min(B, n - e);
        adam8_block(k, w + e, g + b, mask ? mask + e : nullptr, mc + e, vc + e, ma[e / B], va[e / B], bl, mf, vf);
      }
    }
    write_value(p, w, n);
  }
}

}  // namespace trainlab
