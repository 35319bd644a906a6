#include "train/plan_check.h"

#include "config/optim_options.h"
#include "data/data_sources.h"
#include "optim/optimizer.h"
#include "plan/memory_model.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainlab {

namespace {
// "--precision 'fp64': expected one of ..." from the library's "unknown precision 'fp64': expected
// one of ...": the option's name instead of the config key's.
[[noreturn]] void rethrow_for(const std::string& option, const std::string& value, const Error& e) {
  const std::string m = e.what();
  const auto colon = m.find(": ");
  throw Error(option + " '" + value + "': " + (colon == std::string::npos ? m : m.substr(colon + 2)));
}
}  // namespace

void resolve_plan_setup(PlanSetup& s, const std::string& precision, const std::string& optimizer,
                        const std::string& gpu) {
  const PrecisionPolicy* p = nullptr;
  try {
    p = &precision_policy(precision);
  } catch (const Error& e) {
    rethrow_for("--precision", precision, e);
  }
  s.precision = p->name;
  s.element_bytes = p->element_bytes();
  s.fp8_matmul = p->matmul == MatmulMode::Fp8;
  OptimizerOptions o;
  o.name = optimizer;
  try {
    const std::vector<ParamShapeInfo> shapes = s.model.param_shapes();
    int64_t n = 0;
    for (const ParamShapeInfo& p : shapes) n += shape_numel(p.shape);
    s.optimizer_state_bytes = static_cast<double>(optimizer_state_bytes(o, shapes)) / static_cast<double>(std::max<int64_t>(n, 1));
  } catch (const Error& e) {
    rethrow_for("--optimizer", optimizer, e);
  }
  s.optimizer = optimizer;
  const GpuSpec& g = gpu_spec(gpu, "--gpu");
  s.gpu = g.name;
  s.gpu_memory_bytes = g.memory_bytes;
  s.nvlink_bytes_per_s = g.nvlink_bytes_per_s;
  s.network_bytes_per_s = g.network_bytes_per_s;
  s.peak_flops = gpu_peak_flops(g, p->compute, p->matmul);
  s.fp8_copies = s.fp8_matmul && s.peak_flops > 0;  // fp8 on the GPU's fp8 units (the CUDA backend's casts)
}

namespace {
// The vocabulary the lab's character model trains on (tinyshakespeare's characters), read once:
// the app asks on every edit of a field.
int64_t lab_text_vocab() {
  static const int64_t vocab = [] {
    DataOptions d;
    d.name = "tinyshakespeare";
    return load_text_data(d).vocab();
  }();
  return vocab;
}
}  // namespace

std::string plan_check_unsupported(const PlanSetup& s, const Layout& l) {
  if (l.dp != 1 || l.tp != 1 || l.pp != 1)
    return "the check runs on one device: DP, TP and PP must be 1 (this layout is DP " + std::to_string(l.dp) + " x TP " +
           std::to_string(l.tp) + " x PP " + std::to_string(l.pp) + ")";
  switch (s.model.kind) {
    case PlanModelKind::Params: return "a model given by its parameter count has no lab model to run";
    case PlanModelKind::Mlp:
      if (s.model.name != "digits-mlp") return "the lab runs the digits-mlp preset of the MLPs";
      break;
    case PlanModelKind::Transformer: {
      const CharGptConfig& c = s.model.transformer;
      const int64_t v = lab_text_vocab();
      if (c.padded_vocab() != v)
        return "the lab's character model reads tinyshakespeare: a vocabulary of " + std::to_string(v) + ", not " +
               std::to_string(c.padded_vocab());
      if (c.layers > 1024 || c.heads > 1024 || c.dim > 65536)
        return "the shape is beyond the lab's model.layers/heads/dim ranges (1024, 1024, 65536)";
      break;
    }
  }
  return {};
}

