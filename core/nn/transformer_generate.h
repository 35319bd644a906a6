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

#include "nn/decoder.h"
#include "nn/transformer.h"

namespace trainlab {

// The CPU TokenDecoder (nn/decoder.h): fp32 weights, cblas products.
class CharGptGenerator final : public TokenDecoder {
 public:
  CharGptGenerator(Backend& be, CharGpt& model);
  // `values` names the format whose values w holds (make_decoder's dequantised int4, ...).
  explicit CharGptGenerator(const CharGptWeights& w, std::string values = "fp32");
  // Continues `prompt` (tokens, at least one) by n tokens; returns only the new tokens.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t n, const SampleOptions& opt);
  // Logits (real vocabulary) after feeding `tokens` from an empty window, one position at a time
  // (for tests: compare with CharGpt::forward).
  std::vector<std::vector<float>> logits_sequence(const std::vector<int32_t>& tokens);
  double last_tokens_per_s() const { return m_tokens_per_s; }

  // TokenDecoder
  void reset() override;
  // Runs one token at the next window position through the model; fills the logits.
  void push(int32_t token) override;
  const std::vector<float>& logits() const override { return m_logits; }
  int64_t length() const override { return m_len; }
  int64_t weight_bytes_per_token() const override;
  int64_t kv_bytes(int64_t pos) const override;
  std::string describe() const override;

 private:
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b, qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, out_w, out_b;
  };

  CharGptConfig m_cfg;
  std::vector<float> m_tok, m_pos, m_ln_w, m_ln_b, m_head;
  std::vector<Layer> m_layers;
  std::vector<std::vector<float>> m_k, m_v;  // per layer [context, d]
  int64_t m_len = 0;                          // positions in the window
  std::vector<float> m_logits;                // [padded vocab]
  double m_tokens_per_s = 0.0;
  std::string m_values;
};

}  // namespace trainlab
