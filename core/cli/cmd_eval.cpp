#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "cli/commands.h"
#include "compress/quant.h"
#include "io/safetensors.h"
#include "nn/model.h"
#include "train/data_setup.h"
#include "train/run_record.h"
#include "train/training_step.h"
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
    auto arch_it = f.metadata.find("trainlab_architecture");
    auto cfg_it = f.metadata.find("trainlab_config");
    if (arch_it == f.metadata.end() || cfg_it == f.metadata.end())
      throw Error(o->weights + ": no TrainLab metadata (trainlab_architecture, trainlab_config): was it written by trainlab?");
    Config c = Config::from_json(Json::parse(cfg_it->second), o->weights + " metadata");
    for (const auto& s : o->sets) {
      const auto eq = s.find('=');
      if (eq == std::string::npos) throw Error("--set " + s + ": expected key=value");
      c.set(s.substr(0, eq), s.substr(eq + 1));
    }
    std::string notice;
    auto be = create_backend(o->device, device_options(c), &notice);
    if (!notice.empty()) std::fprintf(stderr, "notice: %s\n", notice.c_str());
    auto model = build_model(*be, Json::parse(arch_it->second), 0);
    load_weights_any(*be, *model, f, o->weights);  // fp32, or quantized (dequantized on load)
    TrainTestSplit data = load_classification_data(c);
    Tensor x = be->empty({data.test.size(), data.test.features}, DType::F32, MemCategory::Workspace);
    be->upload(x, data.test.x.data(), DType::F32);
    Tensor y = be->empty({data.test.size()}, DType::I32, MemCategory::Workspace);
    be->upload(y, data.test.y.data(), DType::I32);
    AdamW unused({});
    const int64_t chunk = 256;
    TrainingStep step(*be, *model, unused, x, y, std::min<int64_t>(chunk, data.test.size()), 1);
    Tensor acc = be->empty({2}, DType::F32, MemCategory::Workspace);
    const int64_t n = data.test.size();
    for (int64_t b = 0; b < n; b += step.batch()) step.eval_rows(x, y, b, std::min(n, b + step.batch()), acc, b == 0);
    float st[2];
    be->download(acc, st, DType::F32);
    Json out = {{"weights", o->weights},
                {"data", c.get_string("data.name")},
                {"test_samples", n},
                {"test_accuracy", st[1] / static_cast<double>(n)},
                {"test_loss", st[0] / static_cast<double>(n)},
                {"device", be->info().id()}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