Config plan_check_config(const PlanSetup& s, const Layout& l, const std::string& device, const std::string& out,
                         long steps) {
  Config c;
  c.set("device.name", device);
  if (s.model.kind == PlanModelKind::Mlp) {
    c.set("model.name", "digits-mlp");
  } else {
    const CharGptConfig& g = s.model.transformer;
    c.set("model.name", "char-gpt");
    c.set_json("model.layers", g.layers);
    c.set_json("model.heads", g.heads);
    c.set_json("model.dim", g.dim);
    c.set_json("model.context", g.context);
    c.set_json("model.dropout", g.dropout);
    c.set_json("train.eval_windows", s.micro_batch);
    switch (l.recompute) {
      case Recompute::None: c.set("checkpoint.policy", "off"); break;
      case Recompute::Selective: c.set("checkpoint.policy", "selective"); break;
      case Recompute::Full:
        c.set("checkpoint.policy", l.recompute_every == 1 ? "every-block" : "every-k");
        c.set_json("checkpoint.k", l.recompute_every);
        break;
    }
  }
  c.set("precision.dtype", s.precision);
  c.set("optim.name", s.optimizer);
  c.set("optim.offload", s.offload ? "cpu" : "none");
  c.set_json("train.batch", s.micro_batch);
  c.set_json("train.accumulate", l.micro_batches);
  c.set_json("train.steps", static_cast<int64_t>(steps));
  c.set("run.save_weights", "false");
  c.set("run.out", out);
  return c;
}

PlanCheck check_plan(const PlanSetup& s, const Layout& l, const std::string& device, const std::string& out,
                     long steps, const std::function<void(long)>& on_step) {
  if (const std::string why = plan_check_unsupported(s, l); !why.empty()) throw Error("cannot check this plan here: " + why);
  PlanSetup lab = s;  // the run is the lab's model on one device: the lab's count
  lab.count = ActivationCount::Lab;
  lab.gpus = lab.nodes = 1;
  plan_layout(lab, l);  // a bad setup fails before the run
  PlanCheck out_check;
  StepMetrics last;
  TrainerCallbacks cb;
  // More steps are configured than run: the run is stopped after `steps` once an update was applied
  // (the optimizer's state exists from the first applied update; an fp16 run may skip its first
  // steps while the loss scale comes down), so the trainer never reaches its last step, whose
  // evaluation is a forward pass the check does not need (finish() evaluates once either way).
  constexpr long kSkipAllowance = 20;
  Trainer* trainer = nullptr;
  bool applied = false;
  cb.on_step = [&](const StepMetrics& m) {
    last = m;
    applied = applied || !m.skipped;
    if (on_step) on_step(m.step);
    if (m.step >= steps && applied && trainer) trainer->request_stop();
  };
  Trainer t(plan_check_config(s, l, device, out, steps + kSkipAllowance), cb);
  trainer = &t;
  const RunSummary sum = t.run();
  if (sum.status == "diverged" || !applied || last.step < steps)
    throw Error("the check run ended after " + std::to_string(last.step) + " steps without the measurement (" +
                sum.status + (sum.message.empty() ? "" : ": " + sum.message) +
                (applied ? "" : "; every update was skipped") + ")");
  // The fp8 casts are the CUDA backend's (a CPU rounds in place): predicted where the run was.
  lab.fp8_copies = s.fp8_matmul && sum.device.rfind("cuda", 0) == 0;
  out_check.predicted = plan_layout(lab, l).per_gpu;
  out_check.measured = last.mem_current.by_category;
  out_check.run_predicted = last.mem_predicted.by_category;
  out_check.peak = sum.peak_bytes.by_category;
  out_check.device = sum.device;
  out_check.run_dir = sum.run_dir;
  out_check.steps = sum.steps;
  out_check.step_s_measured = last.step_ms / 1e3;
  out_check.mfu_measured = last.mfu;
  // The time the planner predicts on this device, with the setup's MFU: the device's peak is the
  // trainer's, recovered from its MFU = FLOPs per token x tokens/s / peak (0 where unknown).
  if (last.mfu > 0 && last.samples_per_s > 0) {
    lab.peak_flops = s.model.train_flops_per_token() * last.samples_per_s / last.mfu;
    out_check.step_s_predicted = plan_layout(lab, l).time.step_s;
  }
  return out_check;
}

}  // namespace trainlab
