// Fine-tuning in a run and after it: the adapters attached to the model a run starts from, the
// adapter file a run writes beside its weights, and `trainlab-cli merge` (docs/FINETUNE.md).
//
// A run with finetune.method lora, qlora or dora writes into its folder
//   model.safetensors          the merged weights W' (what its validation loss was measured with;
//                              eval, generate and PyTorch's load_state_dict read it as any run's)
//   adapter_model.safetensors  the adapters only, in PEFT's names (base_model.model.<module>.
//                              lora_A.weight, .lora_B.weight, DoRA's .lora_magnitude_vector), fp32,
//                              with the finetune options, compress.init_from and the run's config
//                              in its metadata ("trainlab_finetune", "trainlab_config")
//   adapter_config.json        PEFT's adapter config (peft_type LORA, r, lora_alpha,
//                              target_modules, use_dora)
#pragma once
#include <memory>
#include <string>

#include "config/config.h"
#include "config/finetune_options.h"
#include "finetune/adapters.h"

namespace trainlab {

// Wraps the model a run starts from (its init_from weights loaded) in an AdaptedModel for lora,
// qlora and dora (full: returned as it is). Error naming the option and the reason for: no
// compress.init_from, a model other than char-gpt (the digits MLP: no named products, and for qlora
// its tiny layers), qlora or dora on a device other than the CPU, a rank above a target's smaller dimension.
// Error for lora, qlora and dora on a model other than char-gpt (with the reason; checked before
// any weights are read).
void check_adapter_model(const std::string& kind, const FinetuneOptions& o);
std::unique_ptr<Model> attach_adapters(Backend& be, std::unique_ptr<Model> model, const FinetuneOptions& o,
                                       uint64_t seed);

// Writes adapter_model.safetensors and adapter_config.json into `dir`.
void save_adapters(Backend& be, AdaptedModel& model, const std::string& dir, const Config& config);

struct MergeReport {
  std::string weights_path, adapter_path, base_path;
  std::string method;
  int64_t adapters = 0, adapter_params = 0;
};
// Folds the adapters of `run_dir` (its adapter_model.safetensors) into the weights they were
// trained over (compress.init_from as the run named it) and writes them to `out` (a weights file
// like a run's, PyTorch's names); the adapter file is written again beside it in PEFT's names.
MergeReport merge_run(const std::string& run_dir, const std::string& out);

}  // namespace trainlab
