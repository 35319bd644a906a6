#include "decode/text_generation.h"

#include <algorithm>

#include "backend/backend.h"
#include "data/text.h"
#include "decode/decoder.h"
#include "decode/decoder_model.h"
#include "util/error.h"

namespace trainlab {

GenerateResult generate_text(const GenerateRequest& r) {
  const DecoderModel m = load_decoder_model(r.weights);
  GenerateResult out;
  auto be = create_backend(r.device, &out.notice);
  DecodeSpec spec = r.format ? *r.format : m.format.value_or(DecodeSpec{});
  spec.one_kernel = r.one_kernel;
  spec.cuda_graph = r.cuda_graph;
  spec.pdl = r.pdl;

  if (m.vocab.empty()) throw Error(r.weights + ": the architecture does not store the vocabulary");
  const TextCorpus vocab = TextCorpus::from_vocabulary(m.vocab, r.weights + ": the stored vocabulary");
  const std::vector<int32_t> prompt = vocab.encode(r.prompt.empty() ? std::string("\n") : r.prompt, "the prompt");
  auto dec = make_decoder(*be, m.weights, spec);
  const std::vector<int32_t> tokens = generate_tokens(*dec, prompt, r.tokens, r.sample, &out.tokens_per_s);
  out.text = vocab.decode(tokens);
  out.device = be->info().name;
  out.on_gpu = be->info().kind != DeviceKind::Cpu;
  out.format = spec.label();
  out.decoder = dec->describe();
  out.weight_bytes_per_token = dec->weight_bytes_per_token();
  out.bytes_per_token =
      out.weight_bytes_per_token + dec->kv_bytes(std::min<int64_t>(m.weights.shape.context, dec->length()) / 2);
  out.ceiling_tokens_per_s = kDecodeDramBytesPerS / static_cast<double>(out.bytes_per_token);
  out.fits_l2 = out.bytes_per_token <= kDecodeL2Bytes;
  return out;
}

}  // namespace trainlab
