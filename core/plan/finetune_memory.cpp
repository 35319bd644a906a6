#include "plan/finetune_memory.h"

#include <algorithm>
#include <cstdio>

#include "plan/memory_model.h"
#include "util/error.h"

namespace trainlab {

std::vector<FinetuneTarget> finetune_targets(int64_t layers, int64_t dim, int64_t vocab, const FinetuneOptions& o) {
  auto named = [&](const char* t) { return std::find(o.targets.begin(), o.targets.end(), t) != o.targets.end(); };
  std::vector<FinetuneTarget> out;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    if (named("qkv")) out.push_back({p + "qkv", 3 * dim, dim});
    if (named("proj")) out.push_back({p + "proj", dim, dim});
    if (named("fc1")) out.push_back({p + "fc", 4 * dim, dim});
    if (named("fc2")) out.push_back({p + "out", dim, 4 * dim});
  }
  if (named("head")) out.push_back({"head", vocab, dim});
  if (out.empty()) throw Error("finetune.targets names no layer of the model (expected qkv, proj, fc1, fc2 or head)");
  for (const FinetuneTarget& t : out)
    if (o.rank > std::min(t.out, t.in))
      throw Error("finetune.rank " + std::to_string(o.rank) + " is larger than " + t.module + "'s smaller dimension (" +
                  std::to_string(t.out) + " x " + std::to_string(t.in) + "): expected a rank of at most " +
                  std::to_string(std::min(t.out, t.in)));
  return out;
}

int64_t nf4_bytes(int64_t n) {
  const int64_t blocks = (n + 63) / 64;
  return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256) + 4;
}

FinetuneMemory predict_finetune_memory(const std::vector<FinetuneTarget>& targets, int64_t model_params,
                                       const FinetuneOptions& o, const OptimizerOptions& opt, int64_t eb) {
  FinetuneMemory m;
  m.method = finetune_method_name(o.method);
  const bool nf4 = o.method == FinetuneMethod::Qlora;
  m.base_format = nf4 ? "nf4" : "fp32";
  // A parameter's bytes: its fp32 master, and a compute copy in 16-bit runs.
  const int64_t per = 4 + (eb < 4 ? eb : 0);
  std::vector<ParamShapeInfo> adapters;
  for (const FinetuneTarget& t : targets) {
    const int64_t n = t.out * t.in;
    m.base_weights += n;
    m.base_bytes += nf4 ? nf4_bytes(n) : 4 * n;
    adapters.push_back({{o.rank, t.in}});
    adapters.push_back({{t.out, o.rank}});
    if (o.method == FinetuneMethod::Dora) adapters.push_back({{t.out}});
  }
  for (const ParamShapeInfo& a : adapters) m.adapter_params += shape_numel(a.shape);
  m.other_bytes = (model_params - m.base_weights) * per;
  m.adapter_bytes = m.adapter_params * per;
  m.adapter_grad_bytes = m.adapter_params * eb;
  m.optimizer_bytes = optimizer_state_bytes(opt, adapters);
  if (o.method == FinetuneMethod::Dora) {  // the folded W' and the base's full gradient
    m.effective_bytes = m.base_weights * per;
    m.product_grad_bytes = model_params * eb;
  } else if (o.method == FinetuneMethod::Lora) {
    m.base_bytes = m.base_weights * per;  // the base's own W (+ its compute copy)
  } else {
    int64_t largest = 0;
    for (const FinetuneTarget& t : targets) largest = std::max(largest, t.out * t.in);
    m.dequant_scratch_bytes = largest * eb;
  }
  return m;
}

nlohmann::json FinetuneMemory::to_json() const {
  return {{"method", method},
          {"base_format", base_format},
          {"base_weights", base_weights},
          {"base_bytes", base_bytes},
          {"base_bits_per_weight", base_bits()},
          {"effective_weight_bytes", effective_bytes},
          {"dequant_scratch_bytes", dequant_scratch_bytes},
          {"other_frozen_bytes", other_bytes},
          {"adapter_params", adapter_params},
          {"adapter_bytes", adapter_bytes},
          {"adapter_grad_bytes", adapter_grad_bytes},
          {"optimizer_bytes", optimizer_bytes},
          {"product_grad_workspace_bytes", product_grad_bytes}};
}

std::vector<std::string> FinetuneMemory::lines() const {
  char buf[160];
  std::vector<std::string> out;
  auto line = [&](const char* what, int64_t bytes, const std::string& note) {
    std::snprintf(buf, sizeof buf, "  %-28s %12lld bytes%s", what, static_cast<long long>(bytes), note.c_str());
    out.emplace_back(buf);
  };
  std::snprintf(buf, sizeof buf, "fine-tune memory (%s):", method.c_str());
  out.emplace_back(buf);
  std::snprintf(buf, sizeof buf, "  (%s, %.4f bits a weight over %lld weights)", base_format.c_str(), base_bits(),
                static_cast<long long>(base_weights));
  line("frozen base (targets)", base_bytes, buf);
  if (effective_bytes) line("effective weights W'", effective_bytes, "  (the products' operand)");
  if (dequant_scratch_bytes) line("NF4 dequantization scratch", dequant_scratch_bytes, "  (one product's W at a time)");
  line("other frozen weights", other_bytes, "");
  line("adapters", adapter_bytes, "  (" + std::to_string(adapter_params) + " parameters)");
  line("adapter gradients", adapter_grad_bytes, "");
  line("adapter optimizer state", optimizer_bytes, "");
  if (product_grad_bytes) line("dL/dW' workspace", product_grad_bytes, "");
  return out;
}

}  // namespace trainlab
