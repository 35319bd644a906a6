#include "plan/transformer_memory.h"

#include <algorithm>

#include "util/error.h"

namespace trainlab {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

Recompute recompute_from_name(const std::string& s, const std::string& what) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (s == recompute_name(r)) return r;
  throw Error(what + " '" + s + "': expected none, selective or full");
}

const char* activation_count_name(ActivationCount c) { return c == ActivationCount::Lab ? "lab" : "megatron"; }

ActivationCount activation_count_from_name(const std::string& s, const std::string& what) {
  if (s == "lab") return ActivationCount::Lab;
  if (s == "megatron") return ActivationCount::Megatron;
  throw Error(what + " '" + s + "': expected lab (TrainLab's own buffers) or megatron (Korthikanti et al. 2022)");
}

void recompute_of_policy(CheckpointPolicy p, int64_t k, Recompute& r, int64_t& every) {
  every = 1;
  switch (p) {
    case CheckpointPolicy::Off: r = Recompute::None; break;
    case CheckpointPolicy::Selective: r = Recompute::Selective; break;
    case CheckpointPolicy::EveryBlock: r = Recompute::Full; break;
    case CheckpointPolicy::EveryK:
      r = Recompute::Full;
      every = std::max<int64_t>(1, k);
      break;
  }
}

int64_t transformer_block_params(const CharGptConfig& c, int64_t tp) {
  const int64_t D = c.dim;
  // Split: qkv (3 d^2 + 3 d), proj's weight (d^2), fc (4 d^2 + 4 d), out's weight (4 d^2).
  // Whole: ln1, ln2 (4 d), proj's and out's biases (2 d), added after the row-parallel sum.
  return (12 * D * D + 7 * D) / tp + 6 * D;
}

int64_t transformer_slice_params(const CharGptConfig& c, const ModelSlice& s) {
  const int64_t D = c.dim, V = ceil_div(c.padded_vocab(), s.tp);
  int64_t p = s.layers * transformer_block_params(c, s.tp);
  if (s.first) p += V * D + c.context * D;  // tok (vocabulary-parallel), pos (whole)
  if (s.last) p += 2 * D + V * D;           // final LayerNorm, head
  return p;
}

// CharGpt's buffers (nn/transformer.h, Acts): a block's full set is h1, qkv (3), att, x_mid, h2,
// pre (4), f (4) = 15 N d eb, with the LayerNorms' fp32 mean and rstd (16 N) and the attention's
// fp32 log-sum-exp (4 N a); its output x_out is N d eb more. Of these, qkv, att, pre, f and the
// log-sum-exp are per head or per MLP column, so t ranks would each hold 1/t of them.
//
// Tensor parallelism (t ranks) splits the per-head and per-column buffers; with sequence
// parallelism the whole ones (the residual stream, LayerNorm outputs and statistics, dx, dh, the
// branch buffer, which it always uses) hold R = N/t rows, and three [N, d] buffers gather rows and
// take the row-parallel partial sums, with the LayerNorm gradients' scratch (4 d). The
// vocabulary-parallel embedding keeps its ids (int32 [N]), its table with a zero row and that
// table's gradient ((V/t + 1) d each) and the position table's gradient (ctx d).
StageActivations lab_stage_activations(const CharGptConfig& c, const ActivationInputs& in, const ModelSlice& s) {
  const int64_t N = in.batch * in.seq, D = c.dim, H = c.heads, eb = in.element_bytes, t = s.tp;
  const bool sp = in.sequence_parallel && t > 1;
  const int64_t R = sp ? N / t : N;
  const int64_t nd = N * D * eb, rd = R * D * eb, stats = 16 * R, lse = 4 * N * H / t;
  const int64_t set_whole = 3 * rd + stats, set_split = 12 * nd / t + lse, full_set = set_whole + set_split;
  const int64_t L = s.layers;
  StageActivations a;
  switch (in.recompute) {
    case Recompute::None: a.stored += L * (full_set + rd); break;
    case Recompute::Selective:
      // Kept per block: x_out, x_mid, the statistics, qkv, att, pre; h1, h2, f shared and recomputed.
      a.stored += L * (2 * rd + stats + 8 * nd / t + lse);
      a.working += 2 * rd + 4 * nd / t;
      break;
    case Recompute::Full: {
      // Every-k: the residual stream at each later segment's start is kept; k full sets are the
      // scratch the segments are recomputed into (the last segment stays from the forward), with
      // k - 1 outputs (k when k divides the layers: the last segment's last block writes its own).
      const int64_t k = std::clamp<int64_t>(in.recompute_every, 1, std::max<int64_t>(1, L));
      const int64_t segs = ceil_div(L, k);
      a.stored += (segs - 1) * rd;
      a.working += k * full_set + (k - 1 + (L % k == 0 ? 1 : 0)) * rd;
      break;
    }
  }
  if (s.first) a.stored += rd;  // the embedding output (the first block's input)
  if (s.last) a.working += rd + 8 * R + 2 * N * ceil_div(c.padded_vocab(), t) * eb;  // final LN, logits, their gradient
  a.working += 2 * rd;                                                     // backward's dx and dh
  if (c.dropout > 0.0 || in.fp8_matmul || sp) a.working += rd;             // the branch buffer
  if (in.fp8_matmul) a.working += 4 * nd / t;                              // d(f) of its own
  if (sp) a.working += 3 * nd + 4 * D * eb;  // gathered input, gathered gradient, partial sums; LN gradients
  if (t > 1 && s.first) a.working += 4 * N + (2 * (ceil_div(c.padded_vocab(), t) + 1) + c.context) * D * eb;
  if (in.step_buffers) a.working += (s.first ? 4 * N : 0) + (s.last ? 4 * N : 0);  // int32 inputs, labels
  return a;
}

