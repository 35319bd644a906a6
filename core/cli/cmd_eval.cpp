// trainlab-cli eval: the test figures of a weights file (fp32, or quantized: dequantized on load) on
// the test split of the data it was trained on (compress/post_training.h evaluate_weights).
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

Runner add_eval_command(CLI::App& app) {
  struct Opts {
    std::string weights, device = "auto";
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a weights file on the test split of the data it was trained on");
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
    const TrainTestSplit data = load_classification_data(data_options(c));
    const WeightsEval e = evaluate_weights(*be, f, o->weights, data.test);
    const Json out = {{"weights", o->weights},          {"data", c.get_string("data.name")}, {"test_samples", e.samples},
                      {"test_accuracy", e.accuracy},    {"test_loss", e.loss},               {"device", be->info().id()}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
