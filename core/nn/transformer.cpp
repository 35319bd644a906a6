#include "nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "nn/linear.h"
#include "util/error.h"
#include "util/utf8.h"

namespace trainlab {

namespace {
constexpr float kLnEps = 1e-5f;

// Declares p to the model's builder; `init` produces its numel() initial values at finish().
void declare(FlatParamsBuilder& params, Parameter& p, std::string name, Shape shape, FlatParamsBuilder::Init init) {
  p.name = std::move(name);
  p.shape = std::move(shape);
  params.add(p, std::move(init));
}

// Declares this rank's shard of a parameter whose whole initial values `init` produces: the
// random draws are the whole model's, so every layout starts from the one-rank model's values.
void declare_split(FlatParamsBuilder& params, Parameter& p, std::string name, Shape whole, ShardSpec s,
                   const TensorParallel& tp, FlatParamsBuilder::Init init) {
  if (!tp.active() || !s.split()) {
    declare(params, p, std::move(name), std::move(whole), std::move(init));
    return;
  }
  p.shard = s;
  p.whole = whole;
  const int t = tp.size(), r = tp.rank();
  declare(params, p, std::move(name), shard_shape(whole, s, t, r), [init = std::move(init), whole, s, t, r] {
    const std::vector<float> all = init();
    return take_shard(all, whole, s, t, r);
  });
}

// The random draws of parameters another pipeline stage holds: made (and dropped) just before the
// next held parameter's, so that every stage's values are the whole model's.
class SkippedDraws {
 public:
  void skip(FlatParamsBuilder::Init init) { m_pending.push_back(std::move(init)); }
  FlatParamsBuilder::Init before(FlatParamsBuilder::Init init) {
    if (m_pending.empty()) return init;
    return [pending = std::exchange(m_pending, {}), init = std::move(init)] {
      for (const auto& f : pending) f();
      return init();
    };
  }

 private:
  std::vector<FlatParamsBuilder::Init> m_pending;
};

std::vector<float> uniform_init(std::mt19937_64& rng, int64_t n, float bound) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = uniform_pm(rng, bound);
  return v;
}

// N(0, 1) by Box-Muller from 24-bit uniforms (portable: the same numbers on every platform).
std::vector<float> normal_init(std::mt19937_64& rng, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); i += 2) {
    const double u1 = (static_cast<double>(rng() >> 40) + 1.0) * (1.0 / 16777217.0);  // (0, 1]
    const double u2 = static_cast<double>(rng() >> 40) * (1.0 / 16777216.0);
    const double r = std::sqrt(-2.0 * std::log(u1));
    v[i] = static_cast<float>(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < v.size()) v[i + 1] = static_cast<float>(r * std::sin(6.283185307179586 * u2));
  }
  return v;
}
}  // namespace

CheckpointPolicy checkpoint_policy_from_name(const std::string& s) {
  if (s == "off") return CheckpointPolicy::Off;
  if (s == "every-block") return CheckpointPolicy::EveryBlock;
  if (s == "every-k") return CheckpointPolicy::EveryK;
  if (s == "selective") return CheckpointPolicy::Selective;
  throw Error("checkpoint.policy '" + s + "': expected off, every-block, every-k or selective");
}

const char* checkpoint_policy_name(CheckpointPolicy p) {
  switch (p) {
    case CheckpointPolicy::Off: return "off";
    case CheckpointPolicy::EveryBlock: return "every-block";
    case CheckpointPolicy::EveryK: return "every-k";
    case CheckpointPolicy::Selective: return "selective";
  }
  return "?";
}

nlohmann::json CharGptConfig::to_json() const {
  return {{"kind", "char-gpt"}, {"vocab", vocab},   {"pad_vocab", pad_vocab}, {"layers", layers}, {"heads", heads},
          {"dim", dim},         {"context", context}, {"dropout", dropout},   {"chars", chars}};
}

CharGptConfig CharGptConfig::from_json(const nlohmann::json& j) {
  CharGptConfig c;
  c.vocab = j.at("vocab").get<int64_t>();
  c.pad_vocab = j.value("pad_vocab", false);
  c.layers = j.at("layers").get<int64_t>();
  c.heads = j.at("heads").get<int64_t>();
  c.dim = j.at("dim").get<int64_t>();
  c.context = j.at("context").get<int64_t>();
  c.dropout = j.value("dropout", 0.0);
  c.chars = j.value("chars", std::string());
  c.validate();
  return c;
}

CharGptConfig CharGptConfig::preset(const std::string& name) {
  CharGptConfig c;
  if (name == "tiny") {
    c.layers = 2, c.heads = 4, c.dim = 128, c.context = 64;
  } else if (name == "small") {
    c.layers = 6, c.heads = 6, c.dim = 384, c.context = 256;
  } else if (name == "gpt2") {
    c.layers = 12, c.heads = 12, c.dim = 768, c.context = 1024;
  } else {
    throw Error("model.preset '" + name + "': expected tiny, small or gpt2");
  }
  return c;
}

