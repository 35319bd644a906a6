// trainlab-cli quantize: post-training quantization of a run's weights into a real low-bit file
// (packed codes + fp16 scales), with its exact size and bits a weight, the accuracy of the
// quantized model, and optionally W8A8 (int8 weights and activations, integer matrix products).
// trainlab-cli prune: one-shot pruning of a run's weights (magnitude, 2:4, structured), with the
// sparsity per layer, the sparse encoding's size and the measured speed of dense vs 2:4-masked vs
// structurally pruned forward passes.
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <memory>

#include "backend/backend.h"
#include "cli/commands.h"
#include "compress/compression.h"
#include "io/safetensors.h"
#include "train/data_setup.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab::cli {

namespace {
Config config_of(const SafeTensorsFile& f, const std::string& path, const std::vector<std::string>& sets) {
  auto it = f.metadata.find("trainlab_config");
  if (it == f.metadata.end()) throw Error(path + ": no trainlab_config metadata (was it written by trainlab?)");
  Config c = Config::from_json(Json::parse(it->second), path + " metadata");
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw Error("--set " + s + ": expected key=value");
    c.set(s.substr(0, eq), s.substr(eq + 1));
  }
  return c;
}
}  // namespace

Runner add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string weights, out, granularity = "channel", overrides, device = "cpu";
    int bits = 8, group = 32, calibration_batches = 8;
    int64_t val_windows = 64;
    bool w8a8 = false;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("quantize", "Post-training quantization of a weights file to real low-bit storage");
  cmd->add_option("--weights", o->weights, "fp32 model.safetensors written by a run")->required();
  cmd->add_option("--bits", o->bits, "Bits a weight, 2..8 (quant.bits)")->check(CLI::Range(2, 8));
  cmd->add_option("--granularity", o->granularity, "tensor, channel or group (quant.granularity)");
  cmd->add_option("--group", o->group, "Weights per scale with --granularity group: 32, 64, 128 (quant.group)");
  cmd->add_option("--overrides", o->overrides, "Per-layer specs layer:bits[:granularity[:group]], e.g. net.4:8:channel");
  cmd->add_option("--out", o->out, "Quantized weights file to write (packed codes + fp16 scales)");
  cmd->add_flag("--w8a8", o->w8a8, "Also evaluate W8A8: int8 weights and activations, int8 x int8 -> int32 products");
  cmd->add_option("--calibration-batches", o->calibration_batches, "W8A8: calibration batches of the training split");
  cmd->add_option("--device", o->device, "cpu, cuda or auto: where the quantized model is evaluated");
  cmd->add_option("--val-windows", o->val_windows, "char-gpt: validation windows for the loss of both files")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--set", o->sets, "Override a config key of the data, e.g. --set data.path=FILE");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const SafeTensorsFile f = read_safetensors(o->weights);
    if (is_quantized_file(f)) throw Error(o->weights + " is already quantized: give the fp32 weights of a run");
    Config c = config_of(f, o->weights, o->sets);
    QuantSpec spec;
    spec.bits = o->bits;
    spec.granularity = granularity_from_name(o->granularity);
    spec.group = o->group;
    const QuantPlan plan = QuantPlan::parse(spec, o->overrides);
    QuantFileReport rep;
    SafeTensorsFile q = quantize_weights(f, plan, &rep);
    auto be = create_backend(o->device, device_options(c));
    Json out = {{"weights", o->weights}, {"spec", spec.to_json()}, {"fp32_bytes", tensor_bytes(f)}};
    const bool text = c.get_string("model.name") == "char-gpt";
    TrainTestSplit data;
    if (text) {  // the character model: validation loss of both files on the run's validation split
      const std::string dn = c.get_string("data.name"), dpath = c.get_string("data.path");
      const std::string path = dn == "text" && !dpath.empty() ? dpath : find_resource("data/tinyshakespeare.txt");
      const TextCorpus corpus = load_text_corpus(path, c.get_float("data.val_fraction"), static_cast<uint64_t>(c.get_int("train.seed")));
      const int64_t windows = o->val_windows, batch = std::min<int64_t>(windows, 32);
      const uint64_t seed = static_cast<uint64_t>(c.get_int("train.seed"));
      out["val_windows"] = windows;
      out["fp32_val_loss"] = file_text_val_loss(*be, f, corpus.val, windows, batch, seed);
      out["val_loss"] = file_text_val_loss(*be, q, corpus.val, windows, batch, seed);
    } else {
      data = load_classification_data(c);
      out["fp32_test_accuracy"] = file_accuracy(*be, f, data.test);
      out["test_accuracy"] = file_accuracy(*be, q, data.test);
    }
    if (!o->out.empty()) {
      write_safetensors(o->out, q);
      rep.file_bytes = static_cast<int64_t>(std::filesystem::file_size(o->out));
      out["out"] = o->out;
    }
    out["storage"] = rep.to_json();
    out["model_bytes"] = rep.model_bytes;
    out["bits_per_weight"] = rep.bits_per_weight();
    if (o->w8a8) {
      auto m = load_model_file(*be, o->weights);
      auto* mlp = dynamic_cast<Mlp*>(m.get());
      if (!mlp) throw Error("--w8a8 needs a digits MLP weights file (the character model has no W8A8 path)");
      W8A8Mlp w8(*be, *mlp, data.train, c.get_int("train.batch"), o->calibration_batches);
      out["w8a8_test_accuracy"] = w8.accuracy(*be, data.test);
      out["w8a8_weight_bytes"] = w8.weight_bytes();
      out["w8a8_activation_scales"] = w8.activation_scales();
    }
    std::printf("%s\n", out.dump(2).c_str());
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
  cmd->add_option("--sparsity", o->sparsity, "Fraction removed: of the weights (magnitude) or of the hidden units (structured)");
  cmd->add_option("--scope", o->scope, "layer or global magnitude threshold");
  cmd->add_option("--out", o->out, "Pruned weights file (fp32; a structured prune writes the smaller model)");
  cmd->add_option("--rows", o->rows, "Batch rows for the speed measurement");
  cmd->add_option("--device", o->device, "cpu, cuda or auto");
  cmd->add_option("--set", o->sets, "Override a config key of the data");
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const SafeTensorsFile f = read_safetensors(o->weights);
    Config c = config_of(f, o->weights, o->sets);
    auto be = create_backend(o->device, device_options(c));
    const TrainTestSplit data = load_classification_data(c);
    auto dense = load_model_file(*be, o->weights);
    auto* mlp = dynamic_cast<Mlp*>(dense.get());
    Json out = {{"weights", o->weights}, {"method", o->method}};
    out["dense_test_accuracy"] = model_accuracy(*be, *dense, data.test);
    auto pruned = load_model_file(*be, o->weights);
    std::unique_ptr<Mlp> small;
    auto ps = prunable_parameters(*pruned);
    if (o->method == "magnitude") {
      apply_masks(*be, ps, magnitude_masks(download_masters(*be, ps), o->sparsity,
                                           o->scope == "global" ? PruneScope::Global : PruneScope::Layer));
    } else if (o->method == "2:4") {
      auto ws = download_masters(*be, ps);
      std::vector<std::vector<float>> masks;
      for (size_t i = 0; i < ps.size(); ++i) masks.push_back(mask_2_4(ws[i], ps[i]->shape[0], ps[i]->shape[1]));
      apply_masks(*be, ps, masks);
    } else if (o->method == "structured") {
      if (!mlp) throw Error("structured pruning needs an MLP");
      auto* pm = dynamic_cast<Mlp*>(pruned.get());
      const StructuredPlan plan = plan_structured(*be, *pm, o->sparsity);
      small = build_structured(*be, *pm, plan);
      apply_structured_masks(*be, *pm, plan);
      out["structured_sizes"] = small->sizes();
      out["structured_test_accuracy"] = model_accuracy(*be, *small, data.test);
      out["structured_bytes"] = small->parameter_count() * 4;
    } else {
      throw Error("unknown pruning method '" + o->method + "': expected magnitude, 2:4 or structured");
    }
    out["test_accuracy"] = model_accuracy(*be, *pruned, data.test);
    // Speed, measured interleaved (5 rounds of each model in turn, the best round's median) so that
    // a busy machine affects them alike.
    std::vector<Model*> timed = {dense.get(), pruned.get()};
    if (small) timed.push_back(small.get());
    std::vector<double> best(timed.size(), 1e30);
    for (int round = 0; round < 5; ++round)
      for (size_t i = 0; i < timed.size(); ++i) best[i] = std::min(best[i], time_forward_ms(*be, *timed[i], o->rows, 15));
    out["dense_forward_ms"] = best[0];
    out["masked_dense_forward_ms"] = best[1];
    if (small) out["structured_forward_ms"] = best[2];
    out["sparsity"] = sparsity_report(*be, *pruned).to_json();
    if (!o->out.empty()) {
      SafeTensorsFile w = model_to_file(*be, small ? *small : *pruned);
      w.metadata["trainlab_config"] = f.metadata.at("trainlab_config");
      write_safetensors(o->out, w);
      out["out"] = o->out;
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
