#include "optim/optimizer.h"

#include "util/error.h"

namespace trainlab {

void Optimizer::ensure_state(Backend& be, const std::vector<Parameter*>& params, ParamBuffer which) {
  FlatParams(params).ensure_zeros(be, which, MemCategory::Optimizer);
}

std::vector<ParamSlot> Optimizer::param_slots(std::vector<Parameter*>& params) {
  std::vector<ParamSlot> out;
  out.reserve(params.size());
  for (Parameter* p : params) out.push_back(p->slot());
  return out;
}

void AdamW::step(Backend& be, std::vector<Parameter*>& params) {
  ensure_state(be, params, ParamBuffer::M);
  ensure_state(be, params, ParamBuffer::V);
  auto s = param_slots(params);
  be.adamw_step(s, m_h);
}

void Sgd::step(Backend& be, std::vector<Parameter*>& params) {
  if (m_h.momentum != 0.0f) ensure_state(be, params, ParamBuffer::M);
  auto s = param_slots(params);
  if (m_h.momentum == 0.0f)
    for (auto& slot : s) slot.m = nullptr;
  be.sgd_step(s, m_h);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o) {
  if (o.name == "adamw") {
    AdamWHyper h;
    h.beta1 = static_cast<float>(o.beta1);
    h.beta2 = static_cast<float>(o.beta2);
    h.eps = static_cast<float>(o.eps);
    h.weight_decay = static_cast<float>(o.weight_decay);
    return std::make_unique<AdamW>(h);
  }
  if (o.name == "sgd") {
    SgdHyper h;
    h.momentum = static_cast<float>(o.momentum);
    h.weight_decay = static_cast<float>(o.weight_decay);
    h.nesterov = o.nesterov;
    return std::make_unique<Sgd>(h);
  }
  throw Error("optim.name '" + o.name + "': expected adamw or sgd");
}

}  // namespace trainlab