void CharGptConfig::validate() const {
  if (vocab < 2) throw Error("char-gpt: the vocabulary needs at least 2 tokens, got " + std::to_string(vocab));
  if (layers < 1) throw Error("model.layers must be >= 1, got " + std::to_string(layers));
  if (heads < 1) throw Error("model.heads must be >= 1, got " + std::to_string(heads));
  if (dim < 1 || dim % heads != 0)
    throw Error("model.dim (" + std::to_string(dim) + ") must be a positive multiple of model.heads (" +
                std::to_string(heads) + ")");
  if (context < 1) throw Error("model.context must be >= 1, got " + std::to_string(context));
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw Error("model.dropout = " + std::to_string(dropout) + ": expected a probability in [0, 1)");
  if (chars.empty()) return;
  const std::u32string cps = decode_utf8(chars, "char-gpt: the stored vocabulary");
  if (static_cast<int64_t>(cps.size()) != vocab)
    throw Error("char-gpt: the stored vocabulary has " + std::to_string(cps.size()) + " characters, vocab says " +
                std::to_string(vocab));
  for (size_t i = 1; i < cps.size(); ++i)
    if (cps[i - 1] >= cps[i])
      throw Error("char-gpt: the stored vocabulary's character " + std::to_string(i) +
                  " repeats or is out of order (expected distinct characters in ascending code point order)");
}

CharGpt::CharGpt(Backend& be, CharGptConfig cfg, uint64_t seed, TensorParallel tp, PipelineSlice slice)
    : m_cfg(std::move(cfg)), m_tp(tp), m_slice(slice), m_seed(seed) {
  m_cfg.validate();
  const int t = m_tp.size();
  if (m_cfg.heads % t != 0)
    throw Error("dist.tp " + std::to_string(t) + " does not divide model.heads " + std::to_string(m_cfg.heads) +
                ": each tensor-parallel rank computes heads/tp whole heads");
  const int64_t V = m_cfg.padded_vocab(), D = m_cfg.dim, L = m_cfg.layers, C = m_cfg.context;
  if (m_slice.last < 0) m_slice.last = L;
  if (m_slice.first < 0 || m_slice.first >= m_slice.last || m_slice.last > L ||
      m_slice.embedding != (m_slice.first == 0) || m_slice.head != (m_slice.last == L))
    throw Error("char-gpt pipeline stage: blocks [" + std::to_string(m_slice.first) + ", " +
                std::to_string(m_slice.last) + ") of " + std::to_string(L) +
                " (expected a non-empty range, the embedding with block 0 and the head with the last block)");
  // The generators run at finish(), in this declaration order (the order of the random draws).
  std::mt19937_64 rng(seed);
  FlatParamsBuilder params;
  SkippedDraws skipped;
  m_vocab_first = split_range(V, t, m_tp.rank()).begin;
  const ShardSpec rows{0, 1}, qkv_rows{0, 3}, cols{1, 1};
  // A parameter of this stage (declared), or another stage's (its draws made, its values dropped).
  auto hold = [&](bool held, Parameter& p, std::string name, Shape whole, ShardSpec sp, FlatParamsBuilder::Init init) {
    if (held)
      declare_split(params, p, std::move(name), std::move(whole), sp, m_tp, skipped.before(std::move(init)));
    else
      skipped.skip(std::move(init));
  };
  const bool emb = m_slice.embedding, head = m_slice.head;
  hold(emb, m_tok, "tok.weight", {V, D}, rows, [&rng, V, D] { return normal_init(rng, V * D); });
  hold(emb, m_pos, "pos.weight", {C, D}, {}, [&rng, C, D] { return normal_init(rng, C * D); });
  m_tok.embedding = m_pos.embedding = true;
  auto ones = [D] { return std::vector<float>(static_cast<size_t>(D), 1.0f); };
  auto zeros = [D] { return std::vector<float>(static_cast<size_t>(D), 0.0f); };
  // `ws`: how the weight [out, in] splits; the bias follows a row split and is whole otherwise.
  auto linear = [&](bool held, const std::string& name, int64_t in, int64_t out, Parameter& w, Parameter* b,
                    ShardSpec ws) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    hold(held, w, name + ".weight", {out, in}, ws, [&rng, out, in, bound] { return uniform_init(rng, out * in, bound); });
    if (b)
      hold(held, *b, name + ".bias", {out}, ws.axis == 0 ? ws : ShardSpec{},
           [&rng, out, bound] { return uniform_init(rng, out, bound); });
  };
  m_blocks.resize(static_cast<size_t>(L));  // not resized again: the builder holds addresses
  for (int64_t l = 0; l < L; ++l) {
    Block& b = m_blocks[static_cast<size_t>(l)];
    const bool held = l >= m_slice.first && l < m_slice.last;
    const std::string p = "blocks." + std::to_string(l) + ".";
    hold(held, b.ln1_w, p + "ln1.weight", {D}, {}, ones);
    hold(held, b.ln1_b, p + "ln1.bias", {D}, {}, zeros);
    hold(held, b.ln2_w, p + "ln2.weight", {D}, {}, ones);
    hold(held, b.ln2_b, p + "ln2.bias", {D}, {}, zeros);
    linear(held, p + "qkv", D, 3 * D, b.qkv_w, &b.qkv_b, qkv_rows);
    linear(held, p + "proj", D, D, b.proj_w, &b.proj_b, cols);
    linear(held, p + "fc", D, 4 * D, b.fc_w, &b.fc_b, rows);
    linear(held, p + "out", 4 * D, D, b.out_w, &b.out_b, cols);
  }
  hold(head, m_ln_w, "ln.weight", {D}, {}, ones);
  hold(head, m_ln_b, "ln.bias", {D}, {}, zeros);
  linear(head, "head", D, V, m_head, nullptr, rows);
  params.finish(be, parameters());
}

