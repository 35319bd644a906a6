#include "decode/cpu_decoder.h"

#include <cblas.h>

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

// y[out] = W[out, in] x + b (b may be empty).
void matvec(const std::vector<float>& w, const std::vector<float>& b, const float* x, float* y, int64_t out, int64_t in) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(out), static_cast<int>(in), 1.0f, w.data(),
              static_cast<int>(in), x, 1, 0.0f, y, 1);
  if (!b.empty())
    for (int64_t i = 0; i < out; ++i) y[i] += b[static_cast<size_t>(i)];
}
}  // namespace

CharGptGenerator::CharGptGenerator(Backend& be, CharGpt& model) : CharGptGenerator(decode_weights(be, model)) {}

CharGptGenerator::CharGptGenerator(const DecodeWeights& w, std::string values)
    : m_shape(w.shape), m_cache(w.shape.layers, w.shape.context, w.shape.dim), m_values(std::move(values)) {
  w.validate();
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
  const std::string base = "CPU fp32 decoder (cblas, KV cache)";
  return m_values == "fp32" ? base : base + " on the dequantised values of " + m_values + " weights";
}

void CharGptGenerator::reset() { m_len = 0; }

// Per head: s_j = q . k_j / sqrt(hd) for j = 0..m_len, p = softmax(s) (max subtracted, fp32 sums
// in position order), y = sum_j p_j v_j.
void CharGptGenerator::attend(int64_t l, const float* qkv, float* y) {
  const int64_t D = m_shape.dim, H = m_shape.heads, hd = D / H;
  const float* kc = m_cache.keys(l);
  const float* vc = m_cache.values(l);
  float* s = m_scores.data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t hh = 0; hh < H; ++hh) {
    const float* q = qkv + hh * hd;
    float mx = -INFINITY;
    for (int64_t j = 0; j <= m_len; ++j) {
      const float* k = kc + j * D + hh * hd;
      float dot = 0.0f;
      for (int64_t c = 0; c < hd; ++c) dot += q[c] * k[c];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j <= m_len; ++j) sum += (s[j] = std::exp(s[j] - mx));
    float* out = y + hh * hd;
    std::fill(out, out + hd, 0.0f);
    for (int64_t j = 0; j <= m_len; ++j) {
      const float p = s[j] / sum;
      const float* v = vc + j * D + hh * hd;
      for (int64_t c = 0; c < hd; ++c) out[c] += p * v[c];
    }
  }
}

void CharGptGenerator::push(int32_t token) {
  const int64_t D = m_shape.dim, V = m_shape.padded_vocab;
  if (m_len >= m_shape.context) throw Error("internal: generation window overflow");
  if (token < 0 || token >= V) throw Error("token " + std::to_string(token) + " outside the vocabulary");
  std::vector<float> x(static_cast<size_t>(D)), h(static_cast<size_t>(D)), qkv(static_cast<size_t>(3 * D)),
      y(static_cast<size_t>(D)), a(static_cast<size_t>(D)), f(static_cast<size_t>(4 * D));
  for (int64_t j = 0; j < D; ++j) x[j] = m_tok[token * D + j] + m_pos[m_len * D + j];
  for (size_t l = 0; l < m_layers.size(); ++l) {
    const Layer& L = m_layers[l];
    const auto li = static_cast<int64_t>(l);
    layer_norm(x.data(), L.ln1_w, L.ln1_b, h.data(), D);
    matvec(L.qkv_w, L.qkv_b, h.data(), qkv.data(), 3 * D, D);
    m_cache.store(li, m_len, qkv.data() + D, qkv.data() + 2 * D);
    attend(li, qkv.data(), y.data());
    matvec(L.proj_w, L.proj_b, y.data(), a.data(), D, D);
    for (int64_t j = 0; j < D; ++j) x[j] += a[j];
    layer_norm(x.data(), L.ln2_w, L.ln2_b, h.data(), D);
    matvec(L.fc_w, L.fc_b, h.data(), f.data(), 4 * D, D);
    for (auto& v : f) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));  // GELU, erf form
    matvec(L.out_w, L.out_b, f.data(), a.data(), D, 4 * D);
    for (int64_t j = 0; j < D; ++j) x[j] += a[j];
  }
  layer_norm(x.data(), m_ln_w, m_ln_b, h.data(), D);
  matvec(m_head, {}, h.data(), m_logits.data(), V, D);
  ++m_len;
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
