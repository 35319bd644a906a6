// CharGpt: the character-level GPT of issue 4, exactly the PyTorch peer's module
// (../shared/bench/peer_torch.py, CharGPT):
//
//   x = tok[idx] + pos[t]                                         tok [V, d], pos [ctx, d]
//   per block i (blocks.i.*), pre-norm:
//     x = x + proj(attn(qkv(ln1(x))))      qkv: Linear(d, 3d) (q | k | v), causal, H heads, scale 1/sqrt(d/H)
//     x = x + out(gelu(fc(ln2(x))))        fc: Linear(d, 4d), exact erf GELU (F.gelu), out: Linear(4d, d)
//   logits = head(ln(x))                   head: Linear(d, V) without bias (untied from tok)
//
// Names and layouts are the peer's state_dict: tok.weight, pos.weight, blocks.i.{ln1,ln2,qkv,proj,
// fc,out}.{weight,bias}, ln.{weight,bias}, head.weight; Linear weights are [out, in].
// Initialisation is PyTorch's default for these modules: Linear W, b ~ U(-1/sqrt(in), 1/sqrt(in));
// Embedding ~ N(0, 1); LayerNorm weight 1, bias 0 (eps 1e-5). (nanoGPT's N(0, 0.02) scheme is
// not used: the peer does not use it either.)
//
// Vocabulary padding (model.pad_vocab): tok and head get ceil(V/64)*64 rows; the extra tokens
// never occur, their logits take part in the softmax and are trained down (as nanoGPT's 50304).
// Padded files have [Vpad, d] shapes, so the peer loads them only when built with that vocabulary.
//
// Activation checkpointing (CheckpointPolicy), with bit-identical gradients for every policy
// (recomputation repeats the same deterministic operations on the same inputs):
//   Off        every block keeps its activations (x_in, h1, qkv, att, lse, x_mid, h2, pre, f).
//   EveryK     the residual stream is kept at the start of every segment of k blocks; backward
//              recomputes one segment's forward at a time (the last segment's activations are
//              still resident after the forward, so it is not recomputed). EveryBlock is k = 1.
//   Selective  keeps the residual stream and the matrix-product outputs (qkv, attention output,
//              fc pre-activation, softmax statistics); recomputes the LayerNorm outputs and the
//              GELU output during backward. Attention scores are never kept by any policy.
// Dropout (model.dropout = p, training forwards only): inverted dropout on the embedding output
// and on each block's two residual branches (after the attention projection and after the MLP's
// output product), as GPT-2/nanoGPT's resid_dropout. The attention probabilities are not dropped:
// the fused attention never materialises them. Masks are redrawn from per-forward seeds
// (Backend::dropout), so checkpoint recomputation and backward see the same masks without storing
// them, and the CPU and CUDA backends draw identical masks.
//
// Tensor parallelism (TensorParallel with t ranks, nn/tensor_split.h; Megatron-LM's layout):
//   tok, head      vocabulary-parallel: rank r holds rows [r c, (r+1) c) of the (padded) vocabulary,
//                  c = ceil(V/t). The embedding looks up the tokens in its rows (zero for the
//                  others) and the group sums; the loss is vocab_parallel_xent.
//   qkv, fc        column-parallel: the rank's heads' q, k and v rows (H/t heads), 4d/t rows of fc.
//   proj, out      row-parallel: the matching d/t and 4d/t columns; their products are partial
//                  sums that the group reduces, the bias (whole) added once (by rank 0's part).
//   LayerNorms, pos, proj's and out's biases   whole on every rank.
// Without sequence parallelism the residual stream is whole on every rank: one all-reduce after
// each row-parallel product (forward) and one of each column-parallel product's input gradient
// (backward); whole-parameter gradients come out equal on every rank. With it the residual
// stream, the LayerNorms and dropout hold rows [r N/t, (r+1) N/t) of the micro-batch's N = B T
// tokens: an all-gather of the LayerNorm output before each column-parallel product (again in
// backward, for its weight gradient, instead of keeping the gathered copy), a reduce-scatter
// after each row-parallel one, and the mirror images in backward; the LayerNorms' gradients are
// then partial sums over the rank's rows, reduced over the group. Dropout masks are the unsplit
// run's (Backend::dropout's `first`). With t = 1 every pass is the one-rank code, bit for bit.
//
// Pipeline stages (PipelineSlice, dist.pp; the runtime drives them): a stage holds blocks
// [first, last), the embedding when it is the first stage and the final LayerNorm with the head
// when it is the last. Its parameters start from the whole model's values (every random draw of
// the whole model is made, the stage keeps its own), so p stages together are the one-rank model.
// stage_forward takes the tokens (first stage) or the previous stage's output and returns the
// logits (last stage) or its own output; stage_backward takes their gradient and returns the
// input gradient to send back. The last block's proj and out bias gradients at a cut are the
// column sums of the received gradient, taken by the same routine the fused LayerNorm backward
// uses (bit-identical on the CPU). Several micro-batches in flight: swap_activations keeps each
// one's activations and dropout index in a slot of its own.
#pragma once
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nn/model.h"
#include "nn/tensor_split.h"

