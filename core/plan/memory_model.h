// The memory and FLOPs model of a training step: what the ledger (tensor/memory_ledger.h) should
// measure, by category, for a model, a batch and a precision, on one rank or on one rank of a
// ZeRO-sharded data-parallel run. The trainer reports it with every step
// (StepMetrics::mem_predicted, which the app plots against the measured bytes and the report
// tabulates), the benchmarks print it, the planner (plan/planner.h) builds its per-GPU figures
// from the same functions, and tests hold it equal to the ledger.
//
// Element bytes `eb` are the precision policy's (train/precision.h: 4 for fp32/tf32, 2 otherwise;
// precision_element_bytes below).
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "config/optim_options.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"
#include "tensor/memory_ledger.h"

namespace trainlab {

using MemoryByCategory = std::array<int64_t, kMemCategoryCount>;

// Bytes per element of parameters, gradients and activations for a compute format: 4 for fp32
// (and tf32, whose products round fp32 inputs), 2 for the 16-bit formats and for fp8 (whose
// parameters are stored in bf16: nn/parameter.cpp). PrecisionPolicy::element_bytes() is this.
int64_t precision_element_bytes(DType compute);

struct TrainingMemoryInputs {
  int64_t params = 0;                 // trainable parameters (of this rank's model slice)
  int64_t element_bytes = 4;          // eb
  int64_t optimizer_state_bytes = 8;  // per parameter, when optimizer_state_total < 0
  int64_t optimizer_state_total = -1; // >= 0: the state's bytes for all params (optimizer_state_bytes())
  int64_t data_bytes = 0;             // the resident data set (uploaded once, workspace)
  int64_t activation_bytes = 0;       // one of the activation formulas below
  int64_t communication_bytes = 0;    // the rank's communication buffers, as its strategy allocates them
  MemoryByCategory device_copies{};   // what the device keeps beside the model (fp8_copy_bytes), unsharded
  bool offload = false;               // optim.offload cpu: masters and state in host memory (offload_host_bytes)
};

// optim.offload cpu (optim/offload.h): the host bytes kept on the device's behalf, counted as
// MemCategory::Host: the fp32 masters (4 n; in fp32 runs a copy of the device's weights), the
// optimizer state, the gradient staging (eb n) and in 16-bit runs the weight staging (eb n).
int64_t offload_host_bytes(int64_t params, int64_t element_bytes, int64_t optimizer_state_total);

// One parameter as the optimizer-state formula sees it: its shape, and whether it is an embedding.
struct ParamShapeInfo {
  Shape shape;
  bool embedding = false;
};
std::vector<ParamShapeInfo> param_shape_infos(const std::vector<Parameter*>& params);

// The bytes of optimizer state (without the fp32 master of 16-bit runs) for parameters of these
// shapes, exactly what optim/ allocates (the trainer, the planner, `trainlab-cli plan --optimizer`
// and the ledger tests use this one formula), per parameter of n elements:
//   adamw      8 n                     sgd   4 n with momentum, else 0
//   lion       4 n (fp32 momentum) or 2 n (bf16)
//   adamw8bit  2 n + 8 ceil(n / block) (two 8-bit codes an element, an fp32 absmax for m and v per
//              block); 8 n for embeddings with stable_embedding
//   adafactor  4 (r + c) for a factored [r, c] parameter (optim/lean_optimizers.h: r, c >= 2), 4 n
//              otherwise; plus 4 n with adafactor_beta1 > 0
// Throws Error naming optim.name for an unknown optimizer.
int64_t optimizer_state_bytes(const OptimizerOptions& o, const std::vector<ParamShapeInfo>& params);

// Weights and gradients params * eb; optimizer params * (state + 4 for the fp32 master when
// eb < 4), or with offload none on the device and offload_host_bytes as Host; workspace the
// resident data set; activations and communication as given; plus the device's copies. Other workspaces (indices, statistics, the backend's scratch) are not
// predicted. One rank, no sharding: predict_rank_memory(in, {}).
MemoryByCategory predict_training_memory(const TrainingMemoryInputs& in);

// ZeRO (Rajbhandari et al. 2020) over `ranks` data-parallel ranks: stage 1 shards the optimizer
// state (with the fp32 master in 16-bit runs), stage 2 also the gradients, stage 3 also the
// weights. A shard is a contiguous range of the flat parameter order (nn/flat_params.h).
struct ZeroSharding {
  int stage = 0;       // 0 (plain data parallel) .. 3
  int64_t ranks = 1;   // N, the data-parallel world size
  int64_t rank = 0;    // this rank, 0 .. N-1
};

// Rank `rank`'s shard [begin, end) of n elements split over `ranks`: ceil(n / ranks) elements
// each, in rank order, the last ones shorter (or empty). Rank 0's shard is the largest. This is
// dist::shard_range (dist/shard.h), the split ZeRO itself runs with.
std::pair<int64_t, int64_t> zero_shard_range(int64_t n, int64_t ranks, int64_t rank);

// The per-rank prediction of a ZeRO run (issue 17 calls this for its ledger tests and its
// trainer's mem_predicted): with S = the rank's shard length of in.params (zero_shard_range),
//   weights     (stage >= 3 ? S : params) * eb
//   gradients   (stage >= 2 ? S : params) * eb
//   optimizer   (stage >= 1 ? S : params) * (optimizer_state_bytes + (eb < 4 ? 4 : 0)), or with
//               optimizer_state_total >= 0 that total (times S / params at stage >= 1) + the masters
//   activations, communication, workspace (data) as given: the same on every rank.
// Mixed-precision Adam on N ranks: 2P/(N if stage>=3) + 2P/(N if stage>=2) + 12P/(N if stage>=1)
// (DOMAIN.md section 4). Throws Error on a stage outside 0..3 or a rank outside 0..ranks-1.
MemoryByCategory predict_rank_memory(const TrainingMemoryInputs& in, const ZeroSharding& z);

// An MLP's activations for one micro-batch of `batch` rows through layers of `sizes` (input,
// hidden..., classes): the gathered batch in fp32 plus its eb copy when eb < 4, the int32
// labels, each layer's output (and its pre-activation for GELU on hidden layers), each hidden
// layer's input gradient, and the logits' gradient. Exact for nn/linear.h's MLP and
// train/training_step.h's buffers.
int64_t mlp_activation_bytes(const std::vector<int64_t>& sizes, int64_t batch, int64_t eb, bool gelu);

// CharGpt's activation buffers for a training step of B windows of T tokens, exactly what it
// allocates (nn/transformer.cpp) under its checkpoint policy, plus the logits' gradient the loss
// writes. With N = B*T, D = dim, H = heads, V = padded vocabulary, L = layers:
//   a block's full set       15 N D eb (h1, qkv 3, att, x_mid, h2, pre 4, f 4) + 16 N (four fp32
//                            LayerNorm statistics) + 4 N H (attention's log-sum-exp)
//   a block's output x_out   N D eb
//   Off                      L full sets + L outputs
//   Selective                L sets without h1, h2, f (10 N D eb with x_out, + 16 N + 4 N H),
//                            plus one shared h1, h2, f (6 N D eb) recomputed per block
//   EveryK (EveryBlock k=1)  k full sets, segs - 1 kept segment inputs (segs = ceil(L/k)), and
//                            k - 1 outputs (k when k divides L: the last segment's last block)
//   always                   embedding output, final LayerNorm output (2 N D eb) + its
//                            statistics (8 N), logits and their gradient (2 N V eb), backward's
//                            dx and dh (2 N D eb)
//   dropout or fp8 matmuls   the branch buffer m_tmp (N D eb)
//   fp8 matmuls              d(f) of its own (4 N D eb)
// Backward's gradients otherwise reuse dead activations, so this is also the step's peak. The
// formula is plan/transformer_memory.h's lab_stage_activations for the whole model on one rank
// (without the step's tokens); k is the model's (CharGpt::checkpoint_k, already resolved).
int64_t char_gpt_activation_bytes(const CharGptConfig& c, CheckpointPolicy policy, int64_t k, int64_t B, int64_t T,
                                  int64_t eb, bool fp8_matmul, int64_t tp = 1,
                                  bool sequence_parallel = false);
int64_t char_gpt_activation_bytes(const CharGpt& model, int64_t B, int64_t T, int64_t eb, bool fp8_matmul);

// The CUDA backend's fp8 products (backend/cuda/fp8_gemm.h) cast, for each linear layer whose
// product runs on the fp8 units (rows m, inputs k and outputs n multiples of 16; no GELU epilogue),
// its input and the input's transpose to e4m3 (activations, 2 m k bytes), its weight and transpose
// (weights, 2 n k) and the output's gradient and transpose to e5m2 (gradients, 2 m n), and keeps
// them with the layer between steps. A CPU run rounds to fp8 in place and keeps none of these.
struct LinearShape {
  int64_t m = 0, k = 0, n = 0;  // rows (tokens or samples), inputs, outputs
  bool gelu = false;            // a GELU epilogue (not run in fp8)
};
MemoryByCategory fp8_copy_bytes(const std::vector<LinearShape>& products);
// The products of an MLP step (layer i: batch x sizes[i] -> sizes[i+1]; hidden layers GELU or ReLU).
std::vector<LinearShape> mlp_linear_shapes(const std::vector<int64_t>& sizes, int64_t batch, bool gelu);
// The products of `layers` CharGpt blocks (qkv, proj, fc, out) on one of t ranks, and the head when
// `head`, for B windows of T tokens.
std::vector<LinearShape> char_gpt_linear_shapes(const CharGptConfig& c, int64_t layers, bool head, int64_t B, int64_t T,
                                                int64_t tp = 1);

// The token-window step's own activation buffers (train/training_step.h): int32 inputs and
// labels, N = B*T each.
int64_t token_step_activation_bytes(int64_t B, int64_t T);

// FLOPs per sample of an MLP training step: 6 per weight (2 forward, 4 backward).
double mlp_train_flops_per_sample(int64_t params);
// FLOPs per token of a CharGpt training step, as the PyTorch peer counts them:
// 6 * non-embedding parameters + 12 * L * D * T (attention's two products, forward and backward);
// transformer_train_flops_per_token of the model's shape.
double char_gpt_train_flops_per_token(CharGpt& model, int64_t T);

}  // namespace trainlab