int64_t megatron_layer_bytes(const CharGptConfig& c, const ActivationInputs& in, int64_t tp) {
  const int64_t sbh = in.batch * in.seq * c.dim, eb = in.element_bytes;
  if (in.recompute == Recompute::Full) return sbh * eb;  // the layer's input
  const bool masks = c.dropout > 0.0;
  // Whole on every rank: both LayerNorms' inputs, the QKV and MLP inputs (4 s b h eb) and the two
  // residual dropout masks (1 byte each). Split: Q, K, V, the projection's input, GELU's input and
  // output (12 s b h eb).
  // Sequence parallelism (Korthikanti et al. 2022) splits the whole part t ways too.
  const int64_t whole = (4 * sbh * eb + (masks ? 2 * sbh : 0)) / (in.sequence_parallel && tp > 1 ? tp : 1),
                split = 12 * sbh * eb / tp;
  if (in.recompute == Recompute::Selective) return whole + split;
  // Scores: softmax output (eb), its dropout mask (1) and the dropout's output (eb), a s^2 b each.
  const int64_t scores = c.heads * in.seq * in.seq * in.batch;
  return whole + split + (masks ? scores * (2 * eb + 1) : scores * eb) / tp;
}

StageActivations megatron_stage_activations(const CharGptConfig& c, const ActivationInputs& in, const ModelSlice& s) {
  const int64_t N = in.batch * in.seq, D = c.dim, eb = in.element_bytes, t = s.tp, L = s.layers;
  StageActivations a;
  ActivationInputs none = in;
  none.recompute = Recompute::None;
  const int64_t full_layer = megatron_layer_bytes(c, none, t);
  switch (in.recompute) {
    case Recompute::None: a.stored += L * full_layer; break;
    case Recompute::Selective:
      a.stored += L * megatron_layer_bytes(c, in, t);
      a.working += full_layer - megatron_layer_bytes(c, in, t);  // one layer's recomputed attention core
      break;
    case Recompute::Full: {
      const int64_t k = std::clamp<int64_t>(in.recompute_every, 1, std::max<int64_t>(1, L));
      a.stored += ceil_div(L, k) * megatron_layer_bytes(c, in, t);  // each group's input
      a.working += k * full_layer;                                 // one group recomputed in full
      break;
    }
  }
  if (s.first && c.dropout > 0.0) a.stored += N * D;  // the embedding's dropout mask
  // Output layer (section 4.3, without sequence parallel): the final LayerNorm's input and the
  // head's input, and the logits in fp32 for the cross-entropy, vocabulary-parallel.
  if (s.last) a.working += 2 * N * D * eb + 4 * N * ceil_div(c.padded_vocab(), t);
  return a;
}

StageActivations stage_activations(ActivationCount count, const CharGptConfig& c, const ActivationInputs& in,
                                   const ModelSlice& s) {
  return count == ActivationCount::Lab ? lab_stage_activations(c, in, s) : megatron_stage_activations(c, in, s);
}

double transformer_train_flops_per_token(const CharGptConfig& c, int64_t seq) {
  const double params = static_cast<double>(transformer_slice_params(c, {c.layers, true, true, 1}));
  const double pos = static_cast<double>(c.context * c.dim);
  return 6.0 * (params - pos) + 12.0 * static_cast<double>(c.layers * c.dim * seq);
}

double transformer_recompute_flops_per_token(const CharGptConfig& c, int64_t seq, Recompute r, int64_t every,
                                             ActivationCount count, int64_t pp) {
  const double D = static_cast<double>(c.dim), s = static_cast<double>(seq);
  const double layer_forward = 2.0 * 12.0 * D * D + 4.0 * D * s;
  switch (r) {
    case Recompute::None: return 0.0;
    case Recompute::Selective: return count == ActivationCount::Megatron ? 4.0 * D * s * static_cast<double>(c.layers) : 0.0;
    case Recompute::Full: {
      const int64_t per_stage = c.layers / std::max<int64_t>(1, pp);
      const int64_t k = std::clamp<int64_t>(every, 1, std::max<int64_t>(1, per_stage));
      const int64_t recomputed = count == ActivationCount::Lab ? (ceil_div(per_stage, k) - 1) * k : per_stage;
      return layer_forward * static_cast<double>(recomputed * std::max<int64_t>(1, pp));
    }
  }
  return 0.0;
}

}  // namespace trainlab
