// trainlab-cli sweep: the compression grids of issue 5 on one trained baseline, as one table
// (compress/sweep.h says what it runs and writes).
//
//   trainlab-cli sweep --model digits-mlp --out DIR
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "train/training_sweep.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

struct SweepArgs {
  SweepOptions sweep;
  std::string device = "cpu";
  std::vector<std::string> sets;
};

void add_sweep_options(CLI::App* cmd, SweepArgs& a) {
  SweepOptions& o = a.sweep;
  o.model = "digits-mlp";
  cmd->add_option("--model", o.model, "Model to sweep (digits-mlp)");
  cmd->add_option("--out", o.out, "Output folder (table, run records)")->required();
  cmd->add_option("--device", a.device, "cpu (default) or another device");
  cmd->add_option("--baseline", o.baseline,
                  "Start from these trained fp32 weights instead of training a baseline (e.g. another device's "
                  "runs/baseline/model.safetensors: the points then differ only by the device); trained with the "
                  "sweep's seed and data (checked against a config.json beside the file)");
  cmd->add_option("--steps", o.steps, "Baseline optimizer steps (0: train.epochs of the config)");
  cmd->add_option("--finetune-steps", o.finetune, "Steps of each fine-tuning point (pruning, QAT)");
  cmd->add_option("--min-accuracy", o.min_accuracy, "Fail unless the fp32 baseline reaches this test accuracy");
  cmd->add_option("--speed-rows", o.speed_rows, "Batch rows of the forward-speed measurement");
  cmd->add_option("--set", a.sets, "Any config key of the baseline: --set key=value (repeatable)");
  cmd->add_flag("--overwrite", o.overwrite, "Replace the run records of an earlier sweep in --out (else refused)");
}

// The baseline's config: model, device, the flags' --set keys.
Config sweep_base_config(const SweepArgs& a) {
  Config base;
  base.set("model.name", a.sweep.model);
  base.set("device.name", a.device);
  // The classifier (10 x 256) stays dense in every pruning point: at 98 % per layer it would keep
  // 51 weights, about 5 a class, and the point's accuracy then hangs on which few survive (the
  // CPU and GPU tables differed there by 6-10 points). --set prune.include_output=true prunes it.
  base.set("prune.include_output", "false");
  apply_sets(base, a.sets);
  return base;
}

}  // namespace

Runner add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "Compression sweep (PTQ, QAT, pruning, distillation) on a trained baseline: CSV + JSON table");
  add_sweep_options(cmd, *a);
  return [a, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const Config base = sweep_base_config(*a);
    const SweepOptions& o = a->sweep;
    const SweepTable t = run_training_sweep(base, o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    std::fprintf(stderr, "sweep: %zu points in %.1f s -> %s/sweep.csv, %s/sweep.json\n", t.rows.size(),
                 t.header.at("wall_s").get<double>(), o.out.c_str(), o.out.c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
