// trainlab-cli merge RUN_DIR --out W.safetensors: a fine-tuning run's adapters (finetune.method
// lora, qlora or dora) folded into the weights they were trained over (finetune/finetune_run.h);
// PEFT's adapter file is written beside W.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "finetune/finetune_run.h"

namespace trainlab::cli {

Runner add_merge_command(CLI::App& app) {
  struct Flags {
    std::string run_dir, out;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("merge", "Fold a fine-tuning run's adapters into its base weights");
  cmd->add_option("run_dir", f->run_dir, "The run folder (with its adapter_model.safetensors)")->required();
  cmd->add_option("--out", f->out, "Weights file to write (PyTorch names, as a run's model.safetensors)")->required();
  return [f] {
    const MergeReport r = merge_run(f->run_dir, f->out);
    std::printf("merged %lld %s adapters (%lld parameters) over %s\n  weights  %s\n  adapters %s (PEFT names)\n",
                static_cast<long long>(r.adapters), r.method.c_str(), static_cast<long long>(r.adapter_params),
                r.base_path.c_str(), r.weights_path.c_str(), r.adapter_path.c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
