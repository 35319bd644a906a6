// Per-layer sensitivity to quantization and pruning, and the allocation of bits or sparsity per
// layer under a budget (issue 20; what `trainlab-cli sensitivity` and `allocate` and the app's
// Sensitivity view run).
//
// Sensitivity: for every linear weight matrix (io/weights.h is_linear_weight) and every option --
// b-bit codes (tensor/quant_format.h's symmetric quantizer at the chosen granularity) or a
// magnitude-pruning sparsity s -- that one matrix alone is quantized (its values replaced by the
// dequantized s * q, what a quantized file loads as) or pruned, every other weight kept in fp32,
// and the model is evaluated on held-out data: loss (mean cross-entropy) and accuracy.
//
// Allocation: choose one option per layer minimising the predicted held-out loss
//   L(choice) = L_fp32 + sum_layers (L_layer(option) - L_fp32)
// (the one-layer-at-a-time increases taken as additive) subject to the budget
//   bits:      sum bits_l * n_l <= B * sum n_l               (B: average code bits a weight)
//   bytes:     sum (codes_l + fp16 scales_l) + other tensors <= N   (the quantized file's tensor bytes)
//   sparsity:  sum (1 - s_l) n_l <= (1 - S) sum n_l           (S: fraction of the weights removed)
// This is a multiple-choice knapsack; it is solved exactly (for the additive model) by dynamic
// programming over Pareto fronts: after each layer only the (cost, loss) points that no cheaper
// point beats are kept, so the front stays small (costs are multiples of few matrix sizes). The
// chosen allocation and the uniform one at the budget (every layer floor(B) bits, the most bits a
// layer that fit N bytes, or every layer pruned to S) are then applied and measured for real; the
// one with the better held-out accuracy (then loss) is kept, so interactions between layers that
// the additive model misses can never make the result worse than uniform on the held-out data.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compress/quant.h"
#include "io/safetensors.h"
#include "tensor/quant_format.h"

namespace trainlab {

struct EvalPoint {
  double loss = 0.0;
  double accuracy = 0.0;
};
// Evaluates a dense fp32 weights file (some values quantized or zeroed) on held-out data.
using FileEvaluator = std::function<EvalPoint(const SafeTensorsFile&)>;

struct SensitivityOptions {
  std::vector<int> bits = {2, 3, 4, 5, 6, 7, 8};
  QuantGranularity granularity = QuantGranularity::Channel;
  int group = 32;
  std::vector<double> sparsities = {0.5, 0.7, 0.8, 0.9, 0.95, 0.98};
  bool measure_bits = true, measure_sparsity = true;
  void validate() const;  // bits in 2..8, sparsities in (0, 1), each list ascending without repeats
};

struct LayerSensitivity {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<EvalPoint> bits;      // per SensitivityOptions::bits (empty when not measured)
  std::vector<EvalPoint> sparsity;  // per SensitivityOptions::sparsities
  int64_t numel() const { return rows * cols; }
};

struct SensitivityTable {
  SensitivityOptions options;
  EvalPoint baseline;  // the fp32 file
  std::vector<LayerSensitivity> layers;
  int64_t other_bytes = 0;  // tensors that are not linear weights (biases...), fp32
  nlohmann::json to_json() const;
};

// Throws Error naming `path` for a quantized file (sensitivity starts from fp32 weights) or a file
// without linear weights. `progress` (optional) is called after each evaluation (done, total).
SensitivityTable measure_sensitivity(const SafeTensorsFile& fp32, const std::string& path, const FileEvaluator& eval,
                                     const SensitivityOptions& o,
                                     const std::function<void(int, int)>& progress = {});

enum class BudgetKind { Bits, Bytes, Sparsity };
struct AllocationBudget {
  BudgetKind kind = BudgetKind::Bits;
  double value = 3.0;  // average bits (2..8), bytes, or sparsity (0..1)
  std::string label() const;  // "3 bits a weight", "12000 bytes", "90% sparsity"
};

struct LayerChoice {
  std::string name;
  int bits = 0;           // Bits / Bytes budgets
  double sparsity = 0.0;  // Sparsity budget
};

struct AllocationResult {
  AllocationBudget budget;
  std::vector<LayerChoice> allocated, uniform;  // the DP's choice; the uniform one at the budget
  double predicted_loss = 0.0;                  // the additive model's loss of `allocated`
  EvalPoint allocated_held_out, uniform_held_out;
  bool kept_uniform = false;                    // uniform measured better on the held-out data
  std::vector<LayerChoice> chosen() const { return kept_uniform ? uniform : allocated; }
  double average_bits = 0.0, sparsity = 0.0;    // of chosen()
  int64_t bytes = 0;                            // tensor bytes of the file written
  nlohmann::json to_json() const;
};

// The DP above over the measured table (no evaluation): one choice per layer of `table`.
// Throws Error naming the budget when even the cheapest options do not fit.
std::vector<LayerChoice> allocate_layers(const SensitivityTable& table, const AllocationBudget& budget,
                                         double* predicted_loss = nullptr);
// The uniform allocation at the budget (see above).
std::vector<LayerChoice> uniform_allocation(const SensitivityTable& table, const AllocationBudget& budget);
// How an allocation's quantized file is made from the fp32 file and its per-layer specs (a
// QuantPlan whose overrides name every linear weight): round to nearest when empty, or GPTQ / AWQ
// (compress/ptq_methods.h's quantize_by_method). The sensitivity table itself is always measured
// by rounding to nearest.
using FileQuantizer = std::function<SafeTensorsFile(const SafeTensorsFile& fp32, const QuantPlan& plan)>;
// The weights file of an allocation: a quantized file (one spec a layer, the table's granularity)
// for a bits or bytes budget, a dense fp32 file with the pruned weights zeroed for a sparsity
// budget. Both evaluate with `trainlab-cli eval`.
SafeTensorsFile apply_allocation(const SafeTensorsFile& fp32, const SensitivityTable& table,
                                 const std::vector<LayerChoice>& choice, const AllocationBudget& budget,
                                 const FileQuantizer& quantize = {});
// allocate_layers + uniform_allocation, both applied and measured with `eval`; the better kept.
AllocationResult allocate(const SafeTensorsFile& fp32, const SensitivityTable& table, const AllocationBudget& budget,
                          const FileEvaluator& eval, const FileQuantizer& quantize = {});

}  // namespace trainlab
