#include "decode/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "util/error.h"

namespace trainlab {

std::vector<double> token_weights(const float* logits, int64_t V, const SampleOptions& opt, double* sum) {
  std::vector<double> z(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) z[i] = static_cast<double>(logits[i]) / opt.temperature;
  if (opt.top_k > 0 && opt.top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(opt.top_k - 1)];
    for (auto& v : z)
      if (v < kth) v = -INFINITY;
  }
  const double mx = *std::max_element(z.begin(), z.end());
  double s = 0.0;
  for (auto& v : z) s += (v = std::exp(v - mx));
  *sum = s;
  return z;
}

int32_t draw_token(const std::vector<double>& weights, double sum, std::mt19937_64& rng) {
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * sum;
  double c = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    c += weights[i];
    if (u < c) return static_cast<int32_t>(i);
  }
  // u reached the end through rounding: the last token of nonzero weight.
  for (size_t i = weights.size(); i-- > 0;)
    if (weights[i] > 0) return static_cast<int32_t>(i);
  return static_cast<int32_t>(weights.size() - 1);
}

int32_t greedy_token(const float* logits, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

int32_t sample_token(const float* logits, int64_t V, const SampleOptions& opt, std::mt19937_64& rng) {
  if (opt.temperature <= 0.0f) return greedy_token(logits, V);
  double sum = 0.0;
  const std::vector<double> z = token_weights(logits, V, opt, &sum);
  return draw_token(z, sum, rng);
}

void window_append(std::vector<int32_t>& win, int32_t token, int64_t ctx, TokenDecoder& dec, bool cache) {
  std::vector<int32_t> w = window_after(win, ctx);
  w.push_back(token);
  if (cache && w.size() == win.size() + 1) {
    dec.push(token);
  } else {
    dec.reset();
    dec.push_rows(w);  // one pass where the decoder can (the same logits as a push a token)
  }
  win = std::move(w);
}

std::vector<int32_t> window_after(const std::vector<int32_t>& win, int64_t ctx) {
  if (static_cast<int64_t>(win.size()) < ctx) return win;
  if (ctx == 1) return {};
  return std::vector<int32_t>(win.end() - std::max<int64_t>(1, ctx / 2), win.end());
}

std::vector<int32_t> generate_tokens(TokenDecoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                     const SampleOptions& opt, double* tokens_per_s) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one character");
  const int64_t ctx = dec.shape().context, vocab = dec.shape().vocab;
  std::vector<int32_t> win;  // tokens in the current window
  // Appends one token by the window rule: with the cache an append costs one row; without it the
  // whole window is rerun.
  auto advance = [&](int32_t token, bool cache) { window_append(win, token, ctx, dec, cache); };
  dec.reset();
  for (int32_t t : prompt) advance(t, true);  // the prompt is read once (prefill) in both modes
  std::mt19937_64 rng(opt.seed);
  std::vector<int32_t> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (opt.stop && opt.stop->load(std::memory_order_relaxed)) break;
    const int32_t next = sample_token(dec.logits().data(), vocab, opt, rng);
    out.push_back(next);
    if (i + 1 < n) advance(next, opt.use_cache);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tokens_per_s) *tokens_per_s = s > 0 ? static_cast<double>(out.size()) / s : 0.0;
  return out;
}

}  // namespace trainlab
