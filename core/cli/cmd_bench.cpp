// trainlab-cli bench: the benchmark cases of ../shared/bench (the PyTorch peer), same work, JSON
// lines out. A benchmark, not a test: BENCHMARKS.md records its ratios against the peer.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "backend/backend.h"
#include "cli/bench_decode.h"
#include "cli/bench_timing.h"
#include "cli/commands.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/data_setup.h"
#include "train/trainer.h"
#include "train/training_step.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {
using Clock = std::chrono::steady_clock;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The digits training step: MLP 64-256-256-10, batch 128, AdamW lr 1e-3, one fixed batch.
Json bench_digits_step(const std::string& device, const std::string& mode, long steps, long warmup) {
  Config c;
  c.set("device.name", device);
  const bool graph = mode.find("nograph") == std::string::npos;
  const std::string precision = mode.substr(0, mode.find('-'));
  c.set("precision.dtype", precision);
  auto be = create_backend(device, device_options(c));
  be->set_capture_enabled(graph);
  const DType dt = precision == "bf16" ? DType::BF16 : precision == "fp16" ? DType::F16 : precision == "fp8" ? DType::F8E4M3 : DType::F32;
  if (!be->supports(dt)) throw Error(device + " has no " + precision);
  TrainTestSplit data = load_classification_data(c);
  const ClassificationData& d = data.train;
  Tensor x = be->empty({d.size(), d.features}, DType::F32, MemCategory::Workspace);
  be->upload(x, d.x.data(), DType::F32);
  Tensor y = be->empty({d.size()}, DType::I32, MemCategory::Workspace);
  be->upload(y, d.y.data(), DType::I32);
  auto model = build_model(*be, {{"kind", "mlp"}, {"sizes", {64, 256, 256, 10}}, {"activation", "relu"}}, 0);
  model->set_compute_dtype(*be, dt);
  model->set_matmul_mode(precision == "tf32" ? MatmulMode::Tf32 : precision == "fp8" ? MatmulMode::Fp8 : MatmulMode::Native);
  AdamW opt(AdamWHyper{});
  const int64_t batch = 128;
  TrainingStep step(*be, *model, opt, x, y, batch, 1);
  std::vector<int64_t> perm = seeded_permutation(d.size(), 0);
  std::vector<int32_t> idx(perm.begin(), perm.begin() + batch);
  step.set_indices(idx);
  const double s = seconds_per_training_step(*be, step, 1e-3f, "bench_digits", warmup, steps);
  float st[2];
  be->download(step.stats(), st, DType::F32);
  return {{"case", "digits"},
          {"mode", mode},
          {"device", be->info().id()},
          {"device_name", be->info().name},
          {"params", model->parameter_count()},
          {"batch", batch},
          {"ms_per_step", s * 1e3},
          {"steps_per_s", 1.0 / s},
          {"samples_per_s", static_cast<double>(batch) / s},
          {"final_loss", st[0] / batch},
          {"peak_mib", static_cast<double>(be->ledger().snapshot().peak_total) / (1 << 20)}};
}

// The whole 30-epoch digits training as the CPU peer does it: batch 64, AdamW 1e-3, 80/20 split.
Json bench_digits_train(const std::string& device, const std::string& precision, long epochs) {
  Config c;
  c.set("device.name", device);
  c.set("precision.dtype", precision);
  c.set("train.epochs", std::to_string(epochs));
  c.set("train.batch", "64");
  c.set("run.save_weights", "false");
  char dir[] = "/tmp/trainlab-bench-XXXXXX";
  if (!mkdtemp(dir)) throw Error("cannot create a temporary folder for the benchmark's run record");
  c.set("run.out", std::string(dir) + "/run");
  Trainer trainer(c);
  const auto t0 = Clock::now();
  RunSummary s = trainer.run();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return {{"case", "digits-train"}, {"mode", precision},          {"device", s.device},
          {"epochs", epochs},       {"steps", s.steps},           {"wall_s", wall},
          {"train_s", s.steps / (s.samples_per_s / 64.0)},        {"test_accuracy", s.test_accuracy}};
}
}  // namespace

