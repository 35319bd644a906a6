// The memory and scale planner (issue 18): what a model needs per GPU, and how long a training
// step takes, on a layout of G = DP x TP x PP GPUs, before anyone buys them; and the search over
// layouts that fit. One model of memory and time, built from the functions the trainer's own
// prediction uses (plan/memory_model.h for the categories and ZeRO, plan/transformer_memory.h for
// a transformer's parameters and activations from its shape, plan/step_time.h for the time).
// `trainlab-cli plan` and the app's Planner view are two views of these calls; docs/PLANNER.md
// states every formula with its source and worked examples.
//
// A layout places TP innermost (consecutive GPUs, one node when it fits), then PP, then DP, as
// Megatron-LM does. Pipeline stages hold L/P layers each (the first also the embeddings, the last
// the final LayerNorm and the head); under 1F1B stage i keeps the activations of
// min(P - i, M) micro-batches. The figures per GPU are those of the stage with the most bytes.
//
// With P > 1 the pipeline schedule (dist/pipeline_schedule.h: gpipe, 1f1b, interleaved, zb-h1;
// 1f1b by default) sets the bubble and the micro-batches in flight: the bubble fraction is the
// simulated schedule's idle fraction at F = B = W = 1 (backward 2x forward; a chunk 1/v of that
// under interleaving), and a stage's in-flight count its peak held activations (interleaved:
// chunk units / v, rounded up). Where P M v exceeds 2^16 actions the planner takes the closed
// forms (pipeline_bubble, pipeline_peak_in_flight) that the tests hold equal to the simulation.
// With P = 1 there is no pipeline and the schedule plays no part.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "dist/pipeline_schedule.h"
#include "plan/memory_model.h"
#include "plan/step_time.h"
#include "plan/transformer_memory.h"

namespace trainlab {

// A GPU the planner knows: its memory, its peaks (backend.h's datasheet_peaks of its compute
// capability) and the default bandwidths of its links, per GPU and direction.
struct GpuSpec {
  std::string name;                // "h200"
  std::string label;               // "NVIDIA H200 SXM"
  int compute_capability = 90;
  double memory_bytes = 0;         // datasheet (10^9 bytes a GB)
  double nvlink_bytes_per_s = 0;   // within a node
  double network_bytes_per_s = 0;  // between nodes (one NIC per GPU)
};
const std::vector<GpuSpec>& gpu_specs();  // h100, h200, a100
// Throws Error naming `what` (the option) and the known names.
const GpuSpec& gpu_spec(const std::string& name, const std::string& what);
// FLOP/s of products on `compute` operands in `mode` on the GPU (0 where it has no such units).
double gpu_peak_flops(const GpuSpec& g, DType compute, MatmulMode mode);

enum class PlanModelKind : uint8_t { Params, Mlp, Transformer };

struct PlanModel {
  PlanModelKind kind = PlanModelKind::Transformer;
  std::string name = "transformer";  // a preset's name, "transformer" (a shape) or "params"
  int64_t params = 0;                // Params: the count (weights, gradients, optimizer only)
  int64_t sample_tokens = 1;         // Params: tokens per sample (for the FLOPs)
  std::vector<int64_t> mlp_sizes;    // Mlp: input, hidden..., classes
  bool mlp_gelu = false;
  CharGptConfig transformer;         // Transformer: the shape; context is the sequence s
  int64_t total_params() const;
  // The parameters' shapes, in the model's order (Params: one square matrix of about `params`
  // elements, for the optimizers whose state depends on shape).
  std::vector<ParamShapeInfo> param_shapes() const;
  int64_t tokens_per_sample() const;  // s, 1 for an MLP's row, sample_tokens
  double train_flops_per_token() const;
};

// The lab's own models: digits-mlp (64-256-256-10, ReLU: 85,002 parameters) and the character
// transformer's presets char-gpt-tiny, -small, -gpt2 (CharGptConfig::preset, over tinyshakespeare's
// 65 characters). Throws Error naming `what` and the names for another.
const std::vector<std::string>& plan_model_presets();
PlanModel plan_model_preset(const std::string& name, const std::string& what);

// What stays the same between layouts: the model, the micro-batch, the precision, the optimizer,
// the machines. element_bytes, fp8_matmul and peak_flops follow the precision (the caller fills
// them from train/precision.h's policy: plan_setup_precision in train/plan_check.h).
struct PlanSetup {
  PlanModel model;
  int64_t micro_batch = 1;  // b: samples (sequences) per micro-batch
  std::string precision = "fp32";
  int64_t element_bytes = 4;
  bool fp8_matmul = false;
  bool fp8_copies = false;  // the fp8 units' per-layer casts (memory_model.h's fp8_copy_bytes): fp8 on a GPU
  std::string optimizer = "adamw";
  // Bytes of optimizer state a parameter: memory_model.h's optimizer_state_bytes over the model's
  // parameter shapes (PlanModel::param_shapes) divided by their count (2.0039 for adamw8bit).
  double optimizer_state_bytes = 8;
  // optim.offload cpu: masters and optimizer state in host memory (MemCategory::Host, not part of
  // a GPU's bytes); only with ZeRO stage 0.
  bool offload = false;
  ActivationCount count = ActivationCount::Lab;
  std::string gpu = "h200";
  double gpu_memory_bytes = 141e9;
  double peak_flops = 989.4e12;  // one GPU, the precision in use
  double nvlink_bytes_per_s = 450e9, network_bytes_per_s = 50e9;
  double mfu = 0.4;  // measured model FLOPs utilisation of a run without recomputation
  int64_t gpus = 1, nodes = 1;
};

struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;  // ZeRO stage over the DP ranks
  Recompute recompute = Recompute::None;
  int64_t recompute_every = 1;  // Full: layers per checkpointed group
  int64_t micro_batches = 1;    // m per optimizer step (gradient accumulation; the pipeline's)
  bool sequence_parallel = false;  // TP > 1: the residual stream, LayerNorms and dropout on s/TP tokens
  dist::PipelineSchedule schedule = dist::PipelineSchedule::OneFOneB;  // PP > 1
  int64_t virtual_stages = 1;  // interleaved: model chunks a GPU (PP x this divides the layers)
};

