// Sampling and the one generation loop over any TokenDecoder (backend/token_decoder.h), so that
// every device produces the same tokens from the same logits.
//
// Window rule (with and without the KV cache): a window holds at most `context` positions; when it
// is full it is restarted from its last context/2 tokens (re-encoded at positions 0..), so that a
// long generation costs O(context) recomputation per context/2 tokens instead of per token.
// Without the cache (use_cache = false) every new token reruns the whole window through the
// decoder, one row after another, with the same per-row arithmetic, so the two modes give
// bit-identical logits (and tokens).
#pragma once
#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/token_decoder.h"

namespace trainlab {

struct SampleOptions {
  float temperature = 1.0f;  // 0: greedy (arg max, lowest index on ties)
  int64_t top_k = 0;         // 0: all tokens
  bool use_cache = true;
  uint64_t seed = 1;
  // When given and set (by another thread: the app's text panel as its window closes), generation
  // ends after the token in progress and returns the tokens drawn so far.
  const std::atomic<bool>* stop = nullptr;
};

// Arg max (lowest index on ties) or a sample from softmax(logits / T) over the top k, over the
// first `vocab` logits. The softmax is taken in double; the draw is one 53-bit uniform of rng.
int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& opt, std::mt19937_64& rng);
// The pieces of sample_token, for speculative decoding's acceptance rule (decode/speculative.h):
// the unnormalised weights exp(z_i - max z) of the distribution sample_token draws from (T > 0;
// 0 outside the top k) and their sum; one draw from such weights (one 53-bit uniform of rng, the
// first token whose running sum passes u * sum); the arg max (lowest index on ties).
std::vector<double> token_weights(const float* logits, int64_t vocab, const SampleOptions& opt, double* sum);
int32_t draw_token(const std::vector<double>& weights, double sum, std::mt19937_64& rng);
int32_t greedy_token(const float* logits, int64_t vocab);

// The window rule above: the window that remains before a token is appended to `win` (win itself
// while it has room; its last context/2 tokens when it is full). window_append appends `token` to
// `win` by the rule and brings `dec` along: one push, or a reset and the whole new window in one
// push_rows pass.
std::vector<int32_t> window_after(const std::vector<int32_t>& win, int64_t context);
void window_append(std::vector<int32_t>& win, int32_t token, int64_t context, TokenDecoder& dec, bool cache);

// Continues `prompt` (at least one token) by n tokens drawn from the decoder's first
// shape().vocab logits, with the window rule above over shape().context positions (fewer when
// opt.stop is set). tokens_per_s (when given) receives the rate of the generated tokens.
std::vector<int32_t> generate_tokens(TokenDecoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                     const SampleOptions& opt, double* tokens_per_s = nullptr);

// Several samples (decode/generate_samples.cpp): dec.batch() continuations of one prompt decoded
// side by side (TokenDecoder::push_batch, a KV cache each), by the window rule above applied to
// every sequence at once (all windows have the same length, so they restart together). Sample b
// draws from its own stream, std::mt19937_64(sample_seed(opt.seed, b)): sample 0's is opt.seed
// itself, so on a decoder whose rows equal one-sequence decoding (the CPU's) sample 0 is
// generate_tokens' text, and at temperature 0 every sample is that greedy text. tokens_per_s
// counts the tokens of all samples.
uint64_t sample_seed(uint64_t seed, int64_t b);
std::vector<std::vector<int32_t>> generate_samples(TokenDecoder& dec, const std::vector<int32_t>& prompt, int64_t n,
                                                   const SampleOptions& opt, double* tokens_per_s = nullptr);

}  // namespace trainlab
