// trainlab-cli generate: text from a trained char-gpt weights file (model.safetensors of a run),
// with a KV cache (default) or by rerunning the whole window for every token (--no-kv-cache).
#include <chrono>
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "cli/commands.h"
#include "data/text.h"
#include "io/safetensors.h"
#include "nn/transformer.h"
#include "nn/transformer_generate.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::cli {

Runner add_generate_command(CLI::App& app) {
  struct Opts {
    std::string weights, prompt = "\n";
    long tokens = 200, top_k = 0, seed = 1;
    double temperature = 1.0;
    bool no_cache = false, json = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text with a trained char-gpt (KV cache; tokens per second on stderr)");
  cmd->add_option("--weights", o->weights, "A char-gpt weights file (a run's model.safetensors)")->required();
  cmd->add_option("--prompt", o->prompt, "Text to continue (characters of the model's vocabulary; default a newline)");
  cmd->add_option("--tokens", o->tokens, "Characters to generate");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy (arg max)");
  cmd->add_option("--top-k", o->top_k, "Sample only among the k most likely characters (0 = all)");
  cmd->add_option("--seed", o->seed, "Sampling seed");
  cmd->add_flag("--no-kv-cache", o->no_cache, "Rerun the whole window for every new token (for comparison)");
  cmd->add_flag("--json", o->json, "Print one JSON object (text, tokens/s) instead of the plain text");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    if (o->tokens < 0) throw Error("--tokens must be >= 0");
    if (o->temperature < 0) throw Error("--temperature must be >= 0");
    const SafeTensorsFile f = read_safetensors(o->weights);
    const auto it = f.metadata.find("trainlab_architecture");
    if (it == f.metadata.end())
      throw Error(o->weights + ": no trainlab_architecture in the metadata (not a weights file written by the lab)");
    const Json arch = Json::parse(it->second);
    if (arch.value("kind", "") != "char-gpt")
      throw Error(o->weights + ": a " + arch.value("kind", std::string("?")) + " model; generate needs a char-gpt");
    auto be = create_backend("cpu");
    auto model = build_char_gpt(*be, arch, 0);
    load_model_weights(*be, *model, o->weights);
    TextCorpus vocab;
    vocab.chars = model->config().chars;
    if (vocab.chars.empty()) throw Error(o->weights + ": the architecture does not store the vocabulary");
    const std::vector<int32_t> prompt = vocab.encode(o->prompt.empty() ? std::string("\n") : o->prompt);
    CharGptGenerator gen(*be, *model);
    SampleOptions so;
    so.temperature = static_cast<float>(o->temperature);
    so.top_k = o->top_k;
    so.use_cache = !o->no_cache;
    so.seed = static_cast<uint64_t>(o->seed);
    const std::vector<int32_t> out = gen.generate(prompt, o->tokens, so);
    const std::string text = vocab.decode(out);
    if (o->json) {
      std::printf("%s\n", Json{{"prompt", o->prompt},
                               {"text", text},
                               {"tokens", o->tokens},
                               {"kv_cache", so.use_cache},
                               {"tokens_per_s", gen.last_tokens_per_s()}}
                              .dump()
                              .c_str());
    } else {
      std::printf("%s%s\n", o->prompt.c_str(), text.c_str());
    }
    std::fprintf(stderr, "%ld tokens, %.0f tokens/s (%s)\n", o->tokens, gen.last_tokens_per_s(),
                 so.use_cache ? "KV cache" : "no KV cache: the window is rerun for every token");
    return 0;
  };
}

}  // namespace trainlab::cli
