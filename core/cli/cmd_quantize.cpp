// trainlab-cli quantize: post-training quantization of a run's weights into a real low-bit file
// (packed codes + fp16 scales) by rounding to nearest, GPTQ or AWQ (--method, calibrated on the
// training split), with its exact size and bits a weight, the accuracy of the quantized model,
// and optionally W8A8 (int8 weights and activations, integer matrix products).
// trainlab-cli prune: one-shot pruning of a run's weights (magnitude, 2:4, structured), with the
// sparsity per layer, the sparse encoding's size and the measured speed of dense vs 2:4-masked vs
// structurally pruned forward passes. The work is compress/post_training.h's.
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "config/compress_options.h"
#include "config/device_options.h"
#include "compress/post_training.h"
#include "data/text.h"
#include "io/weights.h"
#include "config/train_options.h"
#include "data/data_sources.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::cli {

Runner add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string weights, out, granularity = "channel", overrides, device = "cpu", method = "rtn";
    int bits = 8, group = 32, calibration_batches = 8, calibration = 16;
    int64_t val_windows = 64;
    double damp = 0.01;
    bool w8a8 = false, act_order = false;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("quantize", "Post-training quantization of a weights file to real low-bit storage");
  cmd->add_option("--weights", o->weights, "fp32 model.safetensors written by a run")->required();
  // The ranges of quantize's numbers are those of the config keys they stand for.
  cmd->add_option("--bits", o->bits, "Bits a weight, 2..8 (quant.bits)")->check(in_key_range("quant.bits"));
  cmd->add_option("--granularity", o->granularity, "tensor, channel or group (quant.granularity)");
  cmd->add_option("--group", o->group, "Weights per scale with --granularity group: 32, 64, 128 (quant.group)")
      ->check(in_key_range("quant.group"));
  cmd->add_option("--overrides", o->overrides, "Per-layer specs layer:bits[:granularity[:group]], e.g. net.4:8:channel");
  // The method's flags default to the run's quant.* keys (the Layer sensitivity view reads them too).
  auto* method = cmd->add_option("--method", o->method,
                                 "rtn (round to nearest), gptq (second-order error feedback) or awq (activation-aware "
                                 "scales); default: the run's quant.method");
  auto* calibration = cmd->add_option("--calibration", o->calibration,
                                      "gptq / awq: batches of train.batch rows (digits) or windows (char-gpt) of the "
                                      "training split; default: the run's quant.calibration")
                          ->check(in_key_range("quant.calibration"));
  auto* damp = cmd->add_option("--damp", o->damp,
                               "gptq: dampening, a fraction of the mean Hessian diagonal, (0, 1]; default: the run's quant.damp")
                   ->check(in_key_range("quant.damp"));
  auto* act_order = cmd->add_flag("--act-order", o->act_order,
                                  "gptq: columns by descending Hessian diagonal; default: the run's quant.act_order");
  cmd->add_option("--out", o->out, "Quantized weights file to write (packed codes + fp16 scales)");
  cmd->add_flag("--w8a8", o->w8a8, "Also evaluate W8A8: int8 weights and activations, int8 x int8 -> int32 products");
  cmd->add_option("--calibration-batches", o->calibration_batches, "W8A8: calibration batches of the training split")
      ->check(in_key_range("quant.calibration_batches"));
  cmd->add_option("--device", o->device, "cpu, cuda or auto: where the quantized model is evaluated");
  cmd->add_option("--val-windows", o->val_windows, "char-gpt: validation windows for the loss of both files")
      ->check(in_key_range("train.eval_windows"));
  cmd->add_option("--set", o->sets, "Override a config key of the data, e.g. --set data.path=FILE");
  return [o, cmd, method, calibration, damp, act_order]() -> int {
    if (!cmd->parsed()) return -1;
    PtqOptions po;
    po.method.method = o->method;
    po.method.damp = o->damp;
    po.method.validate();  // a bad method name before any file is read
    const SafeTensorsFile f = read_safetensors(o->weights);
    const Config c = weights_config(f, o->weights, [&](Config& user) { apply_sets(user, o->sets); });
    const QuantOptions run = quant_options(c);
    if (!method->count()) po.method.method = run.method;
    if (!calibration->count()) o->calibration = run.calibration;
    if (!damp->count()) po.method.damp = run.damp;
    po.method.act_order = act_order->count() ? o->act_order : run.act_order;
    po.spec.bits = o->bits;
    po.spec.granularity = granularity_from_name(o->granularity);
    po.spec.group = o->group;
    po.overrides = o->overrides;
    po.out = o->out;
    po.w8a8 = o->w8a8;
    po.calibration_batches = o->calibration_batches;
    po.val_windows = o->val_windows;
    po.calibration = o->calibration;
    auto be = create_backend(o->device, device_options(c));
    EvalData data;
    data.seed = static_cast<uint64_t>(c.get_int("train.seed"));
    data.batch = c.get_int("train.batch");
    TrainTestSplit split;
    TextCorpus corpus;
    if (c.get_string("model.name") == "char-gpt") {  // the character model: the run's validation split
      const std::string vocabulary = stored_vocabulary(f);
      corpus = load_text_data(data_options(c), vocabulary.empty() ? nullptr : &vocabulary);
      data.text_val = &corpus.val;
      data.text_train = &corpus.train;
    } else {
      split = load_classification_data(data_options(c));
      data.classes = &split;
    }
    std::printf("%s\n", quantize_report(*be, f, o->weights, po, data).dump(2).c_str());
    return 0;
  };
}

Runner add_prune_command(CLI::App& app) {
  struct Opts {
    std::string weights, out, method = "magnitude", scope = "layer", device = "cpu";
    double sparsity = 0.5;
    int64_t rows = 4096;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "prune", "One-shot pruning of a weights file (magnitude, 2:4, structured) with sparsity, size and measured speed");
  cmd->add_option("--weights", o->weights, "fp32 model.safetensors written by a run")->required();
  cmd->add_option("--method", o->method, "magnitude, 2:4 or structured");
  // The ranges of prune's numbers: the sparsity as prune.sparsity; speed rows as a batch that
  // fits a laptop (a million rows of 256 floats is 1 GiB).
  cmd->add_option("--sparsity", o->sparsity, "Fraction removed: of the weights (magnitude) or of the hidden units (structured)")
      ->check(in_key_range("prune.sparsity"));
  cmd->add_option("--scope", o->scope, "layer or global magnitude threshold");
  cmd->add_option("--out", o->out, "Pruned weights file (fp32; a structured prune writes the smaller model)");
  cmd->add_option("--rows", o->rows, "Batch rows for the speed measurement")->check(in_range(integers(1, 1 << 20)));
  cmd->add_option("--device", o->device, "cpu, cuda or auto");
  cmd->add_option("--set", o->sets, "Override a config key of the data");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const SafeTensorsFile f = read_safetensors(o->weights);
    const Config c = weights_config(f, o->weights, [&](Config& user) { apply_sets(user, o->sets); });
    PruneFileOptions po;
    po.method = o->method;
    po.sparsity = o->sparsity;
    po.global_scope = o->scope == "global";
    po.out = o->out;
    po.rows = o->rows;
    auto be = create_backend(o->device, device_options(c));
    const TrainTestSplit data = load_classification_data(data_options(c));
    std::printf("%s\n", prune_report(*be, f, o->weights, po, data).dump(2).c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
