#include "decode/decoder.h"

#include "backend/backend.h"
#include "decode/cpu_decoder.h"
#include "nn/parameter.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

DecoderShape decoder_shape(const CharGptConfig& cfg) {
  DecoderShape s;
  s.vocab = cfg.vocab;
  s.padded_vocab = cfg.padded_vocab();
  s.layers = cfg.layers;
  s.heads = cfg.heads;
  s.dim = cfg.dim;
  s.context = cfg.context;
  return s;
}

DecodeWeights decode_weights(Backend& be, CharGpt& model) {
  DecodeWeights w;
  w.shape = decoder_shape(model.config());
  for (const std::string& name : DecodeWeights::all_names(w.shape)) {
    Parameter* p = model.find_parameter(name);
    if (!p) throw Error("internal: char-gpt has no parameter " + name);
    std::vector<float> v(static_cast<size_t>(p->numel()));
    be.download(p->master, v.data(), DType::F32);
    w.tensors[name] = std::move(v);
  }
  return w;
}

std::unique_ptr<TokenDecoder> make_decoder(Backend& be, const DecodeWeights& w, const DecodeSpec& spec) {
  // A backend with a decoder of its own for the format (the CUDA module's GEMV decoder) runs it;
  // the CPU decodes with the fp32 reference over the values the format represents.
  if (be.supports(Op::Decode, decode_format_dtype(spec.format))) return be.create_decoder(w, spec);
  if (be.info().kind == DeviceKind::Cpu) return std::make_unique<CharGptGenerator>(w.as_format(spec), spec.label(), spec.batch);
  return be.create_decoder(w, spec);  // throws: Decode is not supported on this device
}

}  // namespace trainlab
