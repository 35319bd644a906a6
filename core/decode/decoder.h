// The entry point of token decoding: a model's weights as a decoder takes them (DecodeWeights,
// backend/token_decoder.h) and the decoder for a backend. The CPU decoder is CharGptGenerator
// (decode/cpu_decoder.h); other backends bring their own through Backend::create_decoder.
#pragma once
#include <memory>

#include "backend/token_decoder.h"

namespace trainlab {

class Backend;
class CharGpt;
struct CharGptConfig;

// The decoder shape of a char-gpt (its padded vocabulary included).
DecoderShape decoder_shape(const CharGptConfig& cfg);
// The char-gpt's fp32 master weights, downloaded from `be`, under the names of
// backend/token_decoder.h (the model's own parameter names).
DecodeWeights decode_weights(Backend& be, CharGpt& model);

// The decoder for a backend: CharGptGenerator over w.as_format(spec) on the CPU (it computes with
// the values the format represents), the backend's own (Backend::create_decoder) elsewhere; a
// backend without one throws "token decoding is not implemented on <device>".
std::unique_ptr<TokenDecoder> make_decoder(Backend& be, const DecodeWeights& w, const DecodeSpec& spec);

}  // namespace trainlab
