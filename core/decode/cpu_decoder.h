// The CPU TokenDecoder (backend/token_decoder.h): fp32 weights on the host, matrix products that
// read each weight row once for all the rows of a pass (fp32 dot products in a fixed order: 8
// partial sums, so a row's result does not depend on the rows beside it), attention and
// LayerNorm in plain fp32 loops,
// and a KvCache (decode/kv_cache.h) a sequence (DecodeSpec::batch sequences side by side:
// push_batch). It is the reference the GPU decoder is compared with: on
// DecodeWeights::as_format(spec) it computes with exactly the values a decoder in that format
// represents.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/token_decoder.h"
#include "decode/generate.h"
#include "decode/kv_cache.h"

namespace trainlab {

class Backend;
class CharGpt;

class CharGptGenerator final : public TokenDecoder {
 public:
  // The model's fp32 master weights (decode/decoder.h's decode_weights).
  CharGptGenerator(Backend& be, CharGpt& model);
  // `values` names the format whose values w holds (make_decoder's dequantised int4, ...);
  // `batch` sequences side by side (push_batch), each with its own KvCache.
  explicit CharGptGenerator(const DecodeWeights& w, std::string values = "fp32", int64_t batch = 1);
  // Continues `prompt` (tokens, at least one) by n tokens; returns only the new tokens.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t n, const SampleOptions& opt);
  // Logits (real vocabulary) after feeding `tokens` from an empty window, one position at a time
  // (for tests: compare with CharGpt::forward).
  std::vector<std::vector<float>> logits_sequence(const std::vector<int32_t>& tokens);
  double last_tokens_per_s() const { return m_tokens_per_s; }

  // TokenDecoder
  const DecoderShape& shape() const override { return m_shape; }
  void reset() override;
  // Runs one token at the next window position through the model; fills the logits.
  void push(int32_t token) override;
  // Several tokens in one pass over the weights (speculative decoding's verification); row i is
  // bit-identical to push(tokens[i]) at that position.
  std::vector<float> push_rows(const std::vector<int32_t>& tokens) override;
  // One token a sequence at position length(), in one pass over the weights (as push_rows); row b
  // is bit-identical to sequence b decoded alone by push().
  std::vector<float> push_batch(const std::vector<int32_t>& tokens) override;
  int64_t batch() const override { return static_cast<int64_t>(m_caches.size()); }
  void truncate(int64_t length) override;
  const std::vector<float>& logits() const override { return m_logits; }
  int64_t length() const override { return m_len; }
  int64_t weight_bytes_per_token() const override;
  int64_t kv_bytes(int64_t pos) const override { return batch() * m_caches[0].bytes_read(pos); }
  std::string describe() const override;

 private:
  struct Layer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b, qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, out_w, out_b;
  };
  // Attention of the token at position `pos` over the cached positions 0..pos of layer l of
  // `cache`: y [D] from the q part (the first D entries) of the token's qkv row.
  void attend(const KvCache& cache, int64_t l, int64_t pos, const float* qkv, float* y);
  // The pass of push_rows (across = false: row r at position length() + r of sequence 0) and of
  // push_batch (across = true: row r at position length() of sequence r).
  std::vector<float> forward(const std::vector<int32_t>& tokens, bool across);

  DecoderShape m_shape;
  std::vector<float> m_tok, m_pos, m_ln_w, m_ln_b, m_head;
  std::vector<Layer> m_layers;
  std::vector<KvCache> m_caches;  // one a sequence
  int64_t m_len = 0;            // positions in the window
  std::vector<float> m_logits;  // [padded vocab]
  std::vector<float> m_scores;  // attention scratch [context]
  double m_tokens_per_s = 0.0;
  std::string m_values;
};

}  // namespace trainlab
