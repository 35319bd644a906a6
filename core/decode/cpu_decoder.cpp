#include "decode/cpu_decoder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "decode/decoder.h"
#include "util/error.h"

namespace trainlab {

namespace {
// y = (x - mean) / sqrt(var + 1e-5) * w + b, var the biased variance, fp32 sums in index order.
void layer_norm(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, int64_t d) {
  float m = 0.0f;
  for (int64_t j = 0; j < d; ++j) m += x[j];
  m /= static_cast<float>(d);
  float var = 0.0f;
  for (int64_t j = 0; j < d; ++j) var += (x[j] - m) * (x[j] - m);
  var /= static_cast<float>(d);
  const float r = 1.0f / std::sqrt(var + 1e-5f);
  for (int64_t j = 0; j < d; ++j) y[j] = (x[j] - m) * r * w[static_cast<size_t>(j)] + b[static_cast<size_t>(j)];
}

// Y[r, o] = W[o, :] . X[r, :] + b[o] for r < rows (b may be empty). Each weight row is read once
// for all rows (a verification pass of speculative decoding reads the weights once), and every
// dot product is summed in the same order whatever `rows` is: 8 partial sums over columns c = j
// (mod 8), added pairwise at the end, then the tail. So a row of a batch is bit-identical to the
// same row alone, which speculative decoding's "the target's own greedy text" relies on. An AVX2
// clone (chosen at load time where the CPU has it) keeps the 8 partial sums in one register; it
// does the same multiplications and additions (no FMA contraction), so every clone gives the same bits.
__attribute__((target_clones("avx2", "default"))) void matmul_rows(const std::vector<float>& w, const std::vector<float>& b, const float* x, float* y, int64_t rows,
                 int64_t out, int64_t in) {
  const int64_t in8 = in - in % 8;
  for (int64_t o = 0; o < out; ++o) {
    const float* wr = w.data() + o * in;
    const float bias = b.empty() ? 0.0f : b[static_cast<size_t>(o)];
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t c = 0; c < in8; c += 8)
        for (int j = 0; j < 8; ++j) acc[j] += wr[c + j] * xr[c + j];
      float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
      for (int64_t c = in8; c < in; ++c) sum += wr[c] * xr[c];
      y[r * out + o] = sum + bias;
    }
  }
}
}  // namespace

CharGptGenerator::CharGptGenerator(Backend& be, CharGpt& model) : CharGptGenerator(decode_weights(be, model)) {}

CharGptGenerator::CharGptGenerator(const DecodeWeights& w, std::string values, int64_t batch)
    : m_shape(w.shape), m_values(std::move(values)) {
  w.validate();
  if (batch < 1 || batch > kMaxDecodeBatch)
    throw Error("decode batch " + std::to_string(batch) + ": expected 1.." + std::to_string(kMaxDecodeBatch) + " sequences");
  for (int64_t b = 0; b < batch; ++b) m_caches.emplace_back(w.shape.layers, w.shape.context, w.shape.dim);
  m_tok = w.at("tok.weight");
  m_pos = w.at("pos.weight");
  m_ln_w = w.at("ln.weight");
  m_ln_b = w.at("ln.bias");
  m_head = w.at("head.weight");
  for (int64_t l = 0; l < m_shape.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    Layer L;
    L.ln1_w = w.at(p + "ln1.weight");
    L.ln1_b = w.at(p + "ln1.bias");
    L.ln2_w = w.at(p + "ln2.weight");
    L.ln2_b = w.at(p + "ln2.bias");
    L.qkv_w = w.at(p + "qkv.weight");
    L.qkv_b = w.at(p + "qkv.bias");
    L.proj_w = w.at(p + "proj.weight");
    L.proj_b = w.at(p + "proj.bias");
    L.fc_w = w.at(p + "fc.weight");
    L.fc_b = w.at(p + "fc.bias");
    L.out_w = w.at(p + "out.weight");
    L.out_b = w.at(p + "out.bias");
    m_layers.push_back(std::move(L));
  }
  m_logits.resize(static_cast<size_t>(m_shape.padded_vocab));
  m_scores.resize(static_cast<size_t>(m_shape.context));
}

int64_t CharGptGenerator::weight_bytes_per_token() const {
  // Every matrix, bias and LayerNorm vector once, plus one row of each embedding.
  int64_t floats = static_cast<int64_t>(m_ln_w.size() + m_ln_b.size() + m_head.size()) + 2 * m_shape.dim;
  for (const Layer& L : m_layers)
    for (const auto* v : {&L.ln1_w, &L.ln1_b, &L.ln2_w, &L.ln2_b, &L.qkv_w, &L.qkv_b, &L.proj_w, &L.proj_b, &L.fc_w,
                          &L.fc_b, &L.out_w, &L.out_b})
      floats += static_cast<int64_t>(v->size());
  return floats * 4;
}

std::string CharGptGenerator::describe() const {
  std::string base = "CPU fp32 decoder (KV cache)";
  if (batch() > 1) base = "CPU fp32 decoder, " + std::to_string(batch()) + " sequences a pass (a KV cache each)";
  return m_values == "fp32" ? base : base + " on the dequantised values of " + m_values + " weights";
}

void CharGptGenerator::reset() { m_len = 0; }