std::vector<Parameter*> CharGpt::parameters() {
  std::vector<Parameter*> out;
  if (m_slice.embedding) out = {&m_tok, &m_pos};
  for (int64_t l = m_slice.first; l < m_slice.last; ++l) {
    Block& b = m_blocks[static_cast<size_t>(l)];
    for (Parameter* p : {&b.ln1_w, &b.ln1_b, &b.ln2_w, &b.ln2_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.fc_w,
                         &b.fc_b, &b.out_w, &b.out_b})
      out.push_back(p);
  }
  if (m_slice.head) {
    out.push_back(&m_ln_w);
    out.push_back(&m_ln_b);
    out.push_back(&m_head);
  }
  return out;
}

nlohmann::json CharGpt::architecture() const { return m_cfg.to_json(); }

nlohmann::json CharGpt::random_state() const { return {{"dropout_forwards", m_forwards_drawn}}; }

void CharGpt::set_random_state(const nlohmann::json& state) {
  const auto it = state.is_object() && state.size() == 1 ? state.find("dropout_forwards") : state.end();
  if (it == state.end() || !it->is_number_unsigned())
    throw Error("random state of char-gpt: expected {\"dropout_forwards\": an integer >= 0}");
  m_forwards = m_forwards_drawn = it->get<uint64_t>();
}

int64_t CharGpt::non_embedding_params() { return parameter_count() - (m_slice.embedding ? m_pos.numel() : 0); }

void CharGpt::set_checkpointing(CheckpointPolicy p, int64_t k) {
  const int64_t L = m_cfg.layers;
  if (k <= 0) k = std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(L))));
  if (p == CheckpointPolicy::EveryBlock) k = 1;
  m_policy = p;
  m_k = std::min(k, L);
  release_buffers();
}

void CharGpt::release_buffers() {
  m_idx = Tensor();
  m_x0 = Tensor();
  m_acts.clear();
  m_seg_in.clear();
  m_shared = Acts();
  m_x_final = m_hf = m_meanf = m_rstdf = m_logits = m_tmp = Tensor();
  m_dx = m_dh = m_df = Tensor();
  m_gather = m_gather_grad = m_partial = Tensor();
  m_idx_local = m_tok_ext = m_dtok_ext = m_dpos = m_ln_scratch = Tensor();
  m_slots.clear();
  m_slot = 0;
}

Tensor& CharGpt::buf(Backend& be, Tensor& t, const Shape& s, DType dt) {
  if (!t.defined() || t.shape() != s || t.dtype() != dt) {
    t = Tensor();
    t = be.empty(s, dt, MemCategory::Activations);
  }
  return t;
}

Tensor& CharGpt::f32(Backend& be, Tensor& t, int64_t n) { return buf(be, t, {n}, DType::F32); }

