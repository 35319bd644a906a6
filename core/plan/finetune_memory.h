// The memory of a fine-tuning run with adapters (core/finetune/, docs/FINETUNE.md) as lines of
// their own: the frozen base of the targeted products in its format (fp32, or NF4 with double-
// quantized scales for qlora), the other frozen weights, the adapters, their gradients and their
// optimizer state; qlora's one dequantization scratch (the largest target's W in the compute
// format); and for dora only, the effective weights W' = m (W + sBA) / ||W + sBA||_row that its
// products read and the products' weight-gradient scratch dL/dW' from which the adapters'
// gradients are taken (lora and qlora form neither: adapter products, finetune/adapters.h). The
// trainer measures these from the tensors it allocates and the planner (`trainlab-cli plan
// --finetune lora --rank 8`) predicts them from the shape alone: the same numbers
// (tests/unit/test_finetune.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/finetune_options.h"
#include "config/optim_options.h"
#include "nlohmann/json.hpp"

namespace trainlab {

struct FinetuneTarget {
  std::string module;  // PEFT's module path: "blocks.0.qkv", "head"
  int64_t out = 0, in = 0;
};

// The products finetune.targets names in a char-gpt of `layers` blocks, width `dim` and (padded)
// vocabulary `vocab`, in parameters() order: per block qkv [3d, d], proj [d, d], fc1 = fc [4d, d],
// fc2 = out [d, 4d]; then head [V, d]. Error when `rank` exceeds a target's smaller dimension
// (naming the target and both dimensions).
std::vector<FinetuneTarget> finetune_targets(int64_t layers, int64_t dim, int64_t vocab, const FinetuneOptions& o);

struct FinetuneMemory {
  std::string method, base_format;  // base_format: "fp32" or "nf4"
  int64_t base_weights = 0;         // weights of the targeted products
  int64_t base_bytes = 0;           // their frozen copy in base_format
  int64_t effective_bytes = 0;      // dora: W' of the targets (fp32 master + compute copy in 16-bit runs)
  int64_t dequant_scratch_bytes = 0;  // qlora: one target's W dequantized, the largest
  int64_t other_bytes = 0;          // the other frozen parameters (embeddings, norms, biases, ...)
  int64_t adapter_params = 0;
  int64_t adapter_bytes = 0;        // masters (+ compute copies in 16-bit runs)
  int64_t adapter_grad_bytes = 0;
  int64_t optimizer_bytes = 0;      // the optimizer's state over the adapters only
  int64_t product_grad_bytes = 0;   // dora: dL/dW' of every base parameter (workspace)
  double base_bits() const {
    return base_weights ? 8.0 * static_cast<double>(base_bytes) / static_cast<double>(base_weights) : 0.0;
  }
  nlohmann::json to_json() const;
  std::vector<std::string> lines() const;  // one line each, for the CLI and the run's notices
};

// The prediction: `model_params` every parameter of the base model, `element_bytes` the compute
// format's bytes (4 in fp32 runs).
FinetuneMemory predict_finetune_memory(const std::vector<FinetuneTarget>& targets, int64_t model_params,
                                       const FinetuneOptions& o, const OptimizerOptions& opt, int64_t element_bytes);

// The NF4 bytes of n weights: n/2 codes, one byte a block of 64, one fp32 a block of 256 block
// scales and one fp32 offset (finetune/nf4.h).
int64_t nf4_bytes(int64_t n);

}  // namespace trainlab
