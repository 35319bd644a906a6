// trainlab-cli eval: the test figures of a weights file (fp32, or quantized: dequantized on load) on
// the test split of the data it was trained on (compress/post_training.h evaluate_weights); for the
// character model (char-gpt) the loss, perplexity and accuracy on the validation split of its text,
// with the run's validation windows (evaluate_text_weights): what its summary reports as test_loss.
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "cli/commands.h"
#include "config/device_options.h"
#include "compress/post_training.h"
#include "io/weights.h"
#include "config/train_options.h"
#include "data/data_sources.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

// A char-gpt run's weights on the validation split of its text, with its train.eval_windows,
// train.batch and train.seed: the numbers of its summary (test_loss, test_accuracy).
Json eval_text(Backend& be, const SafeTensorsFile& f, const std::string& path, const Config& c) {
  const std::string vocabulary = stored_vocabulary(f);
  TextCorpus text;
  try {  // the text tokenised with the model's own vocabulary: a character it lacks names both files
    text = load_text_data(data_options(c), vocabulary.empty() ? nullptr : &vocabulary);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  const TextWeightsEval e = evaluate_text_weights(be, f, path, text, c.get_int("train.eval_windows"), c.get_int("train.batch"),
                                                  static_cast<uint64_t>(c.get_int("train.seed")));
  return {{"weights", path},           {"data", c.get_string("data.name")}, {"split", "validation"},
          {"val_windows", e.windows},  {"val_tokens", e.tokens},            {"val_loss", e.loss},
          {"val_perplexity", std::exp(e.loss)}, {"val_accuracy", e.accuracy}};
}

}  // namespace

Runner add_eval_command(CLI::App& app) {
  struct Opts {
    std::string weights, device = "auto";
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a weights file on the test split of the data it was trained on "
                                              "(char-gpt: on the validation split of its text)");
  cmd->add_option("--weights", o->weights, "model.safetensors written by a run")->required();
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N or auto");
  cmd->add_option("--set", o->sets, "Override a config key of the data, e.g. --set data.path=FILE");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const SafeTensorsFile f = read_safetensors(o->weights);
    const Config c = weights_config(f, o->weights, [&](Config& user) { apply_sets(user, o->sets); });
    std::string notice;
    auto be = create_backend(o->device, device_options(c), &notice);
    if (!notice.empty()) std::fprintf(stderr, "notice: %s\n", notice.c_str());
    Json out;
    if (c.get_string("model.name") == "char-gpt") {
      out = eval_text(*be, f, o->weights, c);
    } else {
      const TrainTestSplit data = load_classification_data(data_options(c));
      const WeightsEval e = evaluate_weights(*be, f, o->weights, data.test);
      out = {{"weights", o->weights}, {"data", c.get_string("data.name")}, {"test_samples", e.samples},
             {"test_accuracy", e.accuracy}, {"test_loss", e.loss}};
    }
    out["device"] = be->info().id();
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