uint64_t CharGpt::drop_seed(int64_t l, int site) const {
  // splitmix64 of (seed, forward, site): independent streams per forward and per site.
  uint64_t z = m_seed * 0xD1B54A32D192ED03ull + m_forwards * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(2 * (l + 1) + site + 1) * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void CharGpt::product_forward(Backend& be, const Tensor& x, const Parameter& w, const Parameter* b, Tensor& y) {
  be.linear_forward(x, m_hook ? m_hook->weight(be, w) : w.value, b ? &b->value : nullptr, Activation::None, y,
                    nullptr, m_matmul_mode);
  if (m_hook) m_hook->adapter_forward(be, w, x, y);
}

void CharGpt::frozen_backward(Backend& be, const Tensor& x, const Parameter& w, Tensor& dy, Tensor* dx) {
  m_hook->adapter_backward(be, w, x, dy);
  if (!dx) return;
  be.gemm(dy, false, m_hook->weight(be, w), false, *dx, 1.0f, 0.0f, m_matmul_mode);
  m_hook->adapter_backward_dx(be, w, *dx);
}

void CharGpt::block_forward(Backend& be, int64_t l, Acts& a, const Tensor& x_in, Tensor* x_out) {
  unit_begins(block_first(l), block_first(l + 1), false);
  block_forward_body(be, l, a, x_in, x_out);
  unit_ends(block_first(l), block_first(l + 1), false);
}

void CharGpt::block_forward_body(Backend& be, int64_t l, Acts& a, const Tensor& x_in, Tensor* x_out) {
  const Block& p = m_blocks[static_cast<size_t>(l)];
  // R rows of the residual stream here (N, or N/t sequence parallel); the products see all N rows
  // and this rank's heads (Hl) and MLP columns (4 Dl).
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim, Hl = m_cfg.heads / m_tp.size(), Dl = D / m_tp.size();
  const DType dt = parameter_storage_dtype(m_dtype);
  const bool sel = m_policy == CheckpointPolicy::Selective;
  a.x_in = x_in;
  Tensor& h1 = buf(be, sel ? m_shared.h1 : a.h1, {R, D}, dt);
  be.layernorm_forward(x_in, p.ln1_w.value, p.ln1_b.value, kLnEps, h1, f32(be, a.mean1, R), f32(be, a.rstd1, R));
  const MatmulMode mm = m_matmul_mode;
  product_forward(be, gathered_input(be, h1), p.qkv_w, &p.qkv_b, buf(be, a.qkv, {N, 3 * Dl}, dt));
  be.attention_forward(a.qkv, m_B, m_T, Hl, buf(be, a.att, {N, Dl}, dt), f32(be, a.lse, m_B * Hl * m_T), mm);
  row_parallel_forward(be, l, 0, a.att, p.proj_w, p.proj_b, x_in, buf(be, a.x_mid, {R, D}, dt));
  Tensor& h2 = buf(be, sel ? m_shared.h2 : a.h2, {R, D}, dt);
  be.layernorm_forward(a.x_mid, p.ln2_w.value, p.ln2_b.value, kLnEps, h2, f32(be, a.mean2, R), f32(be, a.rstd2, R));
  Tensor& f = buf(be, sel ? m_shared.f : a.f, {N, 4 * Dl}, dt);
  // fc and GELU apart: the pre-activation is the product's own output (no copy), GELU vectorised.
  product_forward(be, gathered_input(be, h2), p.fc_w, &p.fc_b, buf(be, a.pre, {N, 4 * Dl}, dt));
  be.gelu_forward(a.pre, f);
  if (!x_out) return;  // a recomputed segment's last block: its output is not needed again
  row_parallel_forward(be, l, 1, f, p.out_w, p.out_b, a.x_mid, *x_out);
}

std::vector<std::pair<std::string, Tensor>> CharGpt::linear_inputs() const {
  if (m_policy != CheckpointPolicy::Off || m_tp.active())
    throw Error("char-gpt: the linear layers' inputs are kept only without checkpointing and tensor parallelism");
  if (!m_x_final.defined() || m_acts.size() != m_blocks.size()) throw Error("char-gpt: linear_inputs before a forward");
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t l = 0; l < m_blocks.size(); ++l) {
    const Block& p = m_blocks[l];
    const Acts& a = m_acts[l];
    out.emplace_back(p.qkv_w.name, a.h1);
    out.emplace_back(p.proj_w.name, a.att);
    out.emplace_back(p.fc_w.name, a.h2);
    out.emplace_back(p.out_w.name, a.f);
  }
  out.emplace_back(m_head.name, m_hf);
  return out;
}

void CharGpt::recompute_selective(Backend& be, int64_t l, Acts& a) {
  const Block& p = m_blocks[static_cast<size_t>(l)];
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim, Dl = D / m_tp.size();
  const DType dt = parameter_storage_dtype(m_dtype);
  // Same operations on the same inputs as the forward: bit-identical h1, h2, f (and statistics).
  be.layernorm_forward(a.x_in, p.ln1_w.value, p.ln1_b.value, kLnEps, buf(be, m_shared.h1, {R, D}, dt), a.mean1, a.rstd1);
  be.layernorm_forward(a.x_mid, p.ln2_w.value, p.ln2_b.value, kLnEps, buf(be, m_shared.h2, {R, D}, dt), a.mean2, a.rstd2);
  be.gelu_forward(a.pre, buf(be, m_shared.f, {N, 4 * Dl}, dt));
}

void CharGpt::block_backward(Backend& be, int64_t l, Acts& a, Tensor& dx, bool acc) {
  unit_begins(block_first(l), block_first(l + 1), true);
  block_backward_body(be, l, a, dx, acc);
  unit_ends(block_first(l), block_first(l + 1), true);
  grads_ready(block_first(l));  // block l-1's out bias gradient came with this block's (fused) sums
}

