// trainlab-cli generate: text from a trained char-gpt weights file (model.safetensors of a run, or a
// quantized file from `trainlab-cli quantize`), with a KV cache (default) or by rerunning the whole
// window for every token (--no-kv-cache), on the CPU or on a GPU (--device cuda) with the matrices
// in fp32, bf16, int8 or packed int4 (--weight-format; a quantized file brings its own format).
//
// --bench measures decoding instead: one JSON line per weight format (fp32, bf16, int8, int4 with
// --group) with tokens/s, the bytes a token reads and the ceiling that DRAM bandwidth puts on
// tokens/s, on --weights or on a random-initialised preset (--bench-preset small|gpt2).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>

#include "backend/backend.h"
#include "cli/bench_decode.h"
#include "cli/commands.h"
#include "compress/quant.h"
#include "data/text.h"
#include "decode/decoder.h"
#include "decode/generate.h"
#include "io/safetensors.h"
#include "nn/transformer.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {
// H200 datasheet numbers for the ceiling: HBM3e bandwidth and L2 size.
constexpr double kDramBytesPerS = 4.8e12;
constexpr int64_t kL2Bytes = 50ll << 20;

// The format a quantized file's matrices are in (one spec for all of them; the GPU decoder keeps
// one format), or nullopt for an fp32 file.
std::optional<DecodeSpec> file_format(const SafeTensorsFile& f, const DecoderShape& shape, const std::string& path) {
  if (!is_quantized_file(f)) return std::nullopt;
  const Json q = Json::parse(f.metadata.at("trainlab_quant"));
  std::optional<QuantSpec> spec;
  for (const std::string& name : DecodeWeights::matrix_names(shape)) {
    if (!q.contains(name)) throw Error(path + ": matrix '" + name + "' is not quantized; pass --weight-format to choose one format");
    const QuantSpec s = QuantSpec::from_json(q.at(name));
    if (spec && (s.bits != spec->bits || s.granularity != spec->granularity ||
                 (s.granularity == QuantGranularity::Group && s.group != spec->group)))
      throw Error(path + ": the matrices are quantized with different specs (" + spec->label() + ", " + s.label() +
                  "); the GPU decoder keeps one format: pass --weight-format");
    spec = s;
  }
  return DecodeSpec::from_quant(*spec);
}

struct Loaded {
  DecodeWeights weights;
  std::string vocab;
  std::optional<DecodeSpec> format;  // of a quantized file
  std::string name;
  int64_t params = 0;
};

Loaded load_char_gpt(const std::string& path) {
  const SafeTensorsFile f = read_safetensors(path);
  const auto it = f.metadata.find("trainlab_architecture");
  if (it == f.metadata.end())
    throw Error(path + ": no trainlab_architecture in the metadata (not a weights file written by the lab)");
  const Json arch = Json::parse(it->second);
  if (arch.value("kind", "") != "char-gpt")
    throw Error(path + ": a " + arch.value("kind", std::string("?")) + " model; generate needs a char-gpt");
  auto cpu = create_backend("cpu");
  auto model = build_char_gpt(*cpu, arch, 0);
  load_weights_any(*cpu, *model, f, path);  // quantized files are dequantized on load
  Loaded out;
  out.weights = decode_weights(*cpu, *model);
  out.vocab = model->config().chars;
  out.format = file_format(f, out.weights.shape, path);
  out.name = path;
  out.params = model->parameter_count();
  return out;
}

Loaded random_char_gpt(const std::string& preset, uint64_t seed) {
  CharGptConfig cfg = CharGptConfig::preset(preset);
  auto cpu = create_backend("cpu");
  CharGpt model(*cpu, cfg, seed);
  Loaded out;
  out.weights = decode_weights(*cpu, model);
  out.name = preset + " (random init)";
  out.params = model.parameter_count();
  return out;
}

