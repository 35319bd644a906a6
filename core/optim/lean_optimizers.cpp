#include "optim/lean_optimizers.h"

#include "util/error.h"

namespace trainlab {

namespace {

// One optimizer-owned buffer of `total` elements of `dtype` (optimizer memory) and views of it of
// the given lengths, end to end.
std::vector<Tensor> packed_views(Backend& be, DType dtype, const std::vector<int64_t>& lengths) {
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  std::vector<Tensor> out;
  if (total == 0) return out;
  Tensor all = be.empty({total}, dtype, MemCategory::Optimizer);
  int64_t at = 0;
  for (int64_t n : lengths) {
    out.emplace_back(all.storage(), Shape{n}, dtype, all.byte_offset() + dtype_bytes(dtype, static_cast<size_t>(at)));
    at += n;
  }
  return out;
}

void check_same_params(const std::vector<Parameter*>& made_for, const std::vector<Parameter*>& params,
                       const std::string& who) {
  if (made_for != params)
    throw Error(who + ": the optimizer's state was made for another list of parameters (" +
                std::to_string(made_for.size()) + " then, " + std::to_string(params.size()) + " now)");
}

}  // namespace

// --- Lion ----------------------------------------------------------------------------------------

void Lion::step(Backend& be, std::vector<Parameter*>& params) {
  create_state(be, params);
  auto s = param_slots(params);
  be.lion_step(s, m_h);
}

// --- 8-bit AdamW -----------------------------------------------------------------------------------

void AdamW8bit::create_state(Backend& be, const std::vector<Parameter*>& params) {
  if (!m_params.empty()) {
    check_same_params(m_params, params, "adamw8bit");
    return;
  }
  std::vector<Parameter*> full;
  std::vector<int64_t> codes, scales;
  for (size_t i = 0; i < params.size(); ++i) {
    if (full_precision(*params[i])) {
      full.push_back(params[i]);
      continue;
    }
    m_quantized.push_back(i);
    codes.push_back(params[i]->numel());
    scales.push_back((params[i]->numel() + m_block - 1) / m_block);
  }
  if (!full.empty()) {
    ensure_state(be, full, ParamBuffer::M);
    ensure_state(be, full, ParamBuffer::V);
  }
  std::vector<Tensor> mc = packed_views(be, DType::I8, codes), vc = packed_views(be, DType::I8, codes);
  std::vector<Tensor> ma = packed_views(be, DType::F32, scales), va = packed_views(be, DType::F32, scales);
  if (!ma.empty()) {  // absmax 0: every block is zero, whatever its codes; the codes are zeroed too
    Tensor sa(ma[0].storage(), Shape{static_cast<int64_t>(ma[0].storage()->bytes() / 4)}, DType::F32);
    Tensor sv(va[0].storage(), Shape{static_cast<int64_t>(va[0].storage()->bytes() / 4)}, DType::F32);
    be.fill(sa, 0.0f);
    be.fill(sv, 0.0f);
    const std::vector<uint8_t> zeros(mc[0].storage()->bytes(), 0);
    Tensor cm(mc[0].storage(), Shape{static_cast<int64_t>(zeros.size())}, DType::I8);
    Tensor cv(vc[0].storage(), Shape{static_cast<int64_t>(zeros.size())}, DType::I8);
    be.upload(cm, zeros.data(), DType::I8);
    be.upload(cv, zeros.data(), DType::I8);
  }
  m_views.clear();
  for (size_t k = 0; k < m_quantized.size(); ++k)
    for (Tensor* t : {&mc[k], &vc[k], &ma[k], &va[k]}) m_views.push_back(*t);
  m_state.clear();
  for (size_t k = 0; k < m_quantized.size(); ++k)
    m_state.push_back({&m_views[4 * k], &m_views[4 * k + 1], &m_views[4 * k + 2], &m_views[4 * k + 3]});
  m_params = params;
}

std::vector<Optimizer::StateView> AdamW8bit::state_views(const std::vector<Parameter*>& params) const {
  std::vector<StateView> out;
  if (m_params.empty()) return out;
  check_same_params(m_params, params, "adamw8bit");
  static const char* const kNames[4] = {"m_code", "v_code", "m_absmax", "v_absmax"};
  for (size_t k = 0; k < m_quantized.size(); ++k)
    for (int j = 0; j < 4; ++j) out.push_back({kNames[j], m_quantized[k], m_views[4 * k + static_cast<size_t>(j)], 0});
  for (size_t i = 0; i < params.size(); ++i)
    if (full_precision(*params[i])) {
      out.push_back({"m", i, params[i]->m, 0});
      out.push_back({"v", i, params[i]->v, 0});
    }
  return out;
}

void AdamW8bit::step(Backend& be, std::vector<Parameter*>& params) {
  create_state(be, params);
  std::vector<ParamSlot> full, quant;
  for (size_t i = 0; i < params.size(); ++i) (full_precision(*params[i]) ? full : quant).push_back(params[i]->slot());
  if (!full.empty()) be.adamw_step(full, m_h);
  if (!quant.empty()) be.adamw8bit_step(quant, m_state, m_h, m_block);
}

// --- Adafactor -------------------------------------------------------------------------------------

bool adafactor_factors(const Shape& shape, int64_t& rows, int64_t& cols) {
  rows = cols = 0;
  if (shape.size() < 2 || shape.back() < 2) return false;
  const int64_t c = shape.back(), r = shape_numel(shape) / c;
  if (r < 2) return false;
  rows = r;
  cols = c;
  return true;
}

void Adafactor::create_state(Backend& be, const std::vector<Parameter*>& params) {
  if (!m_params.empty()) {
    check_same_params(m_params, params, "adafactor");
    return;
  }
  std::vector<int64_t> lengths;
  m_state.assign(params.size(), FactoredState{});
  for (size_t i = 0; i < params.size(); ++i) {
    FactoredState& s = m_state[i];
    if (adafactor_factors(params[i]->shape, s.rows, s.cols)) {
      lengths.push_back(s.rows);
      lengths.push_back(s.cols);
    } else {
      lengths.push_back(params[i]->numel());
    }
  }
  m_views = packed_views(be, DType::F32, lengths);
  if (!m_views.empty()) {
    Tensor all(m_views[0].storage(), Shape{static_cast<int64_t>(m_views[0].storage()->bytes() / 4)}, DType::F32);
    be.fill(all, 0.0f);
  }
  if (m_h.beta1 > 0.0f) ensure_state(be, params, ParamBuffer::M);
  size_t v = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    FactoredState& s = m_state[i];
    if (s.rows > 0) {
      s.row = &m_views[v++];
      s.col = &m_views[v++];
    } else {
      s.v = &m_views[v++];
    }
    s.m = m_h.beta1 > 0.0f ? &params[i]->m : nullptr;
  }
  m_params = params;
}