void CharGpt::block_backward_body(Backend& be, int64_t l, Acts& a, Tensor& dx, bool acc) {
  Block& p = m_blocks[static_cast<size_t>(l)];
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim, Hl = m_cfg.heads / m_tp.size(), Dl = D / m_tp.size();
  const DType dt = parameter_storage_dtype(m_dtype);
  const bool sel = m_policy == CheckpointPolicy::Selective;
  if (sel) recompute_selective(be, l, a);
  const Tensor& h1 = sel ? m_shared.h1 : a.h1;
  const Tensor& h2 = sel ? m_shared.h2 : a.h2;
  Tensor& f = sel ? m_shared.f : a.f;
  // Gradients live in buffers whose forward contents are dead by then (no [N, 4d] or [N, 3d]
  // gradient buffer of their own): g (the branch gradient) in m_tmp where it differs from dx;
  // d(f) and d(pre) over f once out's weight gradient has read f; d(att) in dh between
  // the two LayerNorm backwards; d(qkv) over f again (d(pre) consumed by then).
  // MLP branch: dx is the gradient w.r.t. x_out.
  // Without dropout the branch gradient is dx itself: the products only read it (no activation
  // here), and dx is next written by the LayerNorm backward, after its last read. fp8 runs keep a
  // copy (their quantizing backward is not promised to leave dy alone).
  const MatmulMode mm = m_matmul_mode;
  const bool fp8 = mm == MatmulMode::Fp8;
  const bool own_g = m_drop || fp8;
  // With fused_bias_sums, proj's and out's bias gradients are the column sums of dx taken by the
  // LayerNorm backwards that write it, so their weight-gradient products run without cuBLASLt's
  // bias-gradient epilogue (tools/gemm_lab, H200: 0.058 -> 0.043 and 0.138 -> 0.119 ms): proj's by
  // this block's second LayerNorm backward, out's -- the column sums of dx as it arrives here -- by
  // the next block's first LayerNorm backward (or the final one).
  const bool fused = fused_bias_sums(), fused_out = fused_out_bias(l);
  // Sequence parallel: the LayerNorm gradients of this rank's rows go to scratch (ln2, ln1), summed
  // over the group at the end; otherwise straight into the parameters' gradients.
  const bool sp = seq_split();
  // (A frozen model's go to scratch too, and stay there.)
  const bool scratch = sp || m_hook;
  Tensor lns = scratch ? ln_grad_scratch(be, 4 * D) : Tensor();
  auto ln_grad = [&](Parameter& q, int slot) { return scratch ? lns.slice_rows(slot * D, (slot + 1) * D) : q.grad; };
  Tensor g2w = ln_grad(p.ln2_w, 0), g2b = ln_grad(p.ln2_b, 1), g1w = ln_grad(p.ln1_w, 2), g1b = ln_grad(p.ln1_b, 3);
  Tensor& g = own_g ? buf(be, m_tmp, {R, D}, dt) : dx;
  if (m_drop)
    branch_dropout(be, dx, drop_seed(l, 1), g);  // the branch's mask, same seed as the forward
  else if (own_g)
    be.copy(dx, g);
  Tensor* df = nullptr;
  Tensor& gg = gathered_grad(be, g);
  if (m_hook) {
    df = &f;  // the hook reads f before d(f) = g W overwrites it
    frozen_backward(be, f, p.out_w, gg, df);
  } else if (fp8) {
    // fp8 runs keep linear_backward's own (fp8) dx product, written to a buffer of its own.
    df = &buf(be, m_df, {N, 4 * Dl}, dt);
    be.linear_backward(f, p.out_w.value, gg, Activation::None, nullptr, p.out_w.grad, &p.out_b.grad, df, acc, mm);
  } else {
    // Weight gradient first (reads f; without an activation it leaves g as it was), then
    // d(f) = g W over f: the same product linear_backward's dx is.
    // (At a pipeline stage's cut the gradient arrived from the next stage: its column sums are
    // taken here, by the routine the next LayerNorm backward would have used.)
    be.linear_backward(f, p.out_w.value, gg, Activation::None, nullptr, p.out_w.grad,
                       fused_out ? nullptr : &p.out_b.grad, nullptr, acc, mm);
    df = &f;
    be.gemm(gg, false, p.out_w.value, false, *df, 1.0f, 0.0f, mm);
  }
  Tensor& dh = buf(be, m_dh, {R, D}, dt);
  be.gelu_backward(a.pre, *df, *df);  // d(pre), in place
  if (m_hook)
    frozen_backward(be, gathered_input(be, h2), p.fc_w, *df, &input_grad_buffer(be, dh));
  else
    be.linear_backward(gathered_input(be, h2), p.fc_w.value, *df, Activation::None, nullptr, p.fc_w.grad,
                       &p.fc_b.grad, &input_grad_buffer(be, dh), acc, mm);
  reduce_input_grad(dh);
  be.layernorm_backward(a.x_mid, p.ln2_w.value, a.mean2, a.rstd2, dh, dx, g2w, g2b, true, acc && !sp,
                        fused ? &p.proj_b.grad : nullptr);
  // Attention branch: dx is now the gradient w.r.t. x_mid.
  if (m_drop)
    branch_dropout(be, dx, drop_seed(l, 0), g);
  else if (own_g)
    be.copy(dx, g);
  Tensor& gg0 = gathered_grad(be, g);
  // d(att) [N, Dl] in dh's storage (R d >= N Dl elements), dead between the LayerNorm backwards.
  Tensor datt = dh.reshape({R * D}).slice_rows(0, N * Dl).reshape({N, Dl});
  if (m_hook)
    frozen_backward(be, a.att, p.proj_w, gg0, &datt);
  else
    be.linear_backward(a.att, p.proj_w.value, gg0, Activation::None, nullptr, p.proj_w.grad,
                       fused ? nullptr : &p.proj_b.grad, &datt, acc, mm);
  Tensor dqkv = df->reshape({N * 4 * Dl}).slice_rows(0, N * 3 * Dl).reshape({N, 3 * Dl});
  be.attention_backward(a.qkv, a.att, a.lse, datt, m_B, m_T, Hl, dqkv, mm);
  if (m_hook)
    frozen_backward(be, gathered_input(be, h1), p.qkv_w, dqkv, &input_grad_buffer(be, dh));
  else
    be.linear_backward(gathered_input(be, h1), p.qkv_w.value, dqkv, Activation::None, nullptr, p.qkv_w.grad,
                       &p.qkv_b.grad, &input_grad_buffer(be, dh), acc, mm);
  reduce_input_grad(dh);
  Tensor* prev_out_b = fused && l > m_slice.first ? &m_blocks[static_cast<size_t>(l - 1)].out_b.grad : nullptr;
  be.layernorm_backward(a.x_in, p.ln1_w.value, a.mean1, a.rstd1, dh, dx, g1w, g1b, true, acc && !sp, prev_out_b);
  if (sp) reduce_ln_grads(be, {&p.ln2_w, &p.ln2_b, &p.ln1_w, &p.ln1_b}, acc);
}

