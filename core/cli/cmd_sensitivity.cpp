// trainlab-cli sensitivity: the held-out loss and accuracy with one linear layer at a time
// quantized to each of --bits or pruned to each of --sparsities (compress/sensitivity.h), as a
// table or --json.
// trainlab-cli allocate: bits (--budget-bits average code bits a weight, --budget-bytes tensor
// bytes of the quantized file) or sparsity (--budget-sparsity) per layer from that table by the
// Pareto-front knapsack, applied and measured beside the uniform allocation; --out is a weights
// file that `trainlab-cli eval` evaluates (compress/held_out.h allocation_report).
#include <cstdio>
#include <memory>
#include <sstream>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "compress/held_out.h"
#include "config/compress_options.h"
#include "config/device_options.h"
#include "io/weights.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {
using Json = nlohmann::json;

struct SensitivityFlags {
  std::string weights, data = "validation", bits = "2,3,4,5,6,7,8", sparsities = "0.5,0.7,0.8,0.9,0.95,0.98";
  std::string granularity = "channel", device = "cpu";
  int group = 32;
  int64_t val_windows = 32;
  bool json = false;
  std::vector<std::string> sets;
};

// "2,3,4" -> numbers; an item that is not a whole number in `r` is an error naming the option.
std::vector<double> parse_list(const std::string& text, const std::string& option, const NumberRange& r) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    double v = 0.0;
    const std::string err = check_number(r, item, &v, nullptr);
    if (!err.empty()) throw Error(option + ": " + err);
    out.push_back(v);
  }
  if (out.empty()) throw Error(option + ": expected a comma-separated list, e.g. " + (option == "--bits" ? "2,3,4" : "0.5,0.9"));
  return out;
}

void add_common(CLI::App* cmd, SensitivityFlags& o) {
  cmd->add_option("--weights", o.weights, "fp32 model.safetensors written by a run")->required();
  cmd->add_option("--data", o.data,
                  "Held-out data: validation (the last 20% of the training split; default) or test (char-gpt: its "
                  "validation windows either way)");
  cmd->add_option("--bits", o.bits, "Bit widths to measure, comma-separated, each 2..8");
  cmd->add_option("--sparsities", o.sparsities, "Magnitude-pruning sparsities to measure, comma-separated, each in (0, 1)");
  cmd->add_option("--granularity", o.granularity, "Quantization scales: tensor, channel (default) or group");
  cmd->add_option("--group", o.group, "Weights per scale with --granularity group (quant.group)")->check(in_key_range("quant.group"));
  cmd->add_option("--val-windows", o.val_windows, "char-gpt: validation windows of each measurement")
      ->check(in_key_range("train.eval_windows"));
  cmd->add_option("--device", o.device, "cpu, cuda or auto");
  cmd->add_option("--set", o.sets, "Override a config key of the data, e.g. --set data.path=FILE");
  cmd->add_flag("--json", o.json, "Print JSON");
}

SensitivityOptions options_of(const SensitivityFlags& f) {
  SensitivityOptions o;
  o.bits.clear();
  for (double b : parse_list(f.bits, "--bits", integers(2, 8))) o.bits.push_back(static_cast<int>(b));
  o.sparsities = parse_list(f.sparsities, "--sparsities", reals(0, 1, true, true));
  o.granularity = granularity_from_name(f.granularity);
  o.group = f.group;
  return o;
}

void print_table(const SensitivityTable& t, const std::string& held_out) {
  std::printf("held-out %s; fp32: loss %.4f, accuracy %.4f\n", held_out.c_str(), t.baseline.loss, t.baseline.accuracy);
  std::printf("accuracy with one layer quantized (%s scales):\n%-24s", granularity_name(t.options.granularity), "layer");
  for (int b : t.options.bits) std::printf(" %6d-bit", b);
  std::printf("\n");
  for (const LayerSensitivity& L : t.layers) {
    std::printf("%-24s", L.name.c_str());
    for (const EvalPoint& p : L.bits) std::printf(" %10.4f", p.accuracy);
    std::printf("\n");
  }
  std::printf("accuracy with one layer pruned (magnitude):\n%-24s", "layer");
  for (double s : t.options.sparsities) std::printf(" %9.0f%%", 100.0 * s);
  std::printf("\n");
  for (const LayerSensitivity& L : t.layers) {
    std::printf("%-24s", L.name.c_str());
    for (const EvalPoint& p : L.sparsity) std::printf(" %10.4f", p.accuracy);
    std::printf("\n");
  }
}
}  // namespace

