#include "decode/text_generation.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/bandwidth.h"
#include "backend/calibration.h"
#include "data/text.h"
#include "decode/decoder.h"
#include "decode/decoder_model.h"
#include "decode/speculative.h"
#include "util/error.h"

namespace trainlab {

namespace {

// The draft of a speculative request: its file's own format (an int4 copy decodes in int4 on a
// GPU), checked against the target's vocabulary and context.
std::unique_ptr<TokenDecoder> make_draft(Backend& be, const GenerateRequest& r, const DecoderModel& target,
                                         std::string& format) {
  const DecoderModel d = load_decoder_model(r.draft);
  if (d.vocab != target.vocab)
    throw Error(r.draft + ": the draft's vocabulary (" + std::to_string(d.weights.shape.vocab) +
                " characters) is not the target's (" + std::to_string(target.weights.shape.vocab) +
                " characters): train the draft on the same text");
  try {
    check_draft(target.weights.shape, d.weights.shape);
  } catch (const Error& e) {
    throw Error(r.draft + ": " + e.what());
  }
  DecodeSpec spec = d.format.value_or(DecodeSpec{});
  spec.one_kernel = r.one_kernel;
  spec.cuda_graph = r.cuda_graph;
  spec.pdl = r.pdl;
  format = spec.label();
  return make_decoder(be, d.weights, spec);
}

// Speculative decoding: the target alone (`dec`, one push a token) timed first as the baseline,
// then a verifying decoder of the same weights and format (DecodeSpec::verify_rows = K + 1: on a
// GPU its pass over the K + 1 rows reads each weight once) checking the draft's proposals. The
// baseline is released before the verifying decoder is made (a GPU holds one copy of the target
// at a time), and `dec` is the verifying decoder afterwards.
std::vector<int32_t> generate_speculative(Backend& be, const GenerateRequest& r, const DecoderModel& m,
                                          std::unique_ptr<TokenDecoder>& dec, const DecodeSpec& spec,
                                          const std::vector<int32_t>& prompt, GenerateResult& out) {
  if (r.speculate < 1 || r.speculate > kMaxSpeculate)
    throw Error("--speculate must be 1.." + std::to_string(kMaxSpeculate) + ", got " + std::to_string(r.speculate));
  SpeculativeSummary s;
  auto draft = make_draft(be, r, m, s.draft_format);
  generate_tokens(*dec, prompt, r.tokens, r.sample, &s.baseline_tokens_per_s);
  DecodeSpec vspec = spec;
  vspec.verify_rows = std::min<int>(r.speculate + 1, static_cast<int>(kMaxDecodeBatch));
  dec.reset();
  dec = make_decoder(be, m.weights, vspec);
  TokenDecoder& target = *dec;
  s.target_decoder = target.describe();
  SpeculativeStats st;
  std::vector<int32_t> tokens = speculative_generate(target, *draft, prompt, r.tokens, r.speculate, r.sample, &st);
  out.tokens_per_s = st.tokens_per_s();
  s.draft_decoder = draft->describe();
  s.speculate = r.speculate;
  s.acceptance_rate = st.acceptance_rate();
  s.tokens_per_pass = st.tokens_per_pass();
  s.speedup = s.baseline_tokens_per_s > 0 ? out.tokens_per_s / s.baseline_tokens_per_s : 0.0;
  s.proposed = st.proposed;
  s.accepted = st.accepted;
  s.target_passes = st.target_passes;
  s.draft_seconds = st.draft_seconds;
  s.target_seconds = st.target_seconds;
  out.speculative = s;
  return tokens;
}

// The sample count is in range and goes with the other options (a draft verifies one sequence).
void check_samples(const GenerateRequest& r) {
  if (r.samples < 1 || r.samples > kMaxDecodeBatch)
    throw Error("--samples " + std::to_string(r.samples) + ": expected 1.." + std::to_string(kMaxDecodeBatch) +
                " (sequences one batched decoder holds)");
  if (r.samples > 1 && !r.draft.empty())
    throw Error("--samples " + std::to_string(r.samples) +
                " with --draft: speculative decoding continues one sequence; expected --samples 1 or no --draft");
}

}  // namespace

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
  check_samples(r);
  spec.batch = r.samples;
  if (spec.batch > 1) spec.one_kernel = false;  // a batch runs a kernel per operation (DecodeSpec::batch)
  auto dec = make_decoder(*be, m.weights, spec);
  if (r.samples > 1) {
    for (const auto& t : generate_samples(*dec, prompt, r.tokens, r.sample, &out.tokens_per_s))
      out.samples.push_back(vocab.decode(t));
  } else {
    const std::vector<int32_t> tokens = r.draft.empty()
                                            ? generate_tokens(*dec, prompt, r.tokens, r.sample, &out.tokens_per_s)
                                            : generate_speculative(*be, r, m, dec, spec, prompt, out);
    out.samples.push_back(vocab.decode(tokens));
  }
  out.text = out.samples.front();
  out.device = be->info().name;
  out.on_gpu = be->info().kind != DeviceKind::Cpu;
  out.format = spec.label();
  out.decoder = dec->describe();
  out.weight_bytes_per_token = dec->weight_bytes_per_token();
  const int64_t step_bytes =  // one read of the weights, and every sample's cache
      out.weight_bytes_per_token + dec->kv_bytes(std::min<int64_t>(m.weights.shape.context, dec->length()) / 2);
  out.bytes_per_token = step_bytes / r.samples;
  // The device's calibration has it when cached (a run's MFU measured it); else measured now.
  const std::optional<Calibration> cal = cached_calibration(*be);
  out.copy_bytes_per_s = cal ? cal->bandwidth_bytes_per_s : measure_copy_bandwidth(*be).bytes_per_s;
  out.ceiling_tokens_per_s = out.copy_bytes_per_s * r.samples / static_cast<double>(step_bytes);
  out.fits_l2 = step_bytes <= kDecodeL2Bytes;
  return out;
}

}  // namespace trainlab