Tensor CharGpt::forward(Backend& be, const Tensor& x, bool training) {
  if (x.dtype() != DType::I32 || x.rank() != 2)
    throw Error("char-gpt expects int32 tokens [batch, time], got " + std::string(dtype_name(x.dtype())) + " " +
                shape_str(x.shape()));
  return stage_forward(be, x, x.dim(0), x.dim(1), training);
}

Tensor CharGpt::stage_forward(Backend& be, const Tensor& in, int64_t B, int64_t T, bool training) {
  if (T > m_cfg.context || T < 1)
    throw Error("char-gpt: a window of " + std::to_string(T) + " tokens does not fit the context of " +
                std::to_string(m_cfg.context));
  if (m_tp.sequence_parallel && (B * T) % m_tp.size() != 0)
    throw Error("sequence parallelism over " + std::to_string(m_tp.size()) + " ranks: a batch of " +
                std::to_string(B * T) + " tokens does not split into equal parts");
  m_B = B;
  m_T = T;
  // N tokens; R of them in this rank's residual stream (all, or N/t with sequence parallelism).
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim;
  const DType dt = parameter_storage_dtype(m_dtype);
  m_drop = training && m_cfg.dropout > 0.0;
  if (m_drop) m_forwards = ++m_forwards_drawn;
  if (!m_slice.embedding) {
    if (in.numel() != R * D)
      throw Error("char-gpt pipeline stage: an input of " + shape_str(in.shape()) + " for " + std::to_string(R) +
                  " rows of " + std::to_string(D));
    blocks_forward(be, in);
  } else {
    if (in.dtype() != DType::I32 || in.numel() != N)
      throw Error("char-gpt expects int32 tokens [batch, time], got " + std::string(dtype_name(in.dtype())) + " " +
                  shape_str(in.shape()));
    m_idx = in.reshape({N});
    unit_begins(0, block_first(m_slice.first), false);
    if (m_tp.active())
      parallel_embedding_forward(be, buf(be, m_x0, {R, D}, dt));
    else
      be.embedding_forward(m_tok.value, m_pos.value, m_idx, m_T, buf(be, m_x0, {N, D}, dt));
    unit_ends(0, block_first(m_slice.first), false);
    if (m_drop) branch_dropout(be, m_x0, drop_seed(-1, 0), m_x0);
    blocks_forward(be, m_x0);
  }
  if (!m_slice.head) return m_x_final;
  head_forward(be);
  return m_logits;
}

