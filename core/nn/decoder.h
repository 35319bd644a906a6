// Token-by-token decoding of a char-gpt, independent of the device (issue 5).
//
// A TokenDecoder holds a model's weights in some format and a KV cache; push() runs one token at
// the next position and leaves the logits of that position. The CPU one is CharGptGenerator
// (fp32, cblas); a backend may provide its own (the CUDA module's GEMV decoder,
// which keeps the matrices in bf16, int8 or packed int4 and so reads fewer bytes a token, and runs
// a token as one cooperative kernel).
// generate_tokens() is the one generation loop (window rule, greedy or top-k sampling) over any
// decoder, so every device produces the same tokens from the same logits.
//
// Formats: the linear matrices (blocks.*.{qkv,proj,fc,out}.weight and head.weight) are stored in
// the decoder's format; embeddings, biases and LayerNorm parameters stay fp32. For int8/int4 the
// codes and fp16 scales are those of compress/quant.h's QuantSpec (bits <= 4 in a 4-bit container,
// 5..8 in int8); CharGptWeights::as_format gives the fp32 values a format represents, which is
// what a decoder in that format computes with (the CPU reference of a quantized decoder).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tensor/quant_format.h"
#include "nn/transformer.h"

namespace trainlab {

struct SampleOptions {
  float temperature = 1.0f;  // 0: greedy (arg max, lowest index on ties)
  int64_t top_k = 0;         // 0: all tokens
  bool use_cache = true;
  uint64_t seed = 1;
};

enum class DecodeFormat : uint8_t { F32, BF16, I8, I4 };

struct DecodeSpec {
  DecodeFormat format = DecodeFormat::F32;
  QuantSpec quant;          // I8 / I4: bits, granularity, group (bits 2..4 for I4, 2..8 for I8)
  bool one_kernel = true;   // CUDA: the whole token in one cooperative kernel (grid barriers between
                            // its phases); false: a kernel per operation, as a graph or one by one
  bool cuda_graph = true;   // (one_kernel false) devices that can replay the per-token step as one graph
  bool pdl = true;          // (one_kernel false) CUDA: kernels may launch while the previous one finishes (sm_90)
  // "fp32", "bf16", "int8", "int8-channel", "int4-g32" ... (parse accepts these names).
  std::string label() const;
  static DecodeSpec parse(const std::string& name, int group);  // "fp32|bf16|int8|int4"; group for int4
  static DecodeSpec parse_label(const std::string& label);       // also "int8-channel", "int4-g64"...
  static DecodeSpec from_quant(const QuantSpec& q);  // the container for a quantized file's spec
};

// A char-gpt's fp32 weights on the host, by parameter name.
struct CharGptWeights {
  CharGptConfig cfg;
  std::map<std::string, std::vector<float>> tensors;

  static CharGptWeights from_model(Backend& be, CharGpt& model);
  const std::vector<float>& at(const std::string& name) const;  // throws Error naming a missing tensor
  // Every tensor name a decoder uses, and the subset stored in the decoder's format.
  static std::vector<std::string> all_names(const CharGptConfig& cfg);
  static std::vector<std::string> matrix_names(const CharGptConfig& cfg);
  // Rows and columns of a matrix (matrix_names only).
  std::pair<int64_t, int64_t> matrix_shape(const std::string& name) const;
  // The values the format represents: matrices rounded to bf16, or quantized and dequantized.
  CharGptWeights as_format(const DecodeSpec& spec) const;
};

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  virtual void reset() = 0;                          // empty window
  virtual void push(int32_t token) = 0;              // next position (throws past the context)
  virtual const std::vector<float>& logits() const = 0;  // of the last push, [padded vocab]
  virtual int64_t length() const = 0;                // positions in the window
  // Bytes of weights a push reads: matrices in the decoder's format, their scales and biases, two
  // embedding rows and the LayerNorm parameters (the KV cache comes on top: kv_bytes).
  virtual int64_t weight_bytes_per_token() const = 0;
  // Bytes of the KV cache a push at position `pos` reads (keys and values of pos + 1 positions).
  virtual int64_t kv_bytes(int64_t pos) const = 0;
  virtual std::string describe() const = 0;
  // Measurements where the device can make them: device time of the pushes so far (seconds), and
  // the device time of each kind of kernel in one step (microseconds), e.g. {"qkv", 12.5}.
  virtual double device_seconds() const { return 0.0; }
  virtual std::vector<std::pair<std::string, double>> profile_step() { return {}; }
};

// The decoder for a backend: CharGptGenerator over as_format(spec) on the CPU, the backend's own
// (Backend::create_decoder) elsewhere.
std::unique_ptr<TokenDecoder> make_decoder(Backend& be, const CharGptWeights& w, const DecodeSpec& spec);

// Arg max (lowest index on ties) or a sample from softmax(logits / T) over the top k, over the
// first `vocab` logits.
int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& opt, std::mt19937_64& rng);

// Continues `prompt` by n tokens (the window rule of transformer_generate.h). tokens_per_s (when
// given) receives the rate of the n generated tokens.
std::vector<int32_t> generate_tokens(TokenDecoder& dec, const CharGptConfig& cfg, const std::vector<int32_t>& prompt,
                                     int64_t n, const SampleOptions& opt, double* tokens_per_s = nullptr);

}  // namespace trainlab