// Per head: s_j = q . k_j / sqrt(hd) for j = 0..pos, p = softmax(s) (max subtracted, fp32 sums
// in position order), y = sum_j p_j v_j.
void CharGptGenerator::attend(const KvCache& cache, int64_t l, int64_t pos, const float* qkv, float* y) {
  const int64_t D = m_shape.dim, H = m_shape.heads, hd = D / H;
  const float* kc = cache.keys(l);
  const float* vc = cache.values(l);
  float* s = m_scores.data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t hh = 0; hh < H; ++hh) {
    const float* q = qkv + hh * hd;
    float mx = -INFINITY;
    for (int64_t j = 0; j <= pos; ++j) {
      const float* k = kc + j * D + hh * hd;
      float dot = 0.0f;
      for (int64_t c = 0; c < hd; ++c) dot += q[c] * k[c];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j <= pos; ++j) sum += (s[j] = std::exp(s[j] - mx));
    float* out = y + hh * hd;
    std::fill(out, out + hd, 0.0f);
    for (int64_t j = 0; j <= pos; ++j) {
      const float p = s[j] / sum;
      const float* v = vc + j * D + hh * hd;
      for (int64_t c = 0; c < hd; ++c) out[c] += p * v[c];
    }
  }
}

void CharGptGenerator::push(int32_t token) { push_rows({token}); }

std::vector<float> CharGptGenerator::push_rows(const std::vector<int32_t>& tokens) { return forward(tokens, false); }

std::vector<float> CharGptGenerator::push_batch(const std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(tokens.size()) != batch())
    throw Error("push_batch: " + std::to_string(tokens.size()) + " tokens for a batch of " + std::to_string(batch()) +
                " sequences (expected one token a sequence)");
  return forward(tokens, true);
}

// The rows go through every layer together: each matrix is read once for all of them (matmul_rows),
// the keys and values of all rows are stored before attention. push_rows: row i attends over
// positions 0..m_len + i of sequence 0 (causal); push_batch: row i over positions 0..m_len of
// sequence i. Either way a row computes exactly what push() would at its position.
std::vector<float> CharGptGenerator::forward(const std::vector<int32_t>& tokens, bool across) {
  const int64_t D = m_shape.dim, V = m_shape.padded_vocab, n = static_cast<int64_t>(tokens.size());
  if (n == 0) return {};
  if (m_len + (across ? 1 : n) > m_shape.context) throw Error("internal: generation window overflow");
  auto pos = [&](int64_t r) { return across ? m_len : m_len + r; };
  auto cache = [&](int64_t r) -> KvCache& { return m_caches[static_cast<size_t>(across ? r : 0)]; };
  for (int32_t token : tokens)
    if (token < 0 || token >= V) throw Error("token " + std::to_string(token) + " outside the vocabulary");
  const auto nd = static_cast<size_t>(n * D);
  std::vector<float> x(nd), h(nd), qkv(3 * nd), y(nd), a(nd), f(4 * nd);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < D; ++j) x[r * D + j] = m_tok[tokens[static_cast<size_t>(r)] * D + j] + m_pos[pos(r) * D + j];
  for (size_t l = 0; l < m_layers.size(); ++l) {
    const Layer& L = m_layers[l];
    const auto li = static_cast<int64_t>(l);
    for (int64_t r = 0; r < n; ++r) layer_norm(&x[r * D], L.ln1_w, L.ln1_b, &h[r * D], D);
    matmul_rows(L.qkv_w, L.qkv_b, h.data(), qkv.data(), n, 3 * D, D);
    for (int64_t r = 0; r < n; ++r) cache(r).store(li, pos(r), &qkv[r * 3 * D + D], &qkv[r * 3 * D + 2 * D]);
    for (int64_t r = 0; r < n; ++r) attend(cache(r), li, pos(r), &qkv[r * 3 * D], &y[r * D]);
    matmul_rows(L.proj_w, L.proj_b, y.data(), a.data(), n, D, D);
    for (size_t j = 0; j < nd; ++j) x[j] += a[j];
    for (int64_t r = 0; r < n; ++r) layer_norm(&x[r * D], L.ln2_w, L.ln2_b, &h[r * D], D);
    matmul_rows(L.fc_w, L.fc_b, h.data(), f.data(), n, 4 * D, D);
    for (auto& v : f) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));  // GELU, erf form
    matmul_rows(L.out_w, L.out_b, f.data(), a.data(), n, D, 4 * D);
    for (size_t j = 0; j < nd; ++j) x[j] += a[j];
  }
  for (int64_t r = 0; r < n; ++r) layer_norm(&x[r * D], m_ln_w, m_ln_b, &h[r * D], D);
  std::vector<float> logits(static_cast<size_t>(n * V));
  matmul_rows(m_head, {}, h.data(), logits.data(), n, V, D);
  if (across) m_logits.assign(logits.begin(), logits.begin() + V);  // sequence 0's
  else m_logits.assign(logits.end() - V, logits.end());
  m_len += across ? 1 : n;
  return logits;
}

void CharGptGenerator::truncate(int64_t length) {
  check_truncate(*this, length);
  m_len = length;
}

std::vector<std::vector<float>> CharGptGenerator::logits_sequence(const std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(tokens.size()) > m_shape.context) throw Error("logits_sequence: longer than the context");
  reset();
  std::vector<std::vector<float>> out;
  for (int32_t t : tokens) {
    push(t);
    out.emplace_back(m_logits.begin(), m_logits.begin() + m_shape.vocab);
  }
  return out;
}

std::vector<int32_t> CharGptGenerator::generate(const std::vector<int32_t>& prompt, int64_t n, const SampleOptions& opt) {
  return generate_tokens(*this, prompt, n, opt, &m_tokens_per_s);
}

}  // namespace trainlab