void CharGpt::blocks_forward(Backend& be, Tensor h) {
  const int64_t R = stream_rows(), D = m_cfg.dim, first = m_slice.first, L = m_slice.last - first;
  const DType dt = parameter_storage_dtype(m_dtype);
  if (m_policy == CheckpointPolicy::EveryK || m_policy == CheckpointPolicy::EveryBlock) {
    const int64_t segs = (L + m_k - 1) / m_k;
    m_acts.resize(static_cast<size_t>(m_k));
    m_seg_in.resize(static_cast<size_t>(segs));
    m_seg_in[0] = h;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t s = i / m_k, j = i % m_k;
      Acts& a = m_acts[static_cast<size_t>(j)];
      // A segment's last block writes its output straight into the next segment's kept input.
      const bool seg_end = j == m_k - 1 && s + 1 < segs;
      Tensor& out = seg_end ? buf(be, m_seg_in[static_cast<size_t>(s + 1)], {R, D}, dt) : buf(be, a.x_out, {R, D}, dt);
      block_forward(be, first + i, a, h, &out);
      h = out;
    }
  } else {
    m_acts.resize(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) {
      Acts& a = m_acts[static_cast<size_t>(i)];
      block_forward(be, first + i, a, h, &buf(be, a.x_out, {R, D}, dt));
      h = a.x_out;
    }
  }
  m_x_final = h;
}

void CharGpt::head_forward(Backend& be) {
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim;
  const DType dt = parameter_storage_dtype(m_dtype);
  const size_t head_first = block_first(m_slice.last), head_last = head_first + 3;  // ln.weight, ln.bias, head.weight
  unit_begins(head_first, head_last, false);
  be.layernorm_forward(m_x_final, m_ln_w.value, m_ln_b.value, kLnEps, buf(be, m_hf, {R, D}, dt), f32(be, m_meanf, R),
                       f32(be, m_rstdf, R));
  // This rank's rows of the (padded) vocabulary: all of it with one rank.
  product_forward(be, gathered_input(be, m_hf), m_head, nullptr, buf(be, m_logits, {N, m_head.shape[0]}, dt));
  unit_ends(head_first, head_last, false);
}

void CharGpt::backward(Backend& be, Tensor& dlogits, bool acc) { stage_backward(be, dlogits, acc); }

Tensor CharGpt::stage_backward(Backend& be, Tensor& grad, bool acc) {
  if (!m_x_final.defined()) throw Error("char-gpt: backward without a forward");
  const int64_t R = stream_rows(), D = m_cfg.dim;
  const DType dt = parameter_storage_dtype(m_dtype);
  Tensor& dx = buf(be, m_dx, {R, D}, dt);
  if (m_slice.head) {
    head_backward(be, grad, dx, acc);
  } else {
    if (grad.numel() != R * D)
      throw Error("char-gpt pipeline stage: an output gradient of " + shape_str(grad.shape()) + " for " +
                  std::to_string(R) + " rows of " + std::to_string(D));
    be.copy(grad, dx);
  }
  blocks_backward(be, dx, acc);
  if (m_drop && m_slice.embedding) branch_dropout(be, dx, drop_seed(-1, 0), dx);
  if (!m_slice.embedding) return dx;
  if (m_hook) {  // a frozen model (adapters): the embedding takes no gradient
    grads_ready(0);
    return Tensor();
  }
  if (m_tp.active())
    parallel_embedding_backward(be, gathered_grad(be, dx), acc);
  else
    be.embedding_backward(dx, m_idx, m_T, m_tok.grad, m_pos.grad, acc);  // reads no parameter
  grads_ready(0);
  return Tensor();
}

void CharGpt::head_backward(Backend& be, Tensor& dlogits, Tensor& dx, bool acc) {
  const int64_t R = stream_rows(), D = m_cfg.dim;
  const DType dt = parameter_storage_dtype(m_dtype);
  Tensor& dh = buf(be, m_dh, {R, D}, dt);
  const size_t head_first = block_first(m_slice.last), head_last = head_first + 3;
  unit_begins(head_first, head_last, true);
  if (m_hook)
    frozen_backward(be, gathered_input(be, m_hf), m_head, dlogits, &input_grad_buffer(be, dh));
  else
    be.linear_backward(gathered_input(be, m_hf), m_head.value, dlogits, Activation::None, nullptr, m_head.grad,
                       nullptr, &input_grad_buffer(be, dh), acc, m_matmul_mode);
  reduce_input_grad(dh);
  Tensor* last_out_b = fused_bias_sums() ? &m_blocks[static_cast<size_t>(m_slice.last - 1)].out_b.grad : nullptr;
  const bool sp = seq_split();
  const bool scratch = sp || m_hook;  // a frozen model's go to scratch and stay there
  Tensor lns = scratch ? ln_grad_scratch(be, 4 * D) : Tensor();
  Tensor gw = scratch ? lns.slice_rows(0, D) : m_ln_w.grad, gb = scratch ? lns.slice_rows(D, 2 * D) : m_ln_b.grad;
  be.layernorm_backward(m_x_final, m_ln_w.value, m_meanf, m_rstdf, dh, dx, gw, gb, false, acc && !sp, last_out_b);
  if (sp) reduce_ln_grads(be, {&m_ln_w, &m_ln_b}, acc);
  unit_ends(head_first, head_last, true);
  grads_ready(head_first);
}

