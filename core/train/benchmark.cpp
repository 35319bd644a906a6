#include "train/benchmark.h"

#include <chrono>
#include <cstdlib>
#include <random>

#include "config/train_options.h"
#include "data/data_sources.h"
#include "nn/model.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "plan/memory_model.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab {

using Json = nlohmann::json;

namespace {
using Clock = std::chrono::steady_clock;

// Where a step's device time goes, after the timed steps (so that neither the timing nor the peaks
// see it): three more steps run eagerly with per-operation event timing; mean ms per step of each
// operation. Empty where the backend does not time kernels (the CPU).
Json kernel_breakdown(Backend& be, TrainingStep& step, float lr, long done) {
  Json out = Json::object();
  if (be.info().kind != DeviceKind::Cuda) return out;
  try {  // informational: a failure here must not cost the timed result
    be.set_kernel_timing(true);
    be.reset_kernel_times();
    StepScalars sc;
    sc.lr = lr;
    const int n = 3;
    for (int i = 0; i < n; ++i) {
      sc.step = static_cast<float>(done + i + 1);
      be.set_step_scalars(sc);
      step.run_full_step("bench_char_timed");
    }
    be.synchronize();
    for (const KernelTime& k : be.kernel_times()) out[k.name] = k.ms / n;
  } catch (const Error& e) {
    out = Json{{"error", e.what()}};
  }
  be.set_kernel_timing(false);
  return out;
}

// The policy of a benchmark mode's precision, checked against the device (the benchmarks' own
// error text: "<device> has no <precision>").
const PrecisionPolicy& bench_precision(Backend& be, const std::string& device, const std::string& precision) {
  const PrecisionPolicy& p = precision_policy(precision);
  if (!be.supports(p.compute)) throw Error(device + " has no " + precision);
  return p;
}
}  // namespace

double seconds_per_training_step(Backend& be, TrainingStep& step, float lr, const std::string& key, long warmup,
                                 long steps) {
  StepScalars sc;
  sc.lr = lr;
  long t = 0;
  auto one = [&] {
    sc.step = static_cast<float>(++t);
    be.set_step_scalars(sc);
    step.run_full_step(key);
  };
  for (long i = 0; i < warmup; ++i) one();
  be.synchronize();
  be.ledger().reset_peaks();
  const auto t0 = Clock::now();
  for (long i = 0; i < steps; ++i) one();
  be.synchronize();
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(steps);
}