namespace trainlab {

enum class CheckpointPolicy : uint8_t { Off, EveryBlock, EveryK, Selective };
CheckpointPolicy checkpoint_policy_from_name(const std::string& s);
const char* checkpoint_policy_name(CheckpointPolicy p);

struct CharGptConfig {
  int64_t vocab = 65;         // real vocabulary (characters)
  bool pad_vocab = false;     // pad tok/head rows to a multiple of 64
  int64_t layers = 2, heads = 4, dim = 128, context = 64;
  double dropout = 0.0;
  std::string chars;          // the vocabulary itself, UTF-8, ascending code points (stored for generation)
  int64_t padded_vocab() const { return pad_vocab ? (vocab + 63) / 64 * 64 : vocab; }
  nlohmann::json to_json() const;
  static CharGptConfig from_json(const nlohmann::json& j);
  // Preset by name: tiny (2 x 4 x 128, ctx 64), small (6 x 6 x 384, ctx 256), gpt2 (12 x 12 x 768, ctx 1024).
  static CharGptConfig preset(const std::string& name);
  void validate() const;  // throws Error naming the bad dimension
};

// A pipeline stage's share of the blocks (the whole model by default).
struct PipelineSlice {
  int64_t first = 0, last = -1;  // blocks [first, last); last -1: to the end
  bool embedding = true;         // tok and pos (the first stage)
  bool head = true;              // the final LayerNorm, the head and the loss (the last stage)
};

// A frozen base whose products carry adapters beside them (finetune/adapters.h: LoRA, QLoRA).
// With a hook set (CharGpt::set_product_hook) the model computes no parameter gradient at all:
// each product's backward is dx = dy W plus the hook's terms, its weight gradient never formed.
class ProductHook {
 public:
  virtual ~ProductHook() = default;
  // The operand of w's product: w.value, or (QLoRA) a scratch the hook fills now.
  virtual const Tensor& weight(Backend& be, const Parameter& w) = 0;
  // y += s (x A^T) B^T when w carries an adapter.
  virtual void adapter_forward(Backend& be, const Parameter& w, const Tensor& x, Tensor& y) = 0;
  // Called before the product's dx (which may overwrite x or dy): the adapter's gradients from
  // x and dy, keeping dy B for adapter_backward_dx.
  virtual void adapter_backward(Backend& be, const Parameter& w, const Tensor& x, const Tensor& dy) = 0;
  // dx += s (dy B) A.
  virtual void adapter_backward_dx(Backend& be, const Parameter& w, Tensor& dx) = 0;
};

class CharGpt final : public Model {
 public:
  // `tp`: the tensor-parallel group this rank is in (none: the whole model); `slice`: the pipeline
  // stage's blocks. Throws Error when t does not divide the heads or the slice is empty or outside
  // the layers.
  CharGpt(Backend& be, CharGptConfig cfg, uint64_t seed, TensorParallel tp = {}, PipelineSlice slice = {});
  const PipelineSlice& slice() const { return m_slice; }
  // A pipeline stage's forward: `in` is the tokens int32 [B, T] (first stage) or the previous
  // stage's output [B*T, d]. Returns the logits [B*T, padded vocab] (last stage) or this stage's
  // output [B*T, d] (valid until the next forward or swap_activations).
  Tensor stage_forward(Backend& be, const Tensor& in, int64_t B, int64_t T, bool training);
  // `grad`: the logits' gradient (last stage) or the output's [B*T, d]. Returns the input gradient
  // [B*T, d] for the previous stage (undefined on the first stage).
  Tensor stage_backward(Backend& be, Tensor& grad, bool accumulate);
  // Several micro-batches in flight: the activation set (the last forward's tensors, shape and
  // dropout index) that forward writes and backward reads is slot k's from now on (slot 0 at
  // first; the others start empty). The count of dropout forwards is shared: a forward in any slot
  // draws the next masks, and its backward (or recomputation) uses that forward's.
  void select_slot(size_t k);
  // Frees slot k's activations (after its backward).
  void release_slot(size_t k);
  std::string kind() const override { return "char-gpt"; }
  // x: int32 tokens [B, T] (T <= context). Returns logits [B*T, padded vocab].
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  void backward(Backend& be, Tensor& dlogits, bool accumulate) override;
  std::vector<Parameter*> parameters() override;
  void release_buffers() override;
  nlohmann::json architecture() const override;
  // Units (ModelHooks): the embedding (tok, pos), each block, the final norm with the head.
  bool reports_units() const override { return true; }
  // {"dropout_forwards": training forwards so far} (each draws new dropout masks).
  nlohmann::json random_state() const override;
  void set_random_state(const nlohmann::json& state) override;
  // Tensor-parallel: the vocabulary-parallel loss over this rank's logits; else Model's.
  void cross_entropy(Backend& be, const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                     Tensor& stats, bool accumulate_stats) override;
  const TensorParallel& tensor_parallel() const { return m_tp; }

