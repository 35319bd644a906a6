#include "nn/transformer_generate.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"

namespace trainlab {

namespace {
std::vector<float> fetch(Backend& be, CharGpt& model, const std::string& name) {
  Parameter* p = model.find_parameter(name);
  if (!p) throw Error("internal: char-gpt has no parameter " + name);
  std::vector<float> v(static_cast<size_t>(p->numel()));
  be.download(p->master, v.data(), DType::F32);
  return v;
}

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

CharGptGenerator::CharGptGenerator(Backend& be, CharGpt& model) : m_cfg(model.config()) {
  m_tok = fetch(be, model, "tok.weight");
  m_pos = fetch(be, model, "pos.weight");
  m_ln_w = fetch(be, model, "ln.weight");
  m_ln_b = fetch(be, model, "ln.bias");
  m_head = fetch(be, model, "head.weight");
  for (int64_t l = 0; l < m_cfg.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    Layer L;
    L.ln1_w = fetch(be, model, p + "ln1.weight");
    L.ln1_b = fetch(be, model, p + "ln1.bias");
    L.ln2_w = fetch(be, model, p + "ln2.weight");
    L.ln2_b = fetch(be, model, p + "ln2.bias");
    L.qkv_w = fetch(be, model, p + "qkv.weight");
    L.qkv_b = fetch(be, model, p + "qkv.bias");
    L.proj_w = fetch(be, model, p + "proj.weight");
    L.proj_b = fetch(be, model, p + "proj.bias");
    L.fc_w = fetch(be, model, p + "fc.weight");
    L.fc_b = fetch(be, model, p + "fc.bias");
    L.out_w = fetch(be, model, p + "out.weight");
    L.out_b = fetch(be, model, p + "out.bias");
    m_layers.push_back(std::move(L));
  }
  m_k.assign(static_cast<size_t>(m_cfg.layers), std::vector<float>(static_cast<size_t>(m_cfg.context * m_cfg.dim)));
  m_v = m_k;
  m_logits.resize(static_cast<size_t>(m_cfg.padded_vocab()));
}

void CharGptGenerator::reset() { m_len = 0; }

void CharGptGenerator::push(int32_t token) {
  const int64_t D = m_cfg.dim, H = m_cfg.heads, hd = D / H, V = m_cfg.padded_vocab();
  if (m_len >= m_cfg.context) throw Error("internal: generation window overflow");
  if (token < 0 || token >= V) throw Error("token " + std::to_string(token) + " outside the vocabulary");
  std::vector<float> x(static_cast<size_t>(D)), h(static_cast<size_t>(D)), qkv(static_cast<size_t>(3 * D)),
      y(static_cast<size_t>(D)), a(static_cast<size_t>(D)), f(static_cast<size_t>(4 * D)),
      s(static_cast<size_t>(m_len + 1));
  for (int64_t j = 0; j < D; ++j) x[j] = m_tok[token * D + j] + m_pos[m_len * D + j];
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t l = 0; l < m_layers.size(); ++l) {
    const Layer& L = m_layers[l];
    layer_norm(x.data(), L.ln1_w, L.ln1_b, h.data(), D);
    matvec(L.qkv_w, L.qkv_b, h.data(), qkv.data(), 3 * D, D);
    float* kc = m_k[l].data();
    float* vc = m_v[l].data();
    std::copy(qkv.begin() + D, qkv.begin() + 2 * D, kc + m_len * D);
    std::copy(qkv.begin() + 2 * D, qkv.end(), vc + m_len * D);
    for (int64_t hh = 0; hh < H; ++hh) {
      const float* q = qkv.data() + hh * hd;
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
      float* out = y.data() + hh * hd;
      std::fill(out, out + hd, 0.0f);
      for (int64_t j = 0; j <= m_len; ++j) {
        const float p = s[j] / sum;
        const float* v = vc + j * D + hh * hd;
        for (int64_t c = 0; c < hd; ++c) out[c] += p * v[c];
      }
    }
    matvec(L.proj_w, L.proj_b, y.data(), a.data(), D, D);
    for (int64_t j = 0; j < D; ++j) x[j] += a[j];
    layer_norm(x.data(), L.ln2_w, L.ln2_b, h.data(), D);
    matvec(L.fc_w, L.fc_b, h.data(), f.data(), 4 * D, D);
    for (auto& v : f) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    matvec(L.out_w, L.out_b, f.data(), a.data(), D, 4 * D);
    for (int64_t j = 0; j < D; ++j) x[j] += a[j];
  }
  layer_norm(x.data(), m_ln_w, m_ln_b, h.data(), D);
  matvec(m_head, {}, h.data(), m_logits.data(), V, D);
  ++m_len;
}

int32_t CharGptGenerator::sample(const SampleOptions& opt, std::mt19937_64& rng) {
  const int64_t V = m_cfg.vocab;  // padding tokens are never sampled
  if (opt.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (m_logits[i] > m_logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  std::vector<double> z(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) z[i] = static_cast<double>(m_logits[i]) / opt.temperature;
  if (opt.top_k > 0 && opt.top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(opt.top_k - 1)];
    for (auto& v : z)
      if (v < kth) v = -INFINITY;
  }
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (auto& v : z) sum += (v = std::exp(v - mx));
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * sum;
  double c = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    c += z[i];
    if (u < c) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(V - 1);
}

std::vector<std::vector<float>> CharGptGenerator::logits_sequence(const std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(tokens.size()) > m_cfg.context) throw Error("logits_sequence: longer than the context");
  reset();
  std::vector<std::vector<float>> out;
  for (int32_t t : tokens) {
    push(t);
    out.emplace_back(m_logits.begin(), m_logits.begin() + m_cfg.vocab);
  }
  return out;
}

std::vector<int32_t> CharGptGenerator::generate(const std::vector<int32_t>& prompt, int64_t n, const SampleOptions& opt) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one character");
  const int64_t ctx = m_cfg.context;
  std::vector<int32_t> win;  // tokens in the current window
  // Appends one token, restarting the window from its last ctx/2 tokens when it is full. With the
  // cache, an append costs one row; without it the whole window is rerun.
  auto advance = [&](int32_t token, bool cache) {
    std::vector<int32_t> w = win;
    if (static_cast<int64_t>(w.size()) == ctx) w.assign(w.end() - std::max<int64_t>(1, ctx / 2), w.end());
    if (ctx == 1) w.clear();
    w.push_back(token);
    if (cache && w.size() == win.size() + 1) {
      push(token);
    } else {
      reset();
      for (int32_t t : w) push(t);
    }
    win = std::move(w);
  };
  reset();
  for (int32_t t : prompt) advance(t, true);  // the prompt is read once (prefill) in both modes
  std::mt19937_64 rng(opt.seed);
  std::vector<int32_t> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t next = sample(opt, rng);
    out.push_back(next);
    if (i + 1 < n) advance(next, opt.use_cache);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m_tokens_per_s = s > 0 ? static_cast<double>(n) / s : 0.0;
  return out;
}

}  // namespace trainlab
