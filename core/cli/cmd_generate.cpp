// trainlab-cli generate: text from a trained char-gpt weights file (model.safetensors of a run, or a
// quantized file from `trainlab-cli quantize`), with a KV cache (default) or by rerunning the whole
// window for every token (--no-kv-cache), on the CPU or on a GPU (--device cuda) with the matrices
// in fp32, bf16, int8 or packed int4 (--weight-format; a quantized file brings its own format).
//
// --bench measures decoding instead: one JSON line per weight format (fp32, bf16, int8, int4 with
// --group) with tokens/s, the bytes a token reads and the ceiling that DRAM bandwidth puts on
// tokens/s, on --weights or on a random-initialised preset (--bench-preset small|gpt2).
//
// --draft FILE --speculate K: speculative decoding (decode/speculative.h), the draft proposing K
// tokens a round; the acceptance rate, tokens per target pass and the speed-up over the target
// alone (timed first, same prompt and options) go to stderr (and into --json).
//
// --samples B: B continuations of the prompt decoded side by side (one batched decoder, a KV cache
// each; sample b's stream seeded by sample_seed(--seed, b)), printed one labelled block each; the
// tokens/s count every sample's tokens.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "decode/decode_bench.h"
#include "decode/decoder_model.h"
#include "decode/speculative.h"
#include "decode/text_generation.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {
using Json = nlohmann::json;