Runner add_sensitivity_command(CLI::App& app) {
  auto o = std::make_shared<SensitivityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sensitivity", "Held-out loss and accuracy with one layer at a time quantized (each of --bits) or pruned (--sparsities)");
  add_common(cmd, *o);
  return [o, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    const SensitivityOptions so = options_of(*o);
    const SafeTensorsFile f = read_safetensors(o->weights);
    const Config c = weights_config(f, o->weights, [&](Config& user) { apply_sets(user, o->sets); });
    auto be = create_backend(o->device, device_options(c));
    const HeldOutData h = held_out_data(*be, c, o->data, o->weights, o->val_windows);
    const SensitivityTable t = measure_sensitivity(f, o->weights, h.eval, so);
    if (o->json) {
      Json j = t.to_json();
      j["weights"] = o->weights;
      j["held_out"] = h.description;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      print_table(t, h.description);
    }
    return 0;
  };
}

Runner add_allocate_command(CLI::App& app) {
  struct Opts : SensitivityFlags {
    double budget_bits = 0, budget_sparsity = 0;
    int64_t budget_bytes = 0;
    std::string out, method = "rtn";
    int calibration = 16;
    double damp = 0.01;
    bool act_order = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "allocate", "Bits or sparsity per layer under a budget, from the measured sensitivity; writes the weights file");
  add_common(cmd, *o);
  auto* bb = cmd->add_option("--budget-bits", o->budget_bits, "Average code bits a weight over the linear layers, 2..8")
                 ->check(in_range(reals(2, 8)));
  auto* by = cmd->add_option("--budget-bytes", o->budget_bytes, "Tensor bytes of the quantized file (codes, scales, biases)")
                 ->check(in_range(integers(1, 1e15)));
  auto* bs = cmd->add_option("--budget-sparsity", o->budget_sparsity, "Fraction of the linear weights removed, in (0, 1)")
                 ->check(in_range(reals(0, 1, true, true)));
  bb->excludes(by)->excludes(bs);
  by->excludes(bs);
  cmd->add_option("--out", o->out, "The allocated weights file (quantized, or pruned fp32)")->required();
  cmd->add_option("--method", o->method, "How the allocated files are quantized: rtn, gptq or awq (quant.method)");
  // gptq / awq's settings default to the run's quant.* keys, as in the Layer sensitivity view.
  auto* calibration = cmd->add_option("--calibration", o->calibration,
                                      "gptq / awq: batches or windows of the training split; default: the run's "
                                      "quant.calibration")
                          ->check(in_key_range("quant.calibration"));
  auto* damp = cmd->add_option("--damp", o->damp, "gptq: dampening, a fraction of the mean Hessian diagonal; default: "
                                                  "the run's quant.damp")
                   ->check(in_key_range("quant.damp"));
  auto* act_order = cmd->add_flag("--act-order", o->act_order,
                                  "gptq: columns by descending Hessian diagonal; default: the run's quant.act_order");
  return [o, cmd, bb, by, bs, calibration, damp, act_order]() -> int {
    if (!cmd->parsed()) return -1;
    if (!bb->count() && !by->count() && !bs->count())
      throw Error("allocate needs one budget: --budget-bits B, --budget-bytes N or --budget-sparsity S");
    AllocateRequest r;
    r.options = options_of(*o);
    r.budget = bb->count()   ? AllocationBudget{BudgetKind::Bits, o->budget_bits}
               : by->count() ? AllocationBudget{BudgetKind::Bytes, static_cast<double>(o->budget_bytes)}
                             : AllocationBudget{BudgetKind::Sparsity, o->budget_sparsity};
    r.split = o->data;
    r.out = o->out;
    r.text_windows = o->val_windows;
    r.method.method = o->method;
    r.method.damp = o->damp;
    r.method.act_order = o->act_order;
    r.method.validate();
    r.calibration = o->calibration;
    const SafeTensorsFile f = read_safetensors(o->weights);
    const Config c = weights_config(f, o->weights, [&](Config& user) { apply_sets(user, o->sets); });
    const QuantOptions run = quant_options(c);
    if (!calibration->count()) r.calibration = run.calibration;
    if (!damp->count()) r.method.damp = run.damp;
    if (!act_order->count()) r.method.act_order = run.act_order;
    auto be = create_backend(o->device, device_options(c));
    Json j = allocation_report(*be, f, o->weights, c, r);
    if (!o->json) j.erase("sensitivity");  // the table is `trainlab-cli sensitivity`'s; --json keeps it
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  };
}

}  // namespace trainlab::cli
