// The memory and FLOPs model of a training step: what the ledger (tensor/memory_ledger.h) should
// measure, by category, for a model, a batch and a precision. The trainer reports it with every
// step (StepMetrics::mem_predicted, which the app plots against the measured bytes and the report
// tabulates), the benchmarks print it, and tests hold it equal to the ledger.
//
// Element bytes `eb` are the precision policy's (train/precision.h: 4 for fp32/tf32, 2 otherwise).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "nn/transformer.h"
#include "tensor/memory_ledger.h"

namespace trainlab {

using MemoryByCategory = std::array<int64_t, kMemCategoryCount>;

struct TrainingMemoryInputs {
  int64_t params = 0;                 // trainable parameters
  int64_t element_bytes = 4;          // eb
  int64_t optimizer_state_bytes = 8;  // per parameter (Optimizer::state_bytes_per_param)
  int64_t data_bytes = 0;             // the resident data set (uploaded once, workspace)
  int64_t activation_bytes = 0;       // one of the activation formulas below
};

// Weights and gradients params * eb; optimizer params * (state + 4 for the fp32 master when
// eb < 4); workspace the resident data set; activations as given. Other workspaces (indices,
// statistics, the backend's scratch) and communication are not predicted.
MemoryByCategory predict_training_memory(const TrainingMemoryInputs& in);

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
// Backward's gradients otherwise reuse dead activations, so this is also the step's peak.
int64_t char_gpt_activation_bytes(const CharGpt& model, int64_t B, int64_t T, int64_t eb, bool fp8_matmul);

// The token-window step's own activation buffers (train/training_step.h): int32 inputs and
// labels, N = B*T each.
int64_t token_step_activation_bytes(int64_t B, int64_t T);

// FLOPs per sample of an MLP training step: 6 per weight (2 forward, 4 backward).
double mlp_train_flops_per_sample(int64_t params);
// FLOPs per token of a CharGpt training step, as the PyTorch peer counts them:
// 6 * non-embedding parameters + 12 * L * D * T (attention's two products, forward and backward).
double char_gpt_train_flops_per_token(CharGpt& model, int64_t T);

}  // namespace trainlab
