// generate_samples (decode/generate.h): B continuations of one prompt through push_batch.
#include <chrono>
#include <random>

#include "decode/generate.h"
#include "util/error.h"

namespace trainlab {

namespace {

// The windows of all samples after appending tokens[b] to sample b by the window rule, with the
// decoder brought along: one push_batch while the windows have room (and the cache is used),
// else a reset and the new windows again, position by position. Returns the logits of the last
// pass (batch rows of [padded vocab]).
std::vector<float> append_all(std::vector<std::vector<int32_t>>& wins, const std::vector<int32_t>& tokens, int64_t ctx,
                              TokenDecoder& dec, bool cache) {
  std::vector<std::vector<int32_t>> next(wins.size());
  for (size_t b = 0; b < wins.size(); ++b) {
    next[b] = window_after(wins[b], ctx);
    next[b].push_back(tokens[b]);
  }
  std::vector<float> logits;
  if (cache && next[0].size() == wins[0].size() + 1) {
    logits = dec.push_batch(tokens);
  } else {
    dec.reset();
    std::vector<int32_t> column(wins.size());
    for (size_t i = 0; i < next[0].size(); ++i) {
      for (size_t b = 0; b < next.size(); ++b) column[b] = next[b][i];
      logits = dec.push_batch(column);
    }
  }
  wins = std::move(next);
  return logits;
}

}  // namespace

uint64_t sample_seed(uint64_t seed, int64_t b) {
  if (b == 0) return seed;
  // The standard library's seed sequence over (seed, b): well-mixed streams for neighbouring
  // seeds and sample numbers alike.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(b)};
  uint32_t words[2];
  seq.generate(words, words + 2);
  return static_cast<uint64_t>(words[0]) | (static_cast<uint64_t>(words[1]) << 32);
}

std::vector<std::vector<int32_t>> generate_samples(TokenDecoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                                   const SampleOptions& opt, double* tokens_per_s) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one character");
  const auto B = static_cast<size_t>(dec.batch());
  const int64_t ctx = dec.shape().context, vocab = dec.shape().vocab, V = dec.shape().padded_vocab;
  std::vector<std::vector<int32_t>> wins(B);
  dec.reset();
  std::vector<float> logits;
  for (int32_t t : prompt)  // the prompt is read once (prefill) in both modes, as generate_tokens
    logits = append_all(wins, std::vector<int32_t>(B, t), ctx, dec, true);
  std::vector<std::mt19937_64> rngs;
  for (size_t b = 0; b < B; ++b) rngs.emplace_back(sample_seed(opt.seed, static_cast<int64_t>(b)));
  std::vector<std::vector<int32_t>> out(B);
  std::vector<int32_t> next(B);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (opt.stop && opt.stop->load(std::memory_order_relaxed)) break;
    for (size_t b = 0; b < B; ++b) {
      next[b] = sample_token(logits.data() + b * static_cast<size_t>(V), vocab, opt, rngs[b]);
      out[b].push_back(next[b]);
    }
    if (i + 1 < n) logits = append_all(wins, next, ctx, dec, opt.use_cache);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tokens_per_s) *tokens_per_s = s > 0 ? static_cast<double>(B * out[0].size()) / s : 0.0;
  return out;
}

}  // namespace trainlab