Json bench_digits_step(const std::string& device, const std::string& mode, long steps, long warmup) {
  const bool graph = mode.find("nograph") == std::string::npos;
  const std::string precision = mode.substr(0, mode.find('-'));
  auto be = create_backend(device);
  be->set_capture_enabled(graph);
  const PrecisionPolicy& policy = bench_precision(*be, device, precision);
  TrainTestSplit data = load_classification_data(data_options(Config()));
  const ClassificationData& d = data.train;
  Tensor x = be->empty({d.size(), d.features}, DType::F32, MemCategory::Workspace);
  be->upload(x, d.x.data(), DType::F32);
  Tensor y = be->empty({d.size()}, DType::I32, MemCategory::Workspace);
  be->upload(y, d.y.data(), DType::I32);
  auto model = build_model(*be, {{"kind", "mlp"}, {"sizes", {64, 256, 256, 10}}, {"activation", "relu"}}, 0);
  apply_precision(*be, *model, policy);
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

Json bench_char_step(const std::string& device, const std::string& name, const std::string& mode, long steps,
                     long warmup) {
  const std::string preset = name.substr(5);  // char-tiny -> tiny
  CharGptConfig cfg = CharGptConfig::preset(preset);
  const int64_t B = preset == "tiny" ? 32 : preset == "small" ? 64 : 16, T = cfg.context;
  const bool ckpt = mode.find("-ckpt") != std::string::npos;
  const bool offload = mode.find("-offload") != std::string::npos;  // optim.offload cpu (optim/offload.h)
  const std::string precision = mode.substr(0, mode.find('-'));
  auto be = create_backend(device);
  // The whole step (forward, backward, AdamW) is captured as a CUDA graph from its second run and
  // replayed (run_step): everything that changes per step is in device memory. (A step with
  // dropout draws masks from per-step host seeds; the backend runs such a step eagerly.)
  be->set_capture_enabled(true);
  if (precision != "fp32" && precision != "tf32" && precision != "bf16" && precision != "fp16" && precision != "fp8")
    throw Error("char benchmark mode '" + mode + "': expected fp32, tf32, bf16, fp16 or fp8, optionally with -ckpt and "
                "-offload");
  const PrecisionPolicy& policy = bench_precision(*be, device, precision);

  TextCorpus text = load_text_corpus(find_resource("data/tinyshakespeare.txt"), 0.1, 1);
  // The peer's data: the first 100k (tiny) / 200k characters, in order.
  std::vector<int32_t> all(text.train.tokens.begin(), text.train.tokens.end());
  all.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(all.size()), preset == "tiny" ? 100000 : 200000)));
  cfg.vocab = text.vocab();
  cfg.chars = text.chars_utf8();
  Tensor toks = be->empty({static_cast<int64_t>(all.size())}, DType::I32, MemCategory::Workspace);
  be->upload(toks, all.data(), DType::I32);
  CharGpt model(*be, cfg, 0);
  apply_precision(*be, model, policy);
  model.set_checkpointing(ckpt ? CheckpointPolicy::EveryBlock : CheckpointPolicy::Off, 1);
  OptimizerOptions oo;
  oo.offload = offload ? "cpu" : "none";
  std::unique_ptr<Optimizer> opt = make_optimizer(oo);  // AdamW at its defaults
  TrainingStep step(*be, model, *opt, toks, B, T, 1);
  std::mt19937_64 rng(0);
  std::vector<int32_t> idx;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = static_cast<int64_t>(rng() % static_cast<uint64_t>(all.size() - T - 1));
    for (int64_t t = 0; t < T; ++t) idx.push_back(static_cast<int32_t>(s + t));
  }
  step.set_indices(idx);
  const float lr = preset == "tiny" ? 1e-3f : 3e-4f;
  const double s = seconds_per_training_step(*be, step, lr, "bench_char", warmup, steps);
  float st[2];
  be->download(step.stats(), st, DType::F32);
  const double act_peak = static_cast<double>(be->ledger().peak(MemCategory::Activations)) / (1 << 20);
  const double peak = static_cast<double>(be->ledger().snapshot().peak_total) / (1 << 20);
  // Host bytes (offload) are allocated before the timed steps and stay: the device's peak is the
  // total's less them. The masters (16-bit runs) are counted with the optimizer state.
  const double host = static_cast<double>(be->ledger().current(MemCategory::Host)) / (1 << 20);
  const double opt_device = static_cast<double>(be->ledger().current(MemCategory::Optimizer)) / (1 << 20);
  const double used = static_cast<double>(be->info().used_bytes) / (1 << 20);
  const Json breakdown = kernel_breakdown(*be, step, lr, warmup + steps);
  const double fpt = char_gpt_train_flops_per_token(model, T);
  const int64_t act_predicted = char_gpt_activation_bytes(model, B, T, policy.element_bytes(), policy.matmul == MatmulMode::Fp8) +
                                token_step_activation_bytes(B, T);
  return {{"case", name},
          {"mode", mode},
          {"device", be->info().id()},
          {"device_name", be->info().name},
          {"params", model.parameter_count()},
          {"batch", B},
          {"ctx", T},
          {"ms_per_step", s * 1e3},
          {"tokens_per_s", static_cast<double>(B * T) / s},
          {"model_tflops", fpt * static_cast<double>(B * T) / s / 1e12},
          {"final_loss", st[0] / static_cast<double>(B * T)},
          {"activation_peak_mib", act_peak},
          {"activation_predicted_mib", static_cast<double>(act_predicted) / (1 << 20)},
          {"peak_mib", peak},
          {"device_peak_mib", peak - host},
          {"device_optimizer_and_master_mib", opt_device},
          {"host_mib", host},
          {"device_used_mib", used},
          {"device_ms_per_step_by_op", breakdown}};
}

}  // namespace trainlab
