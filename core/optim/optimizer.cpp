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

std::map<std::string, std::vector<float>> Optimizer::save_state(Backend& be,
                                                                const std::vector<Parameter*>& params) const {
  std::map<std::string, std::vector<float>> out;
  const FlatParams flat(params);
  for (ParamBuffer b : state_buffers()) {
    bool any = false;
    for (Parameter* p : params) any = any || param_tensor(*p, b).defined();
    if (!any) continue;  // not created yet (no update applied so far)
    std::vector<float>& host = out[param_buffer_name(b)];
    host.assign(static_cast<size_t>(flat.numel()), 0.0f);
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& t = param_tensor(*params[i], b);
      if (t.defined()) be.download(t, host.data() + flat.offset(i), DType::F32);
    }
  }
  return out;
}

void Optimizer::load_state(Backend& be, const std::vector<Parameter*>& params,
                           const std::map<std::string, std::vector<float>>& state) {
  const std::vector<ParamBuffer> mine = state_buffers();
  for (const auto& [name, values] : state) {
    bool known = false;
    for (ParamBuffer b : mine) known = known || name == param_buffer_name(b);
    if (!known) throw Error("optimizer state '" + name + "' is not " + this->name() + "'s");
  }
  if (state.empty()) return;  // saved before the first update: nothing to restore
  const FlatParams flat(params);
  for (ParamBuffer b : mine) {
    const auto it = state.find(param_buffer_name(b));
    if (it == state.end())
      throw Error(std::string("optimizer state '") + param_buffer_name(b) + "' of " + name() + " is missing");
    if (static_cast<int64_t>(it->second.size()) != flat.numel())
      throw Error(std::string("optimizer state '") + param_buffer_name(b) + "' holds " +
                  std::to_string(it->second.size()) + " values; the model has " + std::to_string(flat.numel()) +
                  " parameters");
    ensure_state(be, params, b);
    for (size_t i = 0; i < params.size(); ++i)
      be.upload(param_tensor(*params[i], b), it->second.data() + flat.offset(i), DType::F32);
  }
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
