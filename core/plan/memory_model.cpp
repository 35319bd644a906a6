#include "plan/memory_model.h"

namespace trainlab {

namespace {
int64_t& at(MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; }
}  // namespace

MemoryByCategory predict_training_memory(const TrainingMemoryInputs& in) {
  MemoryByCategory m{};
  at(m, MemCategory::Weights) = in.params * in.element_bytes;
  at(m, MemCategory::Gradients) = in.params * in.element_bytes;
  at(m, MemCategory::Optimizer) = in.params * (in.optimizer_state_bytes + (in.element_bytes == 4 ? 0 : 4));
  at(m, MemCategory::Activations) = in.activation_bytes;
  at(m, MemCategory::Workspace) = in.data_bytes;
  return m;
}

int64_t mlp_activation_bytes(const std::vector<int64_t>& sizes, int64_t batch, int64_t eb, bool gelu) {
  int64_t act = batch * sizes.front() * 4 + (eb == 4 ? 0 : batch * sizes.front() * eb) + batch * 4;
  for (size_t i = 1; i < sizes.size(); ++i) {
    const bool last = i + 1 == sizes.size();
    act += batch * sizes[i] * eb * ((gelu && !last) ? 2 : 1);
    if (i > 1) act += batch * sizes[i - 1] * eb;
  }
  return act + batch * sizes.back() * eb;
}

int64_t char_gpt_activation_bytes(const CharGpt& model, int64_t B, int64_t T, int64_t eb, bool fp8_matmul) {
  const CharGptConfig& c = model.config();
  const int64_t L = c.layers, D = c.dim, H = c.heads, V = c.padded_vocab(), N = B * T;
  const int64_t nd = N * D * eb;
  const int64_t stats = 16 * N + 4 * N * H;  // mean/rstd of both LayerNorms, attention's lse (fp32)
  const int64_t full_set = 15 * nd + stats;
  int64_t blocks = 0;
  switch (model.checkpoint_policy()) {
    case CheckpointPolicy::Off: blocks = L * (full_set + nd); break;
    case CheckpointPolicy::Selective: blocks = L * (10 * nd + stats) + 6 * nd; break;
    case CheckpointPolicy::EveryBlock:
    case CheckpointPolicy::EveryK: {
      const int64_t k = model.checkpoint_k(), segs = (L + k - 1) / k;
      const int64_t outputs = k - 1 + (L % k == 0 ? 1 : 0);
      blocks = k * full_set + (segs - 1) * nd + outputs * nd;
      break;
    }
  }
  int64_t rest = 2 * nd + 8 * N + 2 * N * V * eb + 2 * nd;
  if (c.dropout > 0.0 || fp8_matmul) rest += nd;
  if (fp8_matmul) rest += 4 * nd;
  return blocks + rest;
}

int64_t token_step_activation_bytes(int64_t B, int64_t T) { return 2 * B * T * 4; }

double mlp_train_flops_per_sample(int64_t params) { return 6.0 * static_cast<double>(params); }

double char_gpt_train_flops_per_token(CharGpt& model, int64_t T) {
  const CharGptConfig& c = model.config();
  return 6.0 * static_cast<double>(model.non_embedding_params()) + 12.0 * static_cast<double>(c.layers * c.dim * T);
}

}  // namespace trainlab