  const CharGptConfig& config() const { return m_cfg; }
  // The input of each linear weight in the last forward, by the weight's name, in the order of
  // the forward (blocks.i.qkv: ln1's output, proj: the attention's, fc: ln2's, out: the GELU's;
  // head: the final norm's): what post-training quantization calibrates on (compress/ptq_methods.h).
  // Throws Error unless checkpointing is off and the model is whole (no tensor parallelism).
  std::vector<std::pair<std::string, Tensor>> linear_inputs() const;
  void set_checkpointing(CheckpointPolicy p, int64_t k);  // k <= 0: round(sqrt(L))
  CheckpointPolicy checkpoint_policy() const { return m_policy; }
  int64_t checkpoint_k() const { return m_k; }
  // Parameters without the position embedding (the peer's n_nonemb; plan/memory_model.h counts
  // the training FLOPs per token from it).
  int64_t non_embedding_params();
  // Freezes the whole model and routes its products through `hook` (null: back to a trainable
  // model). The hook must outlive its use; dist.tp must be 1.
  void set_product_hook(ProductHook* hook) { m_hook = hook; }

 private:
  struct Block {
    Parameter ln1_w, ln1_b, ln2_w, ln2_b, qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, out_w, out_b;
  };
  struct Acts {
    Tensor x_in, h1, mean1, rstd1, qkv, att, lse, x_mid, h2, mean2, rstd2, pre, f, x_out;
  };
  // x_out: where the block's output goes; null skips the MLP's output product and residual add
  // (a recomputed segment's last block, whose output backward never reads).
  // y = x W^T + b through the hook when one is set; the frozen products' backward (dx = dy W and
  // the hook's terms; dx null: the hook's gradients only).
  void product_forward(Backend& be, const Tensor& x, const Parameter& w, const Parameter* b, Tensor& y);
  void frozen_backward(Backend& be, const Tensor& x, const Parameter& w, Tensor& dy, Tensor* dx);
  void block_forward(Backend& be, int64_t l, Acts& a, const Tensor& x_in, Tensor* x_out);
  void block_backward(Backend& be, int64_t l, Acts& a, Tensor& dx, bool accumulate);
  // The two above without the unit hooks (Model::unit_begins/unit_ends) around them.
  void block_forward_body(Backend& be, int64_t l, Acts& a, const Tensor& x_in, Tensor* x_out);
  void block_backward_body(Backend& be, int64_t l, Acts& a, Tensor& dx, bool accumulate);
  // Position in parameters() of block l's first parameter (l = the slice's last: the final norm's).
  size_t block_first(int64_t l) const {
    return (m_slice.embedding ? 2 : 0) + 12 * static_cast<size_t>(l - m_slice.first);
  }
  // The blocks of this stage, and the parts of forward and backward around them.
  void blocks_forward(Backend& be, Tensor h);
  void blocks_backward(Backend& be, Tensor& dx, bool acc);
  void head_forward(Backend& be);
  void head_backward(Backend& be, Tensor& dlogits, Tensor& dx, bool acc);
  // Whether block l's out bias gradient comes from the fused sums of the next LayerNorm backward
  // (on this stage), and block l's ln1 backward takes block l-1's.
  bool fused_out_bias(int64_t l) const { return fused_bias_sums() && (l + 1 < m_slice.last || m_slice.head); }
  void recompute_selective(Backend& be, int64_t l, Acts& a);
  Tensor& buf(Backend& be, Tensor& t, const Shape& s, DType dt);
  Tensor& f32(Backend& be, Tensor& t, int64_t n);
  // The dropout seed of site `site` (0 attention branch, 1 MLP branch) of block l (-1: embedding)
  // in the current forward.
  uint64_t drop_seed(int64_t l, int site) const;

