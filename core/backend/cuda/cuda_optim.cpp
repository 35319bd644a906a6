// CudaBackend's optimizer steps (backend.h states the numerics): AdamW and SGD over kernels/optim,
// Lion and 8-bit AdamW over kernels/optim_lean, Adafactor over kernels/optim_adafactor. Each builds
// the multi-tensor table of the parameters and launches on the backend's stream, reading lr, t and
// the gradient unscale from the device-side step scalars (so a captured step replays correctly).
#include <algorithm>
#include <array>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_checks.h"
#include "optim.cuh"
#include "optim_adafactor.cuh"
#include "optim_lean.cuh"
#include "tensor/dynamic_map.h"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

// --- optimizers ------------------------------------------------------------------------------
namespace {
std::vector<OptTensor> opt_table(std::span<ParamSlot> params, bool with_v) {
  std::vector<OptTensor> t;
  t.reserve(params.size());
  for (auto& p : params) {
    OptTensor o;
    o.master = p.master->data<float>();
    o.value = (p.value && p.value->defined() && !p.value->same_storage(*p.master)) ? p.value->raw() : nullptr;
    o.value_dt = o.value ? dcode(p.value->dtype()) : 0;
    o.grad = p.grad->raw();
    o.grad_dt = dcode(p.grad->dtype());
    o.m = p.m && p.m->defined() ? p.m->data<float>() : nullptr;
    o.v = with_v && p.v && p.v->defined() ? p.v->data<float>() : nullptr;
    o.mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    o.n = p.master->numel();
    o.decay = p.decay ? 1.0f : 0.0f;
    t.push_back(o);
  }
  return t;
}
}  // namespace

void CudaBackend::adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) {
  bind();
  TL_TIMED_COST("adamw", optimizer_cost(params, 2, op_flops::kAdamW));
  note_scalar_read();
  auto t = opt_table(params, true);
  for (auto& o : t)
    if (!o.m || !o.v) throw Error("adamw_step: optimizer state (m, v) missing");
  launch_adamw(t.data(), static_cast<int>(t.size()), OptHyper{h.beta1, h.beta2, h.eps, h.weight_decay, false},
               m_ctx.scalars, m_ctx.stream);
}

void CudaBackend::sgd_step(std::span<ParamSlot> params, const SgdHyper& h) {
  bind();
  TL_TIMED_COST("sgd", optimizer_cost(params, 1, op_flops::kSgd));
  note_scalar_read();
  auto t = opt_table(params, false);
  launch_sgd(t.data(), static_cast<int>(t.size()), OptHyper{h.momentum, 0.0f, 0.0f, h.weight_decay, h.nesterov},
             m_ctx.scalars, m_ctx.stream);
}

void CudaBackend::lion_step(std::span<ParamSlot> params, const LionHyper& h) {
  bind();
  TL_TIMED_COST("lion", optimizer_cost(params, 1, op_flops::kLion));
  note_scalar_read();
  auto t = opt_table(params, false);
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].m) throw Error("lion_step: optimizer state (m) missing");
    t[i].m_dt = dcode(params[i].m->dtype());
  }
  launch_lion(t.data(), static_cast<int>(t.size()), LionHyperDev{h.beta1, h.beta2, h.weight_decay}, m_ctx.scalars,
              m_ctx.stream);
}

