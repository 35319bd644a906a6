// A char-gpt as token decoding takes it: its DecodeWeights and vocabulary, loaded from a weights
// file (a run's model.safetensors or a quantized file from `trainlab-cli quantize`) or
// random-initialised from a preset (for decode benchmarks without a trained model).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "backend/token_decoder.h"

namespace trainlab {

struct DecoderModel {
  DecodeWeights weights;             // fp32 (a quantized file is dequantized on load)
  std::string vocab;                 // the vocabulary's characters, UTF-8 (empty for a preset)
  std::optional<DecodeSpec> format;  // a quantized file's own format (one spec for every matrix)
  std::string name;                  // the file, or "<preset> (random init)"
  int64_t params = 0;
};

// Throws Error naming the file when it is not a char-gpt written by the lab, or when its matrices
// are quantized with different specs (a decoder keeps one format).
DecoderModel load_decoder_model(const std::string& path);
// preset: a training preset (tiny, small, gpt2) or `xl`, a decode-benchmark size only (24 layers x
// 2048, 16 heads, context 1024, 1.21 B parameters, as shared/bench/peer_torch_decode.py's xl).
DecoderModel random_decoder_model(const std::string& preset, uint64_t seed);

// A token reads its weights and its KV cache once, so the measured copy bandwidth
// (backend/bandwidth.h) / bytes a token bounds tokens/s -- unless the bytes fit in L2: the H200's
// datasheet L2, against which a decode figure is flagged.
constexpr int64_t kDecodeL2Bytes = 50ll << 20;

}  // namespace trainlab
