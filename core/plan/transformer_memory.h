// The memory and FLOPs of a GPT-style transformer from its shape alone (no model is built), for
// one pipeline stage as one tensor-parallel rank holds it. The shape is nn/transformer.h's
// CharGptConfig: the lab's architecture (pre-norm GPT-2 blocks with biases, a learned position
// embedding of `context` rows, an untied head without bias, an MLP 4d wide), so that the planner,
// the trainer's prediction and the model agree parameter for parameter.
//
// Notation (../shared/docs/DOMAIN.md): L layers, d = h the width, a heads, s the sequence (a
// window of T tokens), b sequences per micro-batch, V the (padded) vocabulary, eb bytes per element
// of the precision (4 fp32/tf32, 2 otherwise), t the tensor-parallel degree, N = b*s tokens.
//
// Two counts of a layer's activations:
//   Lab       the buffers TrainLab's CharGpt allocates (nn/transformer.cpp), exact: attention is
//             fused (the s x s scores are never stored), dropout masks are redrawn from a hash
//             (never stored), LayerNorm statistics and the attention's log-sum-exp in fp32, and the
//             backward buffers. At t = 1 and one stage it is plan/memory_model.h's
//             char_gpt_activation_bytes (+ the step's int32 tokens), which tests hold equal to the
//             ledger. Recompute::Selective is CharGpt's selective policy (LayerNorm and GELU outputs
//             recomputed), Full every k blocks is its every-k policy (k = 1: every-block).
//   Megatron  Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
//             Models", section 4: per layer s*b*h*(34 + 5*a*s/h) bytes at eb = 2 with dropout
//             (11 s b h + 5 a s^2 b attention, 19 s b h MLP, 4 s b h LayerNorms), in general
//               16 s b h eb + 2 s b h [masks] + a s^2 b (2 eb + 1) [scores, softmax, its mask, dropout out]
//             and without dropout 16 s b h eb + a s^2 b eb. Tensor parallel (no sequence parallel)
//             keeps 4 s b h eb + 2 s b h whole and divides the rest by t: at eb = 2,
//             s b h (10 + 24/t + 5 a s/(h t)). Selective recomputation drops the a s^2 b term,
//             full recomputation stores each layer's input (2 s b h at eb = 2) only.
//
// A stage keeps its stored activations once per micro-batch in flight (1F1B: up to P on the first
// stage) and a working set once: what is recomputed during backward (Selective: one layer's
// recomputed part; Full: one group of k layers in full) and, for Lab, the backward buffers. The
// papers leave the working set out; the planner counts it because it must fit too.
#pragma once
#include <cstdint>
#include <string>

#include "nn/transformer.h"

namespace trainlab {

enum class Recompute : uint8_t { None, Selective, Full };
const char* recompute_name(Recompute r);  // "none", "selective", "full"
// Throws Error naming `what` (an option or key) and the three names.
Recompute recompute_from_name(const std::string& s, const std::string& what);

enum class ActivationCount : uint8_t { Lab, Megatron };
const char* activation_count_name(ActivationCount c);  // "lab", "megatron"
ActivationCount activation_count_from_name(const std::string& s, const std::string& what);

// The lab's checkpoint policy as a recomputation mode and group size (and back): off = None,
// selective = Selective, every-block = Full k=1, every-k = Full k.
void recompute_of_policy(CheckpointPolicy p, int64_t k, Recompute& r, int64_t& every);

// The part of the model one GPU holds: the layers of one pipeline stage, split t ways.
struct ModelSlice {
  int64_t layers = 0;  // blocks in the stage (L / P)
  bool first = true;   // holds the embeddings (tok, pos) and the model's input
  bool last = true;    // holds the final LayerNorm, the head and the loss
  int64_t tp = 1;      // t: the column/row-parallel matrices, the attention heads and the
                       // vocabulary (tok and head) are split t ways; LayerNorms, the biases of the
                       // row-parallel products (proj, out) and the position embedding are whole
};

// Parameters of one block on one of t ranks: (12 d^2 + 7 d) / t + 6 d (t = 1: 12 d^2 + 13 d).
int64_t transformer_block_params(const CharGptConfig& c, int64_t tp);
// Parameters a GPU of the slice holds: its blocks, plus V d / t + ctx d on the first stage and
// 2 d + V d / t on the last. The whole model (one slice, t = 1) is CharGpt::parameter_count().
int64_t transformer_slice_params(const CharGptConfig& c, const ModelSlice& s);

struct ActivationInputs {
  int64_t batch = 1;            // b: sequences per micro-batch
  int64_t seq = 1;              // s: tokens per sequence (the lab trains on windows of ctx tokens)
  int64_t element_bytes = 4;    // eb
  bool fp8_matmul = false;      // Lab: fp8 runs keep the branch buffer and d(f) of their own
  Recompute recompute = Recompute::None;
  int64_t recompute_every = 1;  // Full: layers per checkpointed group (k), clamped to the stage
  bool step_buffers = true;     // Lab: TrainingStep's int32 inputs (first stage) and labels (last)
  bool sequence_parallel = false;  // tp > 1: the residual stream, LayerNorms and dropout on s/t tokens
};

struct StageActivations {
  int64_t stored = 0;   // kept per micro-batch in flight
  int64_t working = 0;  // held once (recomputation, backward buffers, the output layer)
  int64_t total(int64_t in_flight) const { return in_flight * stored + working; }
};

StageActivations lab_stage_activations(const CharGptConfig& c, const ActivationInputs& in, const ModelSlice& s);
StageActivations megatron_stage_activations(const CharGptConfig& c, const ActivationInputs& in, const ModelSlice& s);
StageActivations stage_activations(ActivationCount count, const CharGptConfig& c, const ActivationInputs& in,
                                   const ModelSlice& s);

// Megatron's bytes one layer stores for one micro-batch (the paper's per-layer formula under the
// recomputation mode: None, Selective, or Full's one input).
int64_t megatron_layer_bytes(const CharGptConfig& c, const ActivationInputs& in, int64_t tp);

// Training FLOPs per token, as the PyTorch peer counts them: 6 * (parameters - the position
// embedding) + 12 L d s (the attention's two products: 4 L d s forward, 8 backward).
double transformer_train_flops_per_token(const CharGptConfig& c, int64_t seq);
// The extra FLOPs per token that recomputation costs: Full one more forward of the recomputed
// layers (2 * 12 d^2 + 4 d s each; Lab's every-k does not recompute the last group of each of the
// pp stages), Megatron's Selective the attention's forward products (4 L d s), Lab's Selective
// none worth counting (LayerNorm and GELU are elementwise).
double transformer_recompute_flops_per_token(const CharGptConfig& c, int64_t seq, Recompute r, int64_t every,
                                             ActivationCount count, int64_t pp = 1);

}  // namespace trainlab