struct StagePlan {
  int64_t index = 0, layers = 0, in_flight = 1;
  int64_t params = 0;  // held by one GPU of the stage (before ZeRO's sharding)
  MemoryByCategory bytes{};
  int64_t total() const;  // the GPU's bytes: every category but Host (offload's host memory)
};

struct PlanResult {
  Layout layout;
  std::vector<StagePlan> stages;
  size_t worst = 0;             // the stage with the most bytes per GPU
  MemoryByCategory per_gpu{};   // stages[worst].bytes
  int64_t per_gpu_total = 0;
  bool fits = false;            // per_gpu_total <= the GPU's memory
  bool activations_known = true;  // false for a model given by its parameter count only
  int64_t params_total = 0;
  StepTime time;
  std::string pipeline_warning;  // dist::pipeline_warning's note (m < p under 1f1b), "" when none
};

// Throws Error naming the option (as trainlab-cli plan spells it) and the expected range:
// "--tp 5 must divide --heads 12", "--mfu nan: expected a number in (0, 1]".
void validate_plan(const PlanSetup& s, const Layout& l);
PlanResult plan_layout(const PlanSetup& s, const Layout& l);

// The layouts to search; an empty list means every value that suits the model and the GPUs:
// TP a divisor of the GPUs and the heads, PP of the GPUs and the layers, DP = G / (TP x PP), ZeRO
// 0-3 (0 alone when DP = 1), all three recomputations (transformers). The global batch stays
// fixed, so m = global / (b x DP) (layouts where that is not a whole number are skipped).
struct SearchSpace {
  std::vector<int64_t> tp, pp;
  std::vector<int> zero;
  std::vector<Recompute> recompute;
  int64_t recompute_every = 1;
  int64_t global_batch = 0;   // samples per optimizer step; 0: b x micro_batches x G
  int64_t micro_batches = 1;  // for the default global batch
  // The pipeline schedule of the layouts with PP > 1 (those that do not suit it are skipped:
  // interleaved needs M a multiple of PP and PP x virtual stages dividing the layers).
  dist::PipelineSchedule schedule = dist::PipelineSchedule::OneFOneB;
  int64_t virtual_stages = 1;
};
struct SearchResult {
  std::vector<PlanResult> fit;  // the layouts that fit, fastest step first (then fewer bytes)
  int64_t considered = 0;       // layouts evaluated
  int64_t global_batch = 0;
};
SearchResult search_layouts(const PlanSetup& s, const SearchSpace& space);

// The schedule of a layout with PP > 1 (throws Error naming the options when it does not suit).
dist::PipelineTable plan_schedule(const Layout& l);

// JSON of a plan (`trainlab-cli plan --json`): model, setup, layout (with schedule and
// virtual_stages), per_gpu (weights_bytes,
// gradients_bytes, optimizer_bytes, activations_bytes, communication_bytes, total_bytes, stage),
// stages, fits, time (step_s, compute_s, communication_s and its parts, bubble_s, bubble_fraction,
// FLOPs, tokens, bytes sent per GPU).
Json plan_setup_json(const PlanSetup& s);
Json plan_result_json(const PlanResult& r);

}  // namespace trainlab
