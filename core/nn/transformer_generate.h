// Text generation with a trained CharGpt, on the host in fp32 (the model's fp32 master weights).
//
// KV cache: every layer keeps the keys and values of the positions seen so far; a new token runs
// through the blocks as one row, appends its k and v, and attends over the cache (the prefix is
// never recomputed). Without the cache (use_cache = false) every new token reruns the whole
// window through the model, one row after another, with the same per-row arithmetic, so the two
// give bit-identical logits.
//
// Window rule (both modes): a window holds at most `context` positions; when it is full it is
// restarted from its last context/2 tokens (re-encoded at positions 0..), so that a long
// generation costs O(context) recomputation per context/2 tokens instead of per token.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace trainlab {

struct SampleOptions {
  float temperature = 1.0f;  // 0: greedy (arg max, lowest index on ties)
  int64_t top_k = 0;         // 0: all tokens
  bool use_cache = true;
  uint64_t seed = 1;
};

class CharGptGenerator {
 public:
  CharGptGenerator(Backend& be, CharGpt& model);
  // Continues `prompt` (tokens, at least one) by n tokens; returns only the new tokens.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t n, const SampleOptions& opt);
  // Logits (real vocabulary) after feeding `tokens` from an empty window, one position at a time
  // (for tests: compare with CharGpt::forward).
  std::vector<std::vector<float>> logits_sequence(const std::vector<int32_t>& tokens);
  double last_tokens_per_s() const { return m_tokens_per_s; }

 private:
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b, qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, out_w, out_b;
  };
  void reset();
  // Runs one token at the next window position through the model; fills m_logits.
  void push(int32_t token);
  int32_t sample(const SampleOptions& opt, std::mt19937_64& rng);

  CharGptConfig m_cfg;
  std::vector<float> m_tok, m_pos, m_ln_w, m_ln_b, m_head;
  std::vector<Layer> m_layers;
  std::vector<std::vector<float>> m_k, m_v;  // per layer [context, d]
  int64_t m_len = 0;                          // positions in the window
  std::vector<float> m_logits;                // [padded vocab]
  double m_tokens_per_s = 0.0;
};

}  // namespace trainlab