void CharGpt::blocks_backward(Backend& be, Tensor& dx, bool acc) {
  const int64_t R = stream_rows(), D = m_cfg.dim, first = m_slice.first, L = m_slice.last - first;
  const DType dt = parameter_storage_dtype(m_dtype);
  if (m_policy == CheckpointPolicy::EveryK || m_policy == CheckpointPolicy::EveryBlock) {
    const int64_t segs = (L + m_k - 1) / m_k;
    for (int64_t s = segs - 1; s >= 0; --s) {
      const int64_t lo = s * m_k, hi = std::min(L, lo + m_k);  // [lo, hi) of this stage's blocks
      if (s != segs - 1) {  // the last segment is still resident from the forward
        Tensor h = m_seg_in[static_cast<size_t>(s)];
        for (int64_t i = lo; i < hi; ++i) {
          Acts& a = m_acts[static_cast<size_t>(i - lo)];
          // The segment's last output (the next segment's kept input) is not recomputed.
          block_forward(be, first + i, a, h, i + 1 < hi ? &buf(be, a.x_out, {R, D}, dt) : nullptr);
          h = a.x_out;
        }
      }
      for (int64_t i = hi - 1; i >= lo; --i) block_backward(be, first + i, m_acts[static_cast<size_t>(i - lo)], dx, acc);
    }
  } else {
    for (int64_t i = L - 1; i >= 0; --i) block_backward(be, first + i, m_acts[static_cast<size_t>(i)], dx, acc);
  }
}

void CharGpt::swap_set(ActivationSet& o) {
  std::swap(o.B, m_B);
  std::swap(o.T, m_T);
  std::swap(o.forwards, m_forwards);
  std::swap(o.drop, m_drop);
  std::swap(o.idx, m_idx);
  std::swap(o.x0, m_x0);
  std::swap(o.x_final, m_x_final);
  std::swap(o.hf, m_hf);
  std::swap(o.meanf, m_meanf);
  std::swap(o.rstdf, m_rstdf);
  std::swap(o.logits, m_logits);
  std::swap(o.acts, m_acts);
  std::swap(o.seg_in, m_seg_in);
}

void CharGpt::select_slot(size_t k) {
  if (k == m_slot) return;
  m_slots.resize(std::max({m_slots.size(), k + 1, m_slot + 1}));
  swap_set(m_slots[m_slot]);  // the current set back into its slot
  swap_set(m_slots[k]);       // slot k's set in (its place left empty)
  m_slot = k;
}

void CharGpt::release_slot(size_t k) {
  ActivationSet empty;
  if (k == m_slot)
    swap_set(empty);
  else if (k < m_slots.size())
    m_slots[k] = ActivationSet();
}

void visit_char_gpt(const nlohmann::json& arch, const ParameterVisitor& visit) {
  // The model.* keys' ranges (config_schema.cpp); the vocabulary holds at most every code point.
  architecture_int(arch, "vocab", 2, int64_t(1) << 21);
  architecture_int(arch, "layers", 1, 1024);
  architecture_int(arch, "heads", 1, 1024);
  architecture_int(arch, "dim", 1, 65536);
  architecture_int(arch, "context", 1, int64_t(1) << 20);
  auto optional_key = [&](const char* key, const auto& is_valid, const char* expected) {
    const auto it = arch.find(key);
    if (it != arch.end() && !is_valid(*it)) throw Error(std::string("key '") + key + "': expected " + expected);
  };
  optional_key("pad_vocab", [](const nlohmann::json& v) { return v.is_boolean(); }, "true or false");
  optional_key("dropout", [](const nlohmann::json& v) { return v.is_number() && v >= 0.0 && v < 1.0; }, "a number in [0, 1)");
  optional_key("chars", [](const nlohmann::json& v) { return v.is_string(); }, "a string");
  const CharGptConfig c = CharGptConfig::from_json(arch);  // validates the combination
  const int64_t V = c.padded_vocab(), D = c.dim;
  visit("tok.weight", {V, D});
  visit("pos.weight", {c.context, D});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    for (const char* ln : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"}) visit(p + ln, {D});
    visit(p + "qkv.weight", {3 * D, D});
    visit(p + "qkv.bias", {3 * D});
    visit(p + "proj.weight", {D, D});
    visit(p + "proj.bias", {D});
    visit(p + "fc.weight", {4 * D, D});
    visit(p + "fc.bias", {4 * D});
    visit(p + "out.weight", {D, 4 * D});
    visit(p + "out.bias", {D});
  }
  visit("ln.weight", {D});
  visit("ln.bias", {D});
  visit("head.weight", {V, D});
}

std::unique_ptr<CharGpt> build_char_gpt(Backend& be, const nlohmann::json& arch, uint64_t seed) {
  if (arch.value("kind", "") != "char-gpt")
    throw Error("not a char-gpt architecture: kind '" + arch.value("kind", "") + "'");
  return std::make_unique<CharGpt>(be, CharGptConfig::from_json(arch), seed);
}

}  // namespace trainlab
