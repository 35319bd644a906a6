// trainlab-cli bench --case char-tiny|char-small|char-gpt2: the peer's character-GPT training
// step (peer_torch_cpu.py char-tiny, peer_torch.py char-small / char-gpt2): same shapes, batch,
// AdamW, one fixed batch of random windows of the first 100,000 (tiny) / 200,000 characters.
// Modes: fp32, tf32, bf16 (CUDA: fp16 too), each with -ckpt for checkpointing every block.
// Timing as the peer's: 10 warm-up steps (CUDA), then the mean of 30; peak_mib is the ledger's peak
// of every allocation the lab made (parameters, gradients, optimizer state, activations,
// workspaces), the counterpart of torch.cuda.max_memory_allocated.
#include <chrono>
#include <random>

#include "backend/backend.h"
#include "cli/bench_timing.h"
#include "cli/commands.h"
#include "data/text.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "train/training_step.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::cli {
using Json = nlohmann::json;

namespace {
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
      be.run_step("bench_char_timed", [&] { step.full_step(); });
    }
    be.synchronize();
    for (const KernelTime& k : be.kernel_times()) out[k.name] = k.ms / n;
  } catch (const Error& e) {
    out = Json{{"error", e.what()}};
  }
  be.set_kernel_timing(false);
  return out;
}
}  // namespace

nlohmann::json bench_char_step(const std::string& device, const std::string& name, const std::string& mode, long steps,
                     long warmup) {
  const std::string preset = name.substr(5);  // char-tiny -> tiny
  CharGptConfig cfg = CharGptConfig::preset(preset);
  const int64_t B = preset == "tiny" ? 32 : preset == "small" ? 64 : 16, T = cfg.context;
  const bool ckpt = mode.find("-ckpt") != std::string::npos;
  const std::string precision = mode.substr(0, mode.find('-'));
  auto be = create_backend(device);
  // The whole step (forward, backward, AdamW) is captured as a CUDA graph from its second run and
  // replayed (run_step): everything that changes per step is in device memory. (A step with
  // dropout draws masks from per-step host seeds; the backend runs such a step eagerly.)
  be->set_capture_enabled(true);
  const DType dt = precision == "bf16" ? DType::BF16 : precision == "fp16" ? DType::F16 : DType::F32;
  if (precision != "fp32" && precision != "tf32" && precision != "bf16" && precision != "fp16")
    throw Error("char benchmark mode '" + mode + "': expected fp32, tf32, bf16 or fp16, optionally with -ckpt");
  if (!be->supports(dt)) throw Error(device + " has no " + precision);

  TextCorpus text = load_text_corpus(find_resource("data/tinyshakespeare.txt"), 0.1, 1);
  // The peer's data: the first 100k (tiny) / 200k characters, in order.
  std::vector<int32_t> all;
  for (int64_t i = 0; i < static_cast<int64_t>(text.train.tokens.size()); ++i) all.push_back(text.train.tokens[i]);
  all.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(all.size()), preset == "tiny" ? 100000 : 200000)));
  cfg.vocab = text.vocab();
  cfg.chars = text.chars;
  Tensor toks = be->empty({static_cast<int64_t>(all.size())}, DType::I32, MemCategory::Workspace);
  be->upload(toks, all.data(), DType::I32);
  CharGpt model(*be, cfg, 0);
  model.set_compute_dtype(*be, dt);
  model.set_matmul_mode(precision == "tf32" ? MatmulMode::Tf32 : MatmulMode::Native);
  model.set_checkpointing(ckpt ? CheckpointPolicy::EveryBlock : CheckpointPolicy::Off, 1);
  AdamW opt(AdamWHyper{});
  TrainingStep step(*be, model, opt, toks, B, T, 1);
  std::mt19937_64 rng(0);
  std::vector<int32_t> idx;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = static_cast<int64_t>(rng() % static_cast<uint64_t>(all.size() - T - 1));
    for (int64_t t = 0; t < T; ++t) idx.push_back(static_cast<int32_t>(s + t));
  }
  step.set_indices(idx);
  const double s = seconds_per_training_step(*be, step, preset == "tiny" ? 1e-3f : 3e-4f, "bench_char", warmup, steps);
  float st[2];
  be->download(step.stats(), st, DType::F32);
  const double act_peak = static_cast<double>(be->ledger().peak(MemCategory::Activations)) / (1 << 20);
  const double peak = static_cast<double>(be->ledger().snapshot().peak_total) / (1 << 20);
  const Json breakdown = kernel_breakdown(*be, step, preset == "tiny" ? 1e-3f : 3e-4f, warmup + steps);
  const double fpt = model.train_flops_per_token(T);
  const int64_t eb = dt == DType::F32 ? 4 : 2;
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
          {"activation_predicted_mib", static_cast<double>(model.predicted_activation_bytes(B, T, eb)) / (1 << 20)},
          {"peak_mib", peak},
          {"device_ms_per_step_by_op", breakdown}};
}

}  // namespace trainlab::cli