// Decodes n tokens greedily from token 0 (after one untimed push that captures the graph).
Json bench_format(Backend& be, const Loaded& m, const DecodeSpec& spec, int64_t n) {
  const DecoderShape& shape = m.weights.shape;
  n = std::min<int64_t>(n, shape.context - 1);
  auto dec = make_decoder(be, m.weights, spec);
  dec->reset();
  dec->push(0);
  int64_t kv = 0;
  const double dev0 = dec->device_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float>& z = dec->logits();
    const int32_t next = static_cast<int32_t>(std::max_element(z.begin(), z.begin() + shape.vocab) - z.begin());
    kv += dec->kv_bytes(dec->length());
    dec->push(next);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tps = s > 0 ? static_cast<double>(n) / s : 0.0;
  const double dev_us = n > 0 ? 1e6 * (dec->device_seconds() - dev0) / static_cast<double>(n) : 0.0;
  Json kernels = Json::object();  // device microseconds a step by kernel kind (eager, no PDL)
  for (const auto& [kind, us] : dec->profile_step()) kernels[kind] = us;
  const int64_t wbytes = dec->weight_bytes_per_token(), kv_mean = n > 0 ? kv / n : 0;
  const double ceiling = kDramBytesPerS / static_cast<double>(wbytes + kv_mean);
  return Json{{"case", "decode"},
                           {"model", m.name},
                           {"params", m.params},
                           {"device", be.info().name},
                           {"format", spec.label()},
                           {"one_kernel", spec.one_kernel},
                           {"cuda_graph", spec.cuda_graph},
                           {"pdl", spec.pdl},
                           {"decoder", dec->describe()},
                           {"tokens", n},
                           {"tokens_per_s", tps},
                           {"us_per_token", tps > 0 ? 1e6 / tps : 0.0},
                           {"device_us_per_token", dev_us},
                           {"kernel_us_eager", kernels},
                           {"weight_bytes_per_token", wbytes},
                           {"kv_bytes_per_token", kv_mean},
                           {"bytes_per_token", wbytes + kv_mean},
                           {"dram_bytes_per_s", kDramBytesPerS},
                           {"ceiling_tokens_per_s", ceiling},
                           {"fraction_of_ceiling", tps / ceiling},
                           {"weights_fit_l2", wbytes + kv_mean <= kL2Bytes}};
}

std::vector<DecodeSpec> bench_specs(const std::string& formats, const Loaded& m, bool cpu) {
  std::vector<DecodeSpec> out;
  if (formats.empty()) {
    if (m.format) return {*m.format};
    for (const char* f : {"fp32", "bf16", "int8", "int4"})
      if (!cpu || std::string(f) == "fp32") out.push_back(DecodeSpec::parse(f, 32));  // the CPU has no low-bit storage
    if (!cpu)  // the same step as a kernel per operation, replayed as a graph and launched one by one
      for (const bool graph : {true, false})
        for (const char* f : {"bf16", "int4"}) {
          DecodeSpec e = DecodeSpec::parse(f, 32);
          e.one_kernel = false;
          e.cuda_graph = e.pdl = graph;
          out.push_back(e);
        }
    return out;
  }
  std::stringstream ss(formats);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto strip = [&](const std::string& suffix) {
      const bool has = item.size() > suffix.size() && item.compare(item.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (has) item.resize(item.size() - suffix.size());
      return has;
    };
    const bool nograph = strip("-nograph"), graph = !nograph && strip("-graph");
    DecodeSpec s = DecodeSpec::parse_label(item);
    s.one_kernel = !nograph && !graph;
    s.cuda_graph = s.pdl = !nograph;
    out.push_back(s);
  }
  return out;
}
}  // namespace

