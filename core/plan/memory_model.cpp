#include "plan/memory_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "dist/shard.h"
#include "optim/lean_optimizers.h"
#include "plan/transformer_memory.h"
#include "util/error.h"

namespace trainlab {

namespace {
int64_t& at(MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; }
}  // namespace

int64_t precision_element_bytes(DType compute) { return compute == DType::F32 ? 4 : 2; }

std::pair<int64_t, int64_t> zero_shard_range(int64_t n, int64_t ranks, int64_t rank) {
  const dist::ShardRange s = dist::shard_range(n, ranks, rank);  // the split ZeRO runs with
  return {s.begin, s.end};
}

MemoryByCategory predict_rank_memory(const TrainingMemoryInputs& in, const ZeroSharding& z) {
  if (z.stage < 0 || z.stage > 3) throw Error("ZeRO stage " + std::to_string(z.stage) + ": expected 0, 1, 2 or 3");
  if (z.ranks < 1 || z.rank < 0 || z.rank >= z.ranks)
    throw Error("ZeRO rank " + std::to_string(z.rank) + " of " + std::to_string(z.ranks) +
                " ranks: expected a rank in [0, ranks - 1] and ranks >= 1");
  if (in.offload && z.stage > 0)
    throw Error("optim.offload cpu keeps the masters and optimizer state in host memory, which ZeRO stage " +
                std::to_string(z.stage) + " would shard: expected ZeRO stage 0 with offload");
  const auto [begin, end] = zero_shard_range(in.params, z.ranks, z.rank);
  const int64_t shard = end - begin;
  MemoryByCategory m{};
  at(m, MemCategory::Weights) = (z.stage >= 3 ? shard : in.params) * in.element_bytes;
  at(m, MemCategory::Gradients) = (z.stage >= 2 ? shard : in.params) * in.element_bytes;
  const int64_t held = z.stage >= 1 ? shard : in.params;
  const int64_t masters = held * (in.element_bytes == 4 ? 0 : 4);
  if (in.optimizer_state_total < 0)
    at(m, MemCategory::Optimizer) = held * in.optimizer_state_bytes + masters;
  else
    at(m, MemCategory::Optimizer) =
        masters + (held == in.params || in.params == 0 ? in.optimizer_state_total
                   : in.optimizer_state_total % in.params == 0  // a whole number of bytes a parameter: exact
                       ? in.optimizer_state_total / in.params * held
                       : std::llround(static_cast<double>(in.optimizer_state_total) * static_cast<double>(held) /
                                      static_cast<double>(in.params)));
  if (in.offload) {
    const int64_t state = in.optimizer_state_total >= 0 ? in.optimizer_state_total : in.params * in.optimizer_state_bytes;
    at(m, MemCategory::Optimizer) = 0;
    at(m, MemCategory::Host) = offload_host_bytes(in.params, in.element_bytes, state);
  }
  at(m, MemCategory::Activations) = in.activation_bytes;
  at(m, MemCategory::Workspace) = in.data_bytes;
  at(m, MemCategory::Communication) = in.communication_bytes;
  for (size_t c = 0; c < kMemCategoryCount; ++c) m[c] += in.device_copies[c];
  return m;
}

int64_t offload_host_bytes(int64_t params, int64_t element_bytes, int64_t optimizer_state_total) {
  return 4 * params + optimizer_state_total + params * element_bytes + (element_bytes < 4 ? params * element_bytes : 0);
}

std::vector<ParamShapeInfo> param_shape_infos(const std::vector<Parameter*>& params) {
  std::vector<ParamShapeInfo> out;
  out.reserve(params.size());
  for (const Parameter* p : params) out.push_back({p->shape, p->embedding});
  return out;
}

int64_t optimizer_state_bytes(const OptimizerOptions& o, const std::vector<ParamShapeInfo>& params) {
  int64_t total = 0;
  for (const ParamShapeInfo& p : params) {
    const int64_t n = shape_numel(p.shape);
    if (o.name == "adamw") {
      total += 8 * n;
    } else if (o.name == "sgd") {
      total += o.momentum != 0.0 ? 4 * n : 0;
    } else if (o.name == "lion") {
      total += (o.lion_state == "bf16" ? 2 : 4) * n;
    } else if (o.name == "adamw8bit") {
      total += o.stable_embedding && p.embedding ? 8 * n : 2 * n + 8 * ((n + o.block_size - 1) / o.block_size);
    } else if (o.name == "adafactor") {
      int64_t r = 0, c = 0;
      total += adafactor_factors(p.shape, r, c) ? 4 * (r + c) : 4 * n;
      if (o.adafactor_beta1 > 0.0) total += 4 * n;
    } else {
      throw Error("optim.name '" + o.name + "': expected adamw, sgd, adamw8bit, adafactor or lion");
    }
  }
  return total;
}

MemoryByCategory fp8_copy_bytes(const std::vector<LinearShape>& products) {
  MemoryByCategory m{};
  for (const LinearShape& p : products) {
    if (p.gelu || p.m % 16 || p.k % 16 || p.n % 16) continue;
    at(m, MemCategory::Activations) += 2 * p.m * p.k;
    at(m, MemCategory::Weights) += 2 * p.n * p.k;
    at(m, MemCategory::Gradients) += 2 * p.m * p.n;
  }
  return m;
}

std::vector<LinearShape> mlp_linear_shapes(const std::vector<int64_t>& sizes, int64_t batch, bool gelu) {
  std::vector<LinearShape> out;
  for (size_t i = 1; i < sizes.size(); ++i) out.push_back({batch, sizes[i - 1], sizes[i], gelu && i + 1 < sizes.size()});
  return out;
}

std::vector<LinearShape> char_gpt_linear_shapes(const CharGptConfig& c, int64_t layers, bool head, int64_t B, int64_t T,
                                                int64_t tp) {
  const int64_t N = B * T, D = c.dim;
  std::vector<LinearShape> out;
  for (int64_t l = 0; l < layers; ++l) {
    out.push_back({N, D, 3 * D / tp});  // qkv (column-parallel)
    out.push_back({N, D / tp, D});      // proj (row-parallel)
    out.push_back({N, D, 4 * D / tp});  // fc: its GELU is a pass of its own, the product has none
    out.push_back({N, 4 * D / tp, D});  // out
  }
  if (head) out.push_back({N, D, (c.padded_vocab() + tp - 1) / tp});
  return out;
}

MemoryByCategory predict_training_memory(const TrainingMemoryInputs& in) { return predict_rank_memory(in, {}); }

int64_t mlp_activation_bytes(const std::vector<int64_t>& sizes, int64_t batch, int64_t eb, bool gelu) {
  int64_t act = batch * sizes.front() * 4 + (eb == 4 ? 0 : batch * sizes.front() * eb) + batch * 4;
  for (size_t i = 1; i < sizes.size(); ++i) {
    const bool last = i + 1 == sizes.size();
    act += batch * sizes[i] * eb * ((gelu && !last) ? 2 : 1);
    if (i > 1) act += batch * sizes[i - 1] * eb;
  }
  return act + batch * sizes.back() * eb;
}

int64_t char_gpt_activation_bytes(const CharGptConfig& c, CheckpointPolicy policy, int64_t k, int64_t B, int64_t T,
                                  int64_t eb, bool fp8_matmul, int64_t tp, bool sequence_parallel) {
  ActivationInputs in;
  in.batch = B;
  in.seq = T;
  in.element_bytes = eb;
  in.fp8_matmul = fp8_matmul;
  in.step_buffers = false;
  in.sequence_parallel = sequence_parallel;
  recompute_of_policy(policy, k, in.recompute, in.recompute_every);
  return lab_stage_activations(c, in, {c.layers, true, true, tp}).total(1);
}

int64_t char_gpt_activation_bytes(const CharGpt& model, int64_t B, int64_t T, int64_t eb, bool fp8_matmul) {
  const TensorParallel& tp = model.tensor_parallel();
  return char_gpt_activation_bytes(model.config(), model.checkpoint_policy(), model.checkpoint_k(), B, T, eb, fp8_matmul,
                                   tp.size(), tp.sequence_parallel);
}

int64_t token_step_activation_bytes(int64_t B, int64_t T) { return 2 * B * T * 4; }

double mlp_train_flops_per_sample(int64_t params) { return 6.0 * static_cast<double>(params); }

double char_gpt_train_flops_per_token(CharGpt& model, int64_t T) { return transformer_train_flops_per_token(model.config(), T); }

}  // namespace trainlab
