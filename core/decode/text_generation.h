// Text generation with a trained char-gpt weights file, as `trainlab-cli generate` runs it: load
// the file, create the backend and its decoder (the file's own format for a quantized file unless
// one is asked for), encode the prompt, generate with the KV cache or by rerunning the window,
// and time it; with a draft, speculative decoding timed beside the target alone; with several
// samples, a batched decoder continuing the prompt in each of them side by side.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/token_decoder.h"
#include "decode/generate.h"

namespace trainlab {

struct GenerateRequest {
  std::string weights;               // a char-gpt weights file (fp32 or quantized)
  std::string device = "cpu";        // cpu, auto, cuda or cuda:N
  std::string prompt = "\n";         // characters of the model's vocabulary; empty: a newline
  int64_t tokens = 200;
  std::optional<DecodeSpec> format;  // the matrices' format; nullopt: the file's own, else fp32
  bool one_kernel = false;           // DecodeSpec's launch choices, applied to whichever format
  bool cuda_graph = true;
  bool pdl = true;
  SampleOptions sample;
  // Speculative decoding (decode/speculative.h): a draft weights file (a smaller char-gpt trained
  // on the same text, or a quantized copy of the target: its own format) proposing `speculate`
  // tokens a round. The target alone is timed first on the same prompt and options (the
  // baseline of the speed-up).
  std::string draft;
  int speculate = 4;
  // Samples (1..kMaxDecodeBatch) decoded side by side by one batched decoder (DecodeSpec::batch;
  // decode/generate.h's generate_samples), each from its own stream of sample_seed(seed, b);
  // 1 is the one-sequence generation. Not with a draft.
  int samples = 1;
};

struct SpeculativeSummary {
  std::string target_decoder;      // the verifying target's TokenDecoder::describe() (DecodeSpec::verify_rows)
  std::string draft_decoder;       // the draft's TokenDecoder::describe()
  std::string draft_format;        // its format's label
  int speculate = 0;
  double acceptance_rate = 0.0;    // accepted / proposed draft tokens
  double tokens_per_pass = 0.0;    // tokens emitted per target verification pass
  double baseline_tokens_per_s = 0.0;  // the target alone, one push a token
  double speedup = 0.0;            // tokens_per_s / baseline_tokens_per_s
  int64_t proposed = 0, accepted = 0, target_passes = 0;
  double draft_seconds = 0.0, target_seconds = 0.0;  // SpeculativeStats': the draft's pushes, the target's passes
};

struct GenerateResult {
  std::string text;     // the generated characters (without the prompt); the first sample's
  std::vector<std::string> samples;  // every sample's characters (request.samples of them)
  std::string notice;   // why "auto" fell back to the CPU; empty otherwise
  std::string device;   // the backend's device name
  bool on_gpu = false;  // the device is not the CPU
  std::string format;   // DecodeSpec::label() of the decoder's format
  std::string decoder;  // TokenDecoder::describe()
  double tokens_per_s = 0.0;  // the tokens of all samples a second
  int64_t weight_bytes_per_token = 0;
  // Weights plus the KV cache at half the final window: the bytes of a typical token (with
  // several samples a step's bytes over the samples: they share one read of the weights).
  int64_t bytes_per_token = 0;
  double copy_bytes_per_s = 0.0;      // the device's copy bandwidth: its cached calibration's, else measured now
  double ceiling_tokens_per_s = 0.0;  // copy_bytes_per_s / bytes_per_token
  bool fits_l2 = false;               // bytes_per_token <= kDecodeL2Bytes
  std::optional<SpeculativeSummary> speculative;  // with a draft
};

GenerateResult generate_text(const GenerateRequest& request);

}  // namespace trainlab