// --bench: one JSON line per format; 1 when any format failed.
int print_bench(const std::string& device, const std::string& weights, const std::string& preset, const std::string& formats,
                int64_t tokens, uint64_t seed) {
  int failures = 0;
  for (const Json& r : bench_decode(device, weights, preset, formats, tokens, seed)) {
    failures += r.contains("error");
    std::printf("%s\n", r.dump().c_str());
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}

Json speculative_json(const GenerateResult& g) {
  if (!g.speculative) return Json::object();
  const SpeculativeSummary& s = *g.speculative;
  return {{"draft_format", s.draft_format},       {"speculate", s.speculate},
          {"acceptance_rate", s.acceptance_rate}, {"tokens_per_target_pass", s.tokens_per_pass},
          {"proposed", s.proposed},               {"accepted", s.accepted},
          {"target_passes", s.target_passes},     {"baseline_tokens_per_s", s.baseline_tokens_per_s},
          {"speedup", s.speedup},                 {"draft_decoder", s.draft_decoder},
          {"target_decoder", s.target_decoder},   {"draft_seconds", s.draft_seconds},
          {"target_seconds", s.target_seconds}};
}

// The seed of each sample's stream (decode/generate.h's sample_seed).
std::vector<uint64_t> sample_seeds(const GenerateRequest& req) {
  std::vector<uint64_t> out;
  for (int b = 0; b < req.samples; ++b) out.push_back(sample_seed(req.sample.seed, b));
  return out;
}

void print_generation(const GenerateRequest& req, const GenerateResult& g, bool json) {
  if (json) {
    std::printf("%s\n", Json{{"prompt", req.prompt},
                             {"text", g.text},
                             {"samples", req.samples},
                             {"texts", g.samples},
                             {"seeds", sample_seeds(req)},
                             {"tokens", req.tokens},
                             {"kv_cache", req.sample.use_cache},
                             {"device", g.device},
                             {"format", g.format},
                             {"tokens_per_s", g.tokens_per_s},
                             {"weight_bytes_per_token", g.weight_bytes_per_token},
                             {"copy_bytes_per_s", g.copy_bytes_per_s},
                             {"ceiling_tokens_per_s", g.ceiling_tokens_per_s},
                             {"speculative", speculative_json(g)}}
                            .dump()
                            .c_str());
  } else if (req.samples == 1) {
    std::printf("%s%s\n", req.prompt.c_str(), g.text.c_str());
  } else {
    const std::vector<uint64_t> seeds = sample_seeds(req);
    for (size_t b = 0; b < g.samples.size(); ++b)
      std::printf("--- sample %zu of %zu (seed %llu) ---\n%s%s\n", b + 1, g.samples.size(),
                  static_cast<unsigned long long>(seeds[b]), req.prompt.c_str(), g.samples[b].c_str());
  }
  const std::string count = req.samples == 1 ? "" : " x " + std::to_string(req.samples) + " samples";
  std::fprintf(stderr, "%ld tokens%s, %.0f tokens/s%s (%s; %s)\n", static_cast<long>(req.tokens), count.c_str(),
               g.tokens_per_s, req.samples == 1 ? "" : " over all samples", g.decoder.c_str(),
               req.sample.use_cache ? "KV cache" : "no KV cache: the window is rerun for every token");
  if (g.speculative) {
    const SpeculativeSummary& s = *g.speculative;
    std::fprintf(stderr,
                 "speculative decoding, k = %d (draft: %s; target: %s): %.1f%% of %ld proposals accepted, %.2f tokens a "
                 "target pass, %.0f tokens/s vs %.0f for the target alone: %.2fx (draft %.1f ms, target passes %.1f ms)\n",
                 s.speculate, s.draft_decoder.c_str(), s.target_decoder.c_str(), 100.0 * s.acceptance_rate,
                 static_cast<long>(s.proposed),
                 s.tokens_per_pass, g.tokens_per_s, s.baseline_tokens_per_s, s.speedup, 1e3 * s.draft_seconds,
                 1e3 * s.target_seconds);
  }
  std::fprintf(stderr,
               "%.2f MB of weights read a token; at the device's measured copy bandwidth (%.2f TB/s) that caps "
               "decoding at %.0f tokens/s%s\n",
               static_cast<double>(g.weight_bytes_per_token) / 1e6, g.copy_bytes_per_s / 1e12, g.ceiling_tokens_per_s,
               g.on_gpu && g.fits_l2 ? " (the weights fit in the H200's 50 MB L2, so a GPU can beat that cap)"
               : g.tokens_per_s > g.ceiling_tokens_per_s ? " (beaten here: a token's bytes stay in the caches)"
                                                         : "");
}
}  // namespace

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    std::string weights, prompt = "\n", device = "cpu", format, bench_preset, draft;
    int speculate = 4, samples = 1;
    long tokens = 200, top_k = 0, seed = 1;
    int group = 32;
    double temperature = 1.0;
    bool no_cache = false, json = false, bench = false, no_graph = false, no_pdl = false, one_kernel = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a trained char-gpt (KV cache; tokens per second on stderr)");
  cmd->add_option("--weights", o->weights, "A char-gpt weights file (a run's model.safetensors, or a quantized one)");
  cmd->add_option("--prompt", o->prompt, "Text to continue (characters of the model's vocabulary; default a newline)");
  // The ranges of generate's numbers: up to a million characters (the window slides past the
  // context), a temperature up to 100 (far flatter than uniform noise needs), top-k 0 (off) or a
  // count, the seed as train.seed, int4 groups as quant.group (DecodeSpec takes 32, 64 or 128).
  cmd->add_option("--tokens", o->tokens, "Characters to generate")->check(in_range(integers(1, 1e6)));
  cmd->add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy (arg max)")
      ->check(in_range(reals(0, 100)));
  cmd->add_option("--top-k", o->top_k, "Sample only among the k most likely characters (0 = all)")
      ->check(in_range(integers(0, 1 << 20)));
  cmd->add_option("--seed", o->seed, "Sampling seed (and the initialisation seed of --bench-preset)")
      ->check(in_key_range("train.seed"));
  cmd->add_flag("--no-kv-cache", o->no_cache, "Rerun the whole window for every new token (for comparison)");
  cmd->add_flag("--json", o->json, "Print one JSON object (text, tokens/s) instead of the plain text");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N");
  cmd->add_option("--weight-format", o->format,
                  "Matrices in fp32, bf16, int8 (per channel) or int4 (per group); default fp32, or a quantized file's own");
  cmd->add_option("--group", o->group, "Weights per scale for int4 (32, 64 or 128)")->check(in_key_range("quant.group"));
  cmd->add_option("--draft", o->draft,
                  "Speculative decoding: a draft char-gpt weights file (a smaller model trained on the same text, or a "
                  "quantized copy of --weights) proposing --speculate tokens a round");
  cmd->add_option("--speculate", o->speculate, "With --draft: tokens the draft proposes a round (1..16)")
      ->check(in_range(integers(1, kMaxSpeculate)));
  cmd->add_option("--samples", o->samples,
                  "Continuations of the prompt decoded side by side by one batched decoder, each with its own "
                  "sampling stream (from --seed and its number); 1..16")
      ->check(in_range(integers(1, kMaxDecodeBatch)));
  cmd->add_flag("--one-kernel", o->one_kernel,
                "GPU: the whole token in one cooperative kernel (grid barriers between its phases), instead of a kernel "
                "per operation replayed as a CUDA graph (the default)");
  cmd->add_flag("--no-graph", o->no_graph, "GPU: a kernel per operation, launched one by one instead of replayed as a graph");
  cmd->add_flag("--no-pdl", o->no_pdl,
                "GPU: each kernel launched only after the previous one has finished (no programmatic dependent launch)");
  cmd->add_flag("--bench", o->bench,
                "Measure decoding: one JSON line per format (fp32, bf16, int8, int4; or --weight-format) with tokens/s, "
                "bytes a token and the DRAM-bandwidth ceiling");
  cmd->add_option("--bench-preset", o->bench_preset, "With --bench and no --weights: a random-initialised tiny, small or gpt2");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->weights.empty() && (o->bench_preset.empty() || !o->bench))
      throw Error("generate needs --weights FILE (or --bench --bench-preset small|gpt2)");
    if (!o->bench_preset.empty() && !o->weights.empty()) throw Error("--bench-preset and --weights exclude each other");
    if (!o->bench_preset.empty() && !o->bench) throw Error("--bench-preset is for --bench");
    if (!o->draft.empty() && o->bench) throw Error("--draft is for generation, not --bench");
    if (!o->draft.empty() && o->no_cache) throw Error("--draft needs the KV cache (speculative decoding rolls it back)");
    if (o->draft.empty() && cmd->count("--speculate")) throw Error("--speculate needs --draft WEIGHTS");
    if (o->one_kernel && (o->no_graph || o->no_pdl))
      throw Error("--one-kernel runs the token as one kernel: --no-graph and --no-pdl are for the kernel-per-operation step");
    if (o->bench && cmd->count("--samples"))
      throw Error("--samples is for generation; --bench decodes one sequence (bench --case decode --batch B measures batches)");
    if (o->bench) {
      std::string formats = o->format.empty() ? "" : DecodeSpec::parse(o->format, o->group).label();
      if (!formats.empty() && o->no_graph) formats += "-nograph";
      else if (!formats.empty() && !o->one_kernel) formats += "-graph";
      return print_bench(o->device, o->weights, o->bench_preset, formats, o->tokens, static_cast<uint64_t>(o->seed));
    }

    GenerateRequest req;
    req.weights = o->weights;
    req.device = o->device;
    req.prompt = o->prompt;
    req.tokens = o->tokens;
    if (!o->format.empty()) req.format = DecodeSpec::parse(o->format, o->group);
    req.one_kernel = o->one_kernel;
    req.cuda_graph = !o->no_graph;
    req.pdl = !o->no_pdl;
    req.sample.temperature = static_cast<float>(o->temperature);
    req.sample.top_k = o->top_k;
    req.sample.use_cache = !o->no_cache;
    req.sample.seed = static_cast<uint64_t>(o->seed);
    req.draft = o->draft;
    req.speculate = o->speculate;
    req.samples = o->samples;
    const GenerateResult g = generate_text(req);
    if (!g.notice.empty()) std::fprintf(stderr, "%s\n", g.notice.c_str());
    print_generation(req, g, o->json);
    return 0;
  };
}

}  // namespace trainlab::cli