std::vector<Json> bench_decode(const std::string& device, const std::string& weights, const std::string& preset,
                               const std::string& formats, int64_t tokens, uint64_t seed) {
  const Loaded m = weights.empty() ? random_char_gpt(preset.empty() ? "small" : preset, seed) : load_char_gpt(weights);
  auto be = create_backend(device);
  std::vector<Json> out;
  for (const DecodeSpec& s : bench_specs(formats, m, be->info().kind == DeviceKind::Cpu)) {
    try {
      out.push_back(bench_format(*be, m, s, tokens));
    } catch (const Error& e) {
      out.push_back(Json{{"case", "decode"}, {"model", m.name}, {"format", s.label()}, {"error", e.what()}});
    }
  }
  return out;
}

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    std::string weights, prompt = "\n", device = "cpu", format, bench_preset;
    long tokens = 200, top_k = 0, seed = 1;
    int group = 32;
    double temperature = 1.0;
    bool no_cache = false, json = false, bench = false, no_graph = false, no_pdl = false, kernels = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a trained char-gpt (KV cache; tokens per second on stderr)");
  cmd->add_option("--weights", o->weights, "A char-gpt weights file (a run's model.safetensors, or a quantized one)");
  cmd->add_option("--prompt", o->prompt, "Text to continue (characters of the model's vocabulary; default a newline)");
  cmd->add_option("--tokens", o->tokens, "Characters to generate");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy (arg max)");
  cmd->add_option("--top-k", o->top_k, "Sample only among the k most likely characters (0 = all)");
  cmd->add_option("--seed", o->seed, "Sampling seed (and the initialisation seed of --bench-preset)");
  cmd->add_flag("--no-kv-cache", o->no_cache, "Rerun the whole window for every new token (for comparison)");
  cmd->add_flag("--json", o->json, "Print one JSON object (text, tokens/s) instead of the plain text");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N");
  cmd->add_option("--weight-format", o->format,
                  "Matrices in fp32, bf16, int8 (per channel) or int4 (per group); default fp32, or a quantized file's own");
  cmd->add_option("--group", o->group, "Weights per scale for int4 (32, 64 or 128)");
  cmd->add_flag("--kernels", o->kernels,
                "GPU: a kernel per operation replayed as a CUDA graph, instead of the whole token in one cooperative kernel");
  cmd->add_flag("--no-graph", o->no_graph, "GPU: a kernel per operation, launched one by one (implies --kernels)");
  cmd->add_flag("--no-pdl", o->no_pdl,
                "GPU: a kernel per operation, each launched only after the previous one has finished (implies --kernels)");
  cmd->add_flag("--bench", o->bench,
                "Measure decoding: one JSON line per format (fp32, bf16, int8, int4; or --weight-format) with tokens/s, "
                "bytes a token and the DRAM-bandwidth ceiling");
  cmd->add_option("--bench-preset", o->bench_preset, "With --bench and no --weights: a random-initialised tiny, small or gpt2");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->tokens < 0) throw Error("--tokens must be >= 0");
    if (o->temperature < 0) throw Error("--temperature must be >= 0");
    if (o->weights.empty() && (o->bench_preset.empty() || !o->bench))
      throw Error("generate needs --weights FILE (or --bench --bench-preset small|gpt2)");
    if (!o->bench_preset.empty() && !o->weights.empty()) throw Error("--bench-preset and --weights exclude each other");
    if (!o->bench_preset.empty() && !o->bench) throw Error("--bench-preset is for --bench");
    if (o->bench) {
      std::string formats = o->format.empty() ? "" : DecodeSpec::parse(o->format, o->group).label();
      if (!formats.empty() && o->no_graph) formats += "-nograph";
      else if (!formats.empty() && o->kernels) formats += "-graph";
      int failures = 0;
      for (const Json& r : bench_decode(o->device, o->weights, o->bench_preset, formats, o->tokens,
                                        static_cast<uint64_t>(o->seed))) {
        failures += r.contains("error");
        std::printf("%s\n", r.dump().c_str());
        std::fflush(stdout);
      }
      return failures ? 1 : 0;
    }

    const Loaded m = load_char_gpt(o->weights);
    std::string notice;
    auto be = create_backend(o->device, &notice);
    if (!notice.empty()) std::fprintf(stderr, "%s\n", notice.c_str());
    DecodeSpec spec = !o->format.empty() ? DecodeSpec::parse(o->format, o->group) : m.format.value_or(DecodeSpec{});
    spec.one_kernel = !o->kernels && !o->no_graph && !o->no_pdl;
    spec.cuda_graph = !o->no_graph;
    spec.pdl = !o->no_pdl;

    TextCorpus vocab;
    vocab.chars = m.vocab;
    if (vocab.chars.empty()) throw Error(o->weights + ": the architecture does not store the vocabulary");
    const std::vector<int32_t> prompt = vocab.encode(o->prompt.empty() ? std::string("\n") : o->prompt);
    auto dec = make_decoder(*be, m.weights, spec);
    SampleOptions so;
    so.temperature = static_cast<float>(o->temperature);
    so.top_k = o->top_k;
    so.use_cache = !o->no_cache;
    so.seed = static_cast<uint64_t>(o->seed);
    double tps = 0.0;
    const std::vector<int32_t> out = generate_tokens(*dec, prompt, o->tokens, so, &tps);
    const std::string text = vocab.decode(out);
    const int64_t wbytes = dec->weight_bytes_per_token();
    const int64_t bytes = wbytes + dec->kv_bytes(std::min<int64_t>(m.weights.shape.context, dec->length()) / 2);
    const double ceiling = kDramBytesPerS / static_cast<double>(bytes);
    if (o->json) {
      std::printf("%s\n", Json{{"prompt", o->prompt},
                               {"text", text},
                               {"tokens", o->tokens},
                               {"kv_cache", so.use_cache},
                               {"device", be->info().name},
                               {"format", spec.label()},
                               {"tokens_per_s", tps},
                               {"weight_bytes_per_token", wbytes},
                               {"ceiling_tokens_per_s", ceiling}}
                              .dump()
                              .c_str());
    } else {
      std::printf("%s%s\n", o->prompt.c_str(), text.c_str());
    }
    std::fprintf(stderr, "%ld tokens, %.0f tokens/s (%s; %s)\n", o->tokens, tps, dec->describe().c_str(),
                 so.use_cache ? "KV cache" : "no KV cache: the window is rerun for every token");
    if (be->info().kind != DeviceKind::Cpu)  // (the H200's bandwidth: a GPU number)
      std::fprintf(stderr,
                 "%.2f MB of weights read a token; at %.1f TB/s DRAM bandwidth that caps decoding at %.0f tokens/s%s\n",
                 static_cast<double>(wbytes) / 1e6, kDramBytesPerS / 1e12, ceiling,
                 bytes <= kL2Bytes ? " (the weights fit in the 50 MB L2, so a GPU can beat that cap)" : "");
    return 0;
  };
}

}  // namespace trainlab::cli
