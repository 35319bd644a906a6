#include "optim/optimizer.h"

#include "optim/lean_optimizers.h"
#include "optim/offload.h"
#include "util/error.h"

namespace trainlab {

void Optimizer::ensure_state(Backend& be, const std::vector<Parameter*>& params, ParamBuffer which, DType dtype) {
  FlatParams(params).ensure_zeros(be, which, MemCategory::Optimizer, dtype);
}

std::vector<ParamSlot> Optimizer::param_slots(std::vector<Parameter*>& params) {
  std::vector<ParamSlot> out;
  out.reserve(params.size());
  for (Parameter* p : params) out.push_back(p->slot());
  return out;
}

std::vector<std::string> Optimizer::state_names() const {
  std::vector<std::string> out;
  for (ParamBuffer b : state_buffers()) out.emplace_back(param_buffer_name(b));
  return out;
}

void Optimizer::create_state(Backend& be, const std::vector<Parameter*>& params) {
  for (ParamBuffer b : state_buffers()) ensure_state(be, params, b, state_dtype());
}

std::vector<Optimizer::StateView> Optimizer::state_views(const std::vector<Parameter*>& params) const {
  std::vector<StateView> out;
  for (ParamBuffer b : state_buffers())
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& t = param_tensor(*params[i], b);
      if (t.defined()) out.push_back({param_buffer_name(b), i, t, 0});
    }
  return out;
}

std::map<std::string, std::vector<float>> Optimizer::save_state(Backend& be,
                                                                const std::vector<Parameter*>& params) const {
  std::map<std::string, std::vector<float>> out;
  const FlatParams flat(params);
  std::vector<uint8_t> codes;
  for (const StateView& s : state_views(params)) {
    std::vector<float>& host = out[s.name];
    if (host.empty()) host.assign(static_cast<size_t>(flat.numel()), 0.0f);
    float* at = host.data() + flat.offset(s.param) + s.at;
    if (s.tensor.dtype() == DType::I8) {  // 8-bit codes: their values 0..255
      codes.resize(static_cast<size_t>(s.tensor.numel()));
      be.download(s.tensor, codes.data(), DType::I8);
      for (size_t k = 0; k < codes.size(); ++k) at[k] = static_cast<float>(codes[k]);
    } else {
      be.download(s.tensor, at, DType::F32);
    }
  }
  return out;
}

void Optimizer::load_state(Backend& be, const std::vector<Parameter*>& params,
                           const std::map<std::string, std::vector<float>>& state) {
  const std::vector<std::string> mine = state_names();
  for (const auto& [name, values] : state) {
    bool known = false;
    for (const std::string& m : mine) known = known || name == m;
    if (!known) throw Error("optimizer state '" + name + "' is not " + this->name() + "'s");
  }
  if (state.empty()) return;  // saved before the first update: nothing to restore
  const FlatParams flat(params);
  create_state(be, params);
  std::vector<StateView> views = state_views(params);
  for (const StateView& s : views) {  // every array the state has (stable_embedding without embeddings has no m, v)
    const auto it = state.find(s.name);
    if (it == state.end()) throw Error("optimizer state '" + s.name + "' of " + name() + " is missing");
    if (static_cast<int64_t>(it->second.size()) != flat.numel())
      throw Error("optimizer state '" + s.name + "' holds " + std::to_string(it->second.size()) +
                  " values; the model has " + std::to_string(flat.numel()) + " parameters");
  }
  std::vector<uint8_t> codes;
  for (StateView& s : views) {
    const float* at = state.at(s.name).data() + flat.offset(s.param) + s.at;
    if (s.tensor.dtype() == DType::I8) {
      codes.resize(static_cast<size_t>(s.tensor.numel()));
      for (size_t k = 0; k < codes.size(); ++k) {
        if (!(at[k] >= 0.0f && at[k] <= 255.0f) || at[k] != static_cast<float>(static_cast<int>(at[k])))
          throw Error("optimizer state '" + s.name + "': expected 8-bit codes (integers 0..255)");
        codes[k] = static_cast<uint8_t>(at[k]);
      }
      be.upload(s.tensor, codes.data(), DType::I8);
    } else {
      be.upload(s.tensor, at, DType::F32);
    }
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

namespace {
std::unique_ptr<Optimizer> make_on_device(const OptimizerOptions& o) {
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
  if (auto lean = make_lean_optimizer(o)) return lean;
  throw Error("optim.name '" + o.name + "': expected adamw, sgd, adamw8bit, adafactor or lion");
}
}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o) {
  if (o.offload != "none" && o.offload != "cpu") throw Error("optim.offload '" + o.offload + "': expected none or cpu");
  std::unique_ptr<Optimizer> opt = make_on_device(o);
  if (o.offload == "cpu") return std::make_unique<OffloadedOptimizer>(std::move(opt));
  return opt;
}

}  // namespace trainlab