std::vector<Optimizer::StateView> Adafactor::state_views(const std::vector<Parameter*>& params) const {
  std::vector<StateView> out;
  if (m_params.empty()) return out;
  check_same_params(m_params, params, "adafactor");
  for (size_t i = 0; i < params.size(); ++i) {
    const FactoredState& s = m_state[i];
    if (s.rows > 0) {  // row then column averages at the start of the parameter's range (r + c <= r c)
      out.push_back({"v", i, *s.row, 0});
      out.push_back({"v", i, *s.col, s.rows});
    } else {
      out.push_back({"v", i, *s.v, 0});
    }
    if (s.m) out.push_back({"m", i, *s.m, 0});
  }
  return out;
}

void Adafactor::step(Backend& be, std::vector<Parameter*>& params) {
  create_state(be, params);
  auto s = param_slots(params);
  be.adafactor_step(s, m_state, m_h);
}

// --- the factory -----------------------------------------------------------------------------------

std::unique_ptr<Optimizer> make_lean_optimizer(const OptimizerOptions& o) {
  if (o.name == "lion") {
    LionHyper h;
    h.beta1 = static_cast<float>(o.beta1);
    h.beta2 = static_cast<float>(o.beta2);
    h.weight_decay = static_cast<float>(o.weight_decay);
    if (o.lion_state != "fp32" && o.lion_state != "bf16")
      throw Error("optim.lion_state '" + o.lion_state + "': expected fp32 or bf16");
    return std::make_unique<Lion>(h, o.lion_state == "bf16" ? DType::BF16 : DType::F32);
  }
  if (o.name == "adamw8bit") {
    AdamWHyper h;
    h.beta1 = static_cast<float>(o.beta1);
    h.beta2 = static_cast<float>(o.beta2);
    h.eps = static_cast<float>(o.eps);
    h.weight_decay = static_cast<float>(o.weight_decay);
    if (o.block_size != 256 && o.block_size != 2048)
      throw Error("optim.block_size " + std::to_string(o.block_size) + ": expected 256 or 2048");
    return std::make_unique<AdamW8bit>(h, static_cast<int>(o.block_size), o.stable_embedding);
  }
  if (o.name == "adafactor") {
    AdafactorHyper h;
    h.beta1 = static_cast<float>(o.adafactor_beta1);
    h.weight_decay = static_cast<float>(o.weight_decay);
    h.relative_step = o.relative_step;
    return std::make_unique<Adafactor>(h);
  }
  return nullptr;
}

}  // namespace trainlab