void CudaBackend::adamw8bit_step(std::span<ParamSlot> params, std::span<const Quant8State> state, const AdamWHyper& h,
                                 int block) {
  bind();
  if (state.size() != params.size()) throw Error("adamw8bit_step: one state per parameter expected");
  if (block != 256 && block != 2048) throw Error("adamw8bit_step: block " + std::to_string(block) + ", expected 256 or 2048");
  if (!m_dynamic_maps.defined()) {  // the first (eager) step uploads the maps; replays read them
    m_dynamic_maps = empty({512}, DType::F32, MemCategory::Workspace);
    std::array<float, 512> maps{};
    std::copy(dynamic_map_signed().begin(), dynamic_map_signed().end(), maps.begin());
    std::copy(dynamic_map_unsigned().begin(), dynamic_map_unsigned().end(), maps.begin() + 256);
    upload(m_dynamic_maps, maps.data(), DType::F32);
  }
  TL_TIMED("adamw8bit");
  note_scalar_read();
  auto t = opt_table(params, false);
  for (size_t i = 0; i < t.size(); ++i) {
    const Quant8State& q = state[i];
    if (!q.m_code || q.m_code->numel() != t[i].n || !q.v_absmax || q.v_absmax->numel() != (t[i].n + block - 1) / block)
      throw Error("adamw8bit_step: 8-bit state of parameter " + std::to_string(i) + " does not match it");
    t[i].m_code = static_cast<uint8_t*>(q.m_code->raw());
    t[i].v_code = static_cast<uint8_t*>(q.v_code->raw());
    t[i].m_absmax = q.m_absmax->data<float>();
    t[i].v_absmax = q.v_absmax->data<float>();
  }
  launch_adamw8bit(t.data(), static_cast<int>(t.size()), OptHyper{h.beta1, h.beta2, h.eps, h.weight_decay, false},
                   block, m_dynamic_maps.data<float>(), m_ctx.scalars, m_ctx.stream);
}

void CudaBackend::adafactor_step(std::span<ParamSlot> params, std::span<const FactoredState> state,
                                 const AdafactorHyper& h) {
  bind();
  if (state.size() != params.size()) throw Error("adafactor_step: one state per parameter expected");
  std::vector<AfTensor> t;
  std::vector<int64_t> acc_at;  // each tensor's sums in the scratch buffer
  int64_t scratch = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSlot& p = params[i];
    const FactoredState& f = state[i];
    AfTensor a;
    a.master = p.master->data<float>();
    a.value = (p.value && p.value->defined() && !p.value->same_storage(*p.master)) ? p.value->raw() : nullptr;
    a.value_dt = a.value ? dcode(p.value->dtype()) : 0;
    a.grad = p.grad->raw();
    a.grad_dt = dcode(p.grad->dtype());
    a.n = p.master->numel();
    if ((f.rows > 0 && (f.rows * f.cols != a.n || !f.row || !f.col)) || (f.rows == 0 && (!f.v || f.v->numel() != a.n)) ||
        (h.beta1 > 0.0f && (!f.m || f.m->numel() != a.n)))
      throw Error("adafactor_step: state of parameter " + std::to_string(i) + " does not match it");
    a.rows = f.rows;
    a.cols = f.rows > 0 ? f.cols : 0;
    a.row = f.row ? f.row->data<float>() : nullptr;
    a.col = f.col ? f.col->data<float>() : nullptr;
    a.v = f.v ? f.v->data<float>() : nullptr;
    a.m = h.beta1 > 0.0f ? f.m->data<float>() : nullptr;
    a.mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    a.decay = p.decay ? 1.0f : 0.0f;
    acc_at.push_back(scratch);
    scratch += 3 + a.cols;
    t.push_back(a);
  }
  if (!m_adafactor_scratch.defined() || m_adafactor_scratch.numel() < scratch)  // the first (eager) step
    m_adafactor_scratch = empty({std::max<int64_t>(scratch, 1)}, DType::F32, MemCategory::Workspace);
  for (size_t i = 0; i < t.size(); ++i) t[i].acc = m_adafactor_scratch.data<float>() + acc_at[i];
  TL_TIMED("adafactor");
  note_scalar_read();
  launch_adafactor(t.data(), static_cast<int>(t.size()),
                   AfHyper{h.beta1, h.weight_decay, h.eps1, h.eps2, h.clip, h.decay_rate, h.relative_step},
                   m_adafactor_scratch.data<float>(), scratch, m_ctx.scalars, m_ctx.stream);
}

}  // namespace trainlab::cuda