Runner add_bench_command(CLI::App& app) {
  struct Opts {
    std::string cases = "digits", device = "auto", modes, weights, preset = "small";
    long steps = 0, warmup = 50, epochs = 30;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark cases matching the PyTorch peer; prints one JSON object per case and mode");
  cmd->add_option("--case", o->cases, "Comma-separated: digits (training step, batch 128), digits-train (30 epochs, batch 64), "
                                      "char-tiny|char-small|char-gpt2, decode (generation per weight format; --modes fp32,bf16,int8,int4-g32)");
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N or auto");
  cmd->add_option("--modes", o->modes, "Comma-separated modes (digits: fp32,tf32,bf16,fp16,fp8, add -nograph to skip CUDA graphs; "
                                       "digits-train: precisions)");
  cmd->add_option("--steps", o->steps, "Timed steps (default 300 on the CPU, 3000 on a GPU)");
  cmd->add_option("--warmup", o->warmup, "Untimed warm-up steps");
  cmd->add_option("--epochs", o->epochs, "Epochs for digits-train");
  cmd->add_option("--weights", o->weights, "decode: a char-gpt weights file (fp32 or quantized) instead of a random --preset");
  cmd->add_option("--preset", o->preset, "decode: the random-initialised char-gpt without --weights (tiny, small, gpt2)");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    int failures = 0;
    for (const auto& cs : split_list(o->cases)) {
      if (cs == "digits") {
        auto modes = split_list(o->modes.empty() ? "fp32,bf16" : o->modes);
        for (const auto& mode : modes) {
          Json r;
          try {
            const bool gpu = o->device != "cpu" && !available_devices().empty() && available_devices().size() > 1;
            const long steps = o->steps ? o->steps : (gpu ? 3000 : 300);
            r = bench_digits_step(o->device, mode, steps, o->warmup);
          } catch (const Error& e) {
            r = {{"case", cs}, {"mode", mode}, {"error", e.what()}};
            ++failures;
          }
          std::printf("%s\n", r.dump().c_str());
          std::fflush(stdout);
        }
      } else if (cs == "digits-train") {
        for (const auto& mode : split_list(o->modes.empty() ? "fp32" : o->modes)) {
          Json r;
          try {
            r = bench_digits_train(o->device, mode, o->epochs);
          } catch (const Error& e) {
            r = {{"case", cs}, {"mode", mode}, {"error", e.what()}};
            ++failures;
          }
          std::printf("%s\n", r.dump().c_str());
          std::fflush(stdout);
        }
      } else if (cs == "char-tiny" || cs == "char-small" || cs == "char-gpt2") {  // bench_char.cpp
        for (const auto& mode : split_list(o->modes.empty() ? "fp32,fp32-ckpt" : o->modes)) {
          Json r;
          try {
            const bool gpu = o->device != "cpu" && available_devices().size() > 1;
            r = bench_char_step(o->device, cs, mode, o->steps ? o->steps : 30, o->warmup == 50 ? (gpu ? 10 : 5) : o->warmup);
          } catch (const Error& e) {
            r = {{"case", cs}, {"mode", mode}, {"error", e.what()}};
            ++failures;
          }
          std::printf("%s\n", r.dump().c_str());
          std::fflush(stdout);
        }
      } else if (cs == "decode") {  // token-by-token generation per weight format: cmd_generate.cpp
        for (const Json& r : bench_decode(o->device, o->weights, o->preset, o->modes, o->steps ? o->steps : 200, 1)) {
          failures += r.contains("error");
          std::printf("%s\n", r.dump().c_str());
          std::fflush(stdout);
        }
      } else {
        throw Error("unknown benchmark case '" + cs + "': expected digits, digits-train, char-tiny, char-small, char-gpt2 or decode");
      }
    }
    return failures ? 1 : 0;
  };
}

}  // namespace trainlab::cli