  // Tensor parallelism (transformer_parallel.cpp). Rows of the residual stream this rank holds:
  // N, or N/t with sequence parallelism.
  int64_t stream_rows() const { return m_tp.sequence_parallel ? m_B * m_T / m_tp.size() : m_B * m_T; }
  bool seq_split() const { return m_tp.active() && m_tp.sequence_parallel; }
  // Branch dropout of a [stream_rows, d] tensor: the unsplit tensor's mask for this rank's rows.
  void branch_dropout(Backend& be, const Tensor& x, uint64_t seed, Tensor& y);
  // A column-parallel product's input: `local` itself, or (sequence parallel) all rows gathered.
  const Tensor& gathered_input(Backend& be, const Tensor& local);
  // y [stream_rows, d] = residual + x W^T + b, the row-parallel product reduced over the group,
  // with the branch's dropout (site of block l) between the product and the residual add.
  void row_parallel_forward(Backend& be, int64_t l, int site, const Tensor& x, const Parameter& w, const Parameter& b,
                            const Tensor& residual, Tensor& y);
  // The buffer a column-parallel product's input gradient is written to ([N, d], partial over the
  // group), and its reduction into `dh` [stream_rows, d].
  Tensor& input_grad_buffer(Backend& be, Tensor& dh);
  void reduce_input_grad(Tensor& dh);
  // The branch gradient over every row (sequence parallel: gathered from this rank's rows).
  Tensor& gathered_grad(Backend& be, Tensor& local);
  // The embedding's forward and backward with the vocabulary split (tok's rows of this rank).
  void parallel_embedding_forward(Backend& be, Tensor& out);
  void parallel_embedding_backward(Backend& be, const Tensor& dx, bool acc);
  // LayerNorm parameter gradients of this rank's rows (sequence parallel) summed over the group:
  // written to scratch, reduced, then added to (or written into) the parameters' gradients.
  Tensor& ln_grad_scratch(Backend& be, int64_t n);
  void reduce_ln_grads(Backend& be, std::initializer_list<Parameter*> params, bool acc);

