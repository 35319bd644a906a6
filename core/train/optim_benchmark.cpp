// trainlab-cli bench --case optim: the optimizer step alone (train/benchmark.h).
#include <chrono>

#include "data/data_sources.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "plan/memory_model.h"
#include "train/benchmark.h"
#include "train/precision.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab {

Json bench_optim_step(const std::string& device, const std::string& preset, const std::string& mode, long steps,
                      long warmup) {
  OptimizerOptions o;
  o.name = mode == "lion-bf16" ? "lion" : mode;
  if (mode == "lion-bf16") o.lion_state = "bf16";
  auto be = create_backend(device);
  if (!be->supports(DType::BF16)) throw Error(device + " has no bf16");
  CharGptConfig cfg = CharGptConfig::preset(preset);
  TextCorpus text = load_text_corpus(find_resource("data/tinyshakespeare.txt"), 0.1, 1);
  cfg.vocab = text.vocab();
  cfg.chars = text.chars_utf8();
  CharGpt model(*be, cfg, 0);
  apply_precision(*be, model, precision_policy("bf16"));  // bf16 weights and gradients, fp32 masters
  std::vector<Parameter*> params = model.parameters();
  for (Parameter* p : params) be->fill(p->grad, 1e-3f);
  auto opt = make_optimizer(o);
  if (!be->supports(opt->backend_op(), DType::BF16))
    throw Error(std::string(op_name(opt->backend_op())) + " is not supported on " + be->info().name);
  StepScalars sc;
  sc.lr = 3e-4f;
  auto one = [&] {
    sc.step += 1.0f;
    be->set_step_scalars(sc);
    opt->step(*be, params);
  };
  sc.step = 0.0f;
  one();  // creates the state
  const int64_t masters = 4 * model.parameter_count();
  const int64_t state = be->ledger().current(MemCategory::Optimizer) - masters;
  for (long i = 0; i < warmup; ++i) one();
  be->synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < steps; ++i) one();
  be->synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(steps);
  const int64_t predicted = optimizer_state_bytes(o, param_shape_infos(params));
  return {{"case", "optim"},
          {"mode", mode},
          {"model", "char-" + preset},
          {"device", be->info().id()},
          {"device_name", be->info().name},
          {"params", model.parameter_count()},
          {"ms_per_step", s * 1e3},
          {"state_bytes", state},
          {"state_bytes_predicted", predicted},
          {"state_bytes_per_param", static_cast<double>(state) / static_cast<double>(model.parameter_count())}};
}

}  // namespace trainlab
