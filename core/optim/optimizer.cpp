#include "optim/optimizer.h"

namespace trainlab {

void Optimizer::ensure_state(Backend& be, Tensor& t, const Shape& shape) {
  if (!t.defined()) {
    t = be.empty(shape, DType::F32, MemCategory::Optimizer);
    be.fill(t, 0.0f);
  }
}

std::vector<ParamSlot> Optimizer::param_slots(std::vector<Parameter*>& params) {
  std::vector<ParamSlot> out;
  out.reserve(params.size());
  for (Parameter* p : params) out.push_back(p->slot());
  return out;
}

void AdamW::step(Backend& be, std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    ensure_state(be, p->m, p->shape);
    ensure_state(be, p->v, p->shape);
  }
  auto s = param_slots(params);
  be.adamw_step(s, m_h);
}

void Sgd::step(Backend& be, std::vector<Parameter*>& params) {
  if (m_h.momentum != 0.0f)
    for (Parameter* p : params) ensure_state(be, p->m, p->shape);
  auto s = param_slots(params);
  if (m_h.momentum == 0.0f)
    for (auto& slot : s) slot.m = nullptr;
  be.sgd_step(s, m_h);
}

}  // namespace trainlab