  CharGptConfig m_cfg;
  TensorParallel m_tp;
  PipelineSlice m_slice;  // last resolved (never -1)
  int64_t m_vocab_first = 0;  // this rank's first vocabulary row
  Parameter m_tok, m_pos, m_ln_w, m_ln_b, m_head;
  std::vector<Block> m_blocks;
  CheckpointPolicy m_policy = CheckpointPolicy::Off;
  int64_t m_k = 1;
  ProductHook* m_hook = nullptr;  // set: the model is frozen (set_product_hook)
  uint64_t m_seed = 0;          // construction seed (dropout seeds derive from it)
  uint64_t m_forwards = 0;      // the current activation set's dropout forward (its masks' seeds)
  bool m_drop = false;          // the last forward applied dropout
  // Whether the proj and out bias gradients are the column sums of the residual-stream gradient
  // dx, taken by the LayerNorm backwards that write it: without dropout (whose mask makes the
  // branch gradient differ from dx) and outside fp8 runs (whose products take their own).
  // (Sequence parallel: dx holds this rank's rows only, so the products take their own.)
  bool fused_bias_sums() const { return !m_drop && m_matmul_mode != MatmulMode::Fp8 && !seq_split() && !m_hook; }

  // Activations of the last forward.
  int64_t m_B = 0, m_T = 0;
  Tensor m_idx;                 // int32 [B*T] tokens (the caller's buffer)
  Tensor m_x0;                  // embedding output
  std::vector<Acts> m_acts;     // Off / Selective: one per block; EveryK: k scratch sets
  std::vector<Tensor> m_seg_in; // EveryK: residual stream at each segment start
  Acts m_shared;                // Selective: h1, h2, f shared by all blocks
  Tensor m_x_final, m_hf, m_meanf, m_rstdf, m_logits;
  Tensor m_tmp;                 // [N, d] projection outputs before the residual add; backward: the branch gradient
  // Backward buffers (the others reuse dead activations: block_backward).
  Tensor m_dx, m_dh;
  Tensor m_df;                  // fp8 runs only: d(f) [N, 4d]
  // Tensor-parallel buffers: the gathered LayerNorm output, the gathered branch gradient and the
  // row-parallel partial sums ([N, d] each, sequence parallel); the embedding's local ids, its
  // table with a zero row for other ranks' tokens and that table's gradient, the position
  // table's gradient (zeros in the forward of ranks other than 0); the LayerNorm gradients' scratch.
  Tensor m_gather, m_gather_grad, m_partial;
  Tensor m_idx_local, m_tok_ext, m_dtok_ext, m_dpos;
  Tensor m_ln_scratch;
  // Pipeline: the activation sets of micro-batches in flight (swap_activations).
  struct ActivationSet {
    int64_t B = 0, T = 0;
    uint64_t forwards = 0;
    bool drop = false;
    Tensor idx, x0, x_final, hf, meanf, rstdf, logits;
    std::vector<Acts> acts;
    std::vector<Tensor> seg_in;
  };
  void swap_set(ActivationSet& o);
  std::vector<ActivationSet> m_slots;  // the sets of the slots other than the current one
  size_t m_slot = 0;                   // the current slot
  uint64_t m_forwards_drawn = 0;  // training forwards with dropout so far (random_state): one draw each
};

// Builds a CharGpt from an architecture object (CharGpt::architecture()).
std::unique_ptr<CharGpt> build_char_gpt(Backend& be, const nlohmann::json& arch, uint64_t seed);
// visit_architecture (nn/model.h) of a char-gpt architecture: its keys checked strictly, then the
// parameters in CharGpt::parameters() order.
void visit_char_gpt(const nlohmann::json& arch, const ParameterVisitor& visit);

}  // namespace trainlab
