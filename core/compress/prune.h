// Pruning (DOMAIN.md section 5): masks on the weight matrices of linear layers, kept applied by
// the optimizers (AdamW and SGD multiply the updated master by Parameter::mask, so a pruned
// weight stays exactly 0 through weight decay and momentum).
//
//  * magnitude: remove the smallest |w|, per layer (each matrix to the target sparsity) or with
//    one global threshold over all pruned matrices;
//  * 2:4: in every 4 consecutive weights along the input dimension keep the 2 largest |w|;
//  * gradual (Zhu and Gupta, 2017): at t = t0, t0+dt, ..., t0+n*dt the sparsity rises to
//    s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n*dt))^3;
//  * structured: remove whole hidden units of an MLP by the L2 norm of their incoming weights and
//    bias, giving a smaller dense MLP with the same outputs as the masked dense one;
//  * lottery ticket: rewind the surviving weights to their values at a snapshot (initialisation).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/model.h"

namespace trainlab {

enum class PruneScope { Layer, Global };

// Masks (0/1) keeping the largest |w|: `weights[i]` has n_i values; the result has one mask each.
// Ties at the threshold are broken by index so that exactly round(sparsity * n) weights go.
std::vector<std::vector<float>> magnitude_masks(const std::vector<std::vector<float>>& weights, double sparsity,
                                                PruneScope scope);
// 2:4 along the input dimension of a [rows, cols] matrix (cols % 4 == 0): 2 kept in every 4.
std::vector<float> mask_2_4(const std::vector<float>& w, int64_t rows, int64_t cols);
bool is_2_4(const std::vector<float>& w, int64_t rows, int64_t cols);  // at most 2 nonzeros in each 4

// Zhu–Gupta cubic schedule.
struct GradualSchedule {
  long start = 0, interval = 10;
  int n = 10;  // pruning steps after the first: the schedule ends at start + n * interval
  double initial = 0.0, final_sparsity = 0.9;
  bool is_pruning_step(long t) const;
  // Target sparsity at step t: 0 before start, the cubic value at and after each pruning step
  // (held between them), final_sparsity from start + n*interval on.
  double sparsity_at(long t) const;
};

// The weights a pruning method touches: every linear weight matrix (rank 2, name *.weight);
// with include_output false the last one (the classifier) is left dense.
std::vector<Parameter*> prunable_parameters(Model& model, bool include_output = true);

// Host copies of the parameters' masters, and back.
std::vector<std::vector<float>> download_masters(Backend& be, const std::vector<Parameter*>& ps);
// Installs masks (allocating Parameter::mask) and zeroes the pruned masters and values at once.
void apply_masks(Backend& be, const std::vector<Parameter*>& ps, const std::vector<std::vector<float>>& masks);
// Removes the masks (the weights stay as they are).
void clear_masks(const std::vector<Parameter*>& ps);

struct LayerSparsity {
  std::string name;
  int64_t numel = 0, zeros = 0;
  double sparsity() const { return numel ? static_cast<double>(zeros) / static_cast<double>(numel) : 0.0; }
};
struct SparsityReport {
  std::vector<LayerSparsity> layers;  // the linear weight matrices
  int64_t weights = 0, zeros = 0;     // over those matrices
  int64_t dense_bytes = 0;            // every parameter in fp32
  // Sparse encoding: per matrix a bitmap (1 bit a weight) plus the fp32 nonzeros, biases dense.
  int64_t bitmap_bytes = 0;
  // CSR: fp32 value + uint16 column per nonzero, uint32 row pointers, biases dense.
  int64_t csr_bytes = 0;
  double sparsity() const { return weights ? static_cast<double>(zeros) / static_cast<double>(weights) : 0.0; }
  int64_t sparse_bytes() const { return std::min(bitmap_bytes, csr_bytes); }
  nlohmann::json to_json() const;
};
SparsityReport sparsity_report(Backend& be, Model& model);

// Structured pruning of an MLP's hidden units: in each hidden layer remove round(fraction * width)
// units with the smallest L2 norm of (incoming weights, bias).
struct StructuredPlan {
  std::vector<std::vector<int64_t>> kept;  // per hidden layer, the kept unit indices (ascending)
};
StructuredPlan plan_structured(Backend& be, Mlp& model, double fraction);
// The smaller dense MLP holding the kept units' weights.
std::unique_ptr<Mlp> build_structured(Backend& be, Mlp& model, const StructuredPlan& plan);
// Masks on the dense model that give it the same function (rows and biases of removed units,
// and their columns in the next layer, set to 0). Installs them with apply_masks (biases are
// zeroed without a mask: their rows get no update through the mask of the weights, so call this
// after training or keep the biases masked yourself).
void apply_structured_masks(Backend& be, Mlp& model, const StructuredPlan& plan);

// Median time (ms) of a forward pass over `rows` random inputs (inference, no backward).
double time_forward_ms(Backend& be, Model& model, int64_t rows, int repeats);

}  // namespace trainlab
