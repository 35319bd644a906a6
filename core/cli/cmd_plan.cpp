// trainlab-cli plan: what a model needs per GPU and how long a step takes on a layout of GPUs
// (plan/planner.h), the search over layouts that fit, and --check, a short run of the lab's own
// model on this machine with the ledger's bytes beside the prediction (train/plan_check.h).
//
//   trainlab-cli plan --model char-gpt-gpt2 --batch 8 --gpus 8 --zero 1 --precision bf16
//   trainlab-cli plan --layers 96 --hidden 12288 --heads 96 --seq 2048 --vocab 51200
//                     --gpus 1024 --nodes 128 --tp 8 --pp 16 --micro-batches 64 --recompute selective
//   trainlab-cli plan --params 7e9 --gpus 8 --zero 3 --json
//   trainlab-cli plan --model char-gpt-small --gpus 16 --nodes 2 --search
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/option_ranges.h"
#include "cli/plan_print.h"
#include "plan/finetune_memory.h"
#include "train/plan_check.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

struct PlanFlags {
  std::string model, precision = "bf16", optimizer = "adamw", recompute = "none", activations, gpu = "h200";
  std::string offload = "none", schedule = "1f1b";
  std::string finetune = "full", targets = "qkv,proj,fc1,fc2";  // fine-tuning's own lines (plan/finetune_memory.h)
  int64_t rank = 8;
  double params = 0, dropout = 0.1, gpu_memory = 0, mfu = 0.4, nvlink = 0, network = 0;
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  int64_t batch = 1, gpus = 1, nodes = 1, tp = 1, pp = 1, micro_batches = 1, recompute_every = 1;
  int64_t global_batch = 0, top = 10, zero = 0, steps = 1, virtual_stages = 1;
  bool search = false, json = false, check = false, sequence_parallel = false, print_schedule = false;
  std::string device = "auto", out;
  // The options given (CLI11's count), for the ones whose absence means something.
  std::map<std::string, CLI::Option*> opt;
  bool given(const std::string& name) const { return opt.at(name)->count() > 0; }
};

void add_plan_options(CLI::App* cmd, PlanFlags& f) {
  auto add = [&](const std::string& name, auto& value, const std::string& help) {
    f.opt[name] = cmd->add_option(name, value, help);
  };
  // A numeric option with its range (cli/option_ranges.h: NaN and infinities refused while parsing).
  // The ranges are validate_plan's (plan/planner.cpp), which checks them again for the app's planner.
  auto add_num = [&](const std::string& name, auto& value, const std::string& help, const NumberRange& r) {
    f.opt[name] = cmd->add_option(name, value, help)->check(in_range(r));
  };
  // Every numeric option's range is here, checked while parsing; run_plan relies on them (zero
  // 0-3, top and steps >= 1).
  constexpr double kCount = 1 << 20, kDim = 1 << 24;  // planner.cpp's kMaxCount, kMaxDim
  add("--model", f.model,
      "One of the lab's models: digits-mlp, char-gpt-tiny, char-gpt-small, char-gpt-gpt2 (shape flags "
      "override its dimensions)");
  add_num("--params", f.params,
          "A model by its parameter count alone (weights, gradients and optimizer state; no activations)",
          integers(1, 1e15));
  add_num("--layers", f.layers, "Transformer layers L", integers(1, kCount));
  add_num("--hidden", f.hidden, "Transformer width h (the MLP is 4h wide)", integers(1, kDim));
  add_num("--heads", f.heads, "Attention heads a (must divide --hidden)", integers(1, kDim));
  add_num("--seq", f.seq, "Sequence length s (tokens per sample)", integers(1, kDim));
  add_num("--vocab", f.vocab, "Vocabulary V", integers(2, kDim));
  add_num("--batch", f.batch, "Micro-batch b: samples per micro-batch per GPU (default 1)", integers(1, kCount));
  add_num("--gpus", f.gpus, "GPUs in all, G = DP x TP x PP (default 1)", integers(1, kCount));
  add_num("--nodes", f.nodes, "Nodes the GPUs are spread over, evenly (default 1)", integers(1, kCount));
  add_num("--zero", f.zero, "ZeRO stage 0-3 over the data-parallel ranks (default 0)", integers(0, 3));
  add_num("--tp", f.tp, "Tensor-parallel degree T (divides --heads; default 1)", integers(1, kCount));
  add_num("--pp", f.pp, "Pipeline stages P (divides --layers; default 1)", integers(1, kCount));
  add_num("--micro-batches", f.micro_batches,
          "Micro-batches M per optimizer step (gradient accumulation; the pipeline's; "
          "default 1)",
          integers(1, kCount));
  add("--schedule", f.schedule,
      "Pipeline schedule with --pp > 1: gpipe, 1f1b, interleaved (--virtual-stages chunks a GPU; --micro-batches a "
      "multiple of --pp) or zb-h1 (zero-bubble H1: weight gradients fill the bubble); default 1f1b");
  add_num("--virtual-stages", f.virtual_stages,
          "--schedule interleaved: model chunks a GPU holds (--pp x this divides --layers; default 1)", integers(1, kCount));
  f.opt["--print-schedule"] = cmd->add_flag("--print-schedule", f.print_schedule,
                                            "Also print the pipeline schedule as a table: a row a stage, a column a "
                                            "time slot (F forward, B backward, W weight gradient, . idle)");
  add("--precision", f.precision,
      "fp32, tf32, bf16, fp16 or fp8 (16-bit and fp8 keep an fp32 master copy; default bf16)");
  add("--optimizer", f.optimizer,
      "adamw (8 bytes of state a parameter), sgd (momentum, 4), adamw8bit (8-bit moments with a scale per block "
      "of 2048: 2.004), adafactor (factored second moment: 4 (rows + cols) a matrix, 4 a vector element) or "
      "lion (4); default adamw");
  add("--offload", f.offload,
      "none or cpu: cpu keeps the fp32 masters and the optimizer state in host memory (optim.offload), with "
      "--zero 0 only; default none");
  add("--recompute", f.recompute, "none, selective or full (activation recomputation; default none)");
  add_num("--recompute-every", f.recompute_every, "full: layers per checkpointed group (default 1)",
          integers(1, kCount));
  add_num("--dropout", f.dropout,
          "Dropout probability; 0 for none (a shape: default 0.1, with its masks as Megatron counts "
          "them; a preset: its own, 0)",
          reals(0, 1, false, true));
  add("--activations", f.activations,
      "lab (TrainLab's own buffers, exact; default for --model) or megatron "
      "(Korthikanti et al. 2022; default for a shape)");
  add("--gpu", f.gpu, "h100, h200 or a100: memory, peak FLOP/s, links (default h200)");
  add_num("--gpu-memory", f.gpu_memory, "GPU memory in GB (10^9 bytes), instead of --gpu's", reals(0, 1e6, true));
  add_num("--mfu", f.mfu, "Measured model FLOPs utilisation in (0, 1] (default 0.4)", reals(0, 1, true));
  add_num("--nvlink-gbs", f.nvlink, "Link bandwidth within a node, GB/s per GPU and direction (default --gpu's NVLink)",
          reals(0, 1e6, true));
  add_num("--network-gbs", f.network, "Link bandwidth between nodes, GB/s per GPU (default --gpu's NIC)",
          reals(0, 1e6, true));
  f.opt["--search"] = cmd->add_flag("--search", f.search,
                                    "List the layouts (DP x TP x PP, ZeRO, recomputation, "
                                    "micro-batches) that fit, fastest first");
  add_num("--global-batch", f.global_batch,
          "--search: samples per optimizer step, fixed across layouts (default --batch x "
          "--micro-batches x --gpus)",
          integers(1, 1e12));
  add_num("--top", f.top, "--search: layouts to print (default 10; --json lists all)", integers(1, 1e6));
  f.opt["--json"] = cmd->add_flag("--json", f.json, "Print one JSON object");
  f.opt["--sequence-parallel"] = cmd->add_flag(
      "--sequence-parallel", f.sequence_parallel,
      "With --tp: LayerNorm, dropout and the residual stream on 1/TP of the tokens per GPU (all-gathers and "
      "reduce-scatters in place of the all-reduces)");
  f.opt["--check"] = cmd->add_flag("--check", f.check,
                                   "Run the lab's own model with this layout on this machine (one "
                                   "device) and print the ledger's bytes beside the prediction");
  add("--finetune", f.finetune,
      "full, lora, qlora or dora: with adapters, also print the fine-tuning run's own lines (frozen base in its "
      "format, adapters, their gradients and optimizer state; trainlab-cli train --finetune measures the same)");
  add_num("--rank", f.rank, "--finetune: adapter rank r (default 8)", integers(1, 4096));
  add("--targets", f.targets, "--finetune: products the adapters wrap (default qkv,proj,fc1,fc2)");
  add("--device", f.device, "--check: cpu, cuda, cuda:N or auto (default auto)");
  add_num("--steps", f.steps, "--check: optimizer steps (default 1)", integers(1, 1000));
  add("--out", f.out, "--check: run record folder (default: a temporary folder)");
}

const char* kShapeFlags[] = {"--layers", "--hidden", "--heads", "--seq", "--vocab"};

// The model from --model, --params or the shape flags (exactly one way).
PlanModel plan_model_of(const PlanFlags& f) {
  bool any_shape = false;
  for (const char* s : kShapeFlags) any_shape = any_shape || f.given(s);
  if (!f.given("--model") && !f.given("--params") && !any_shape)
    throw Error("plan: give a model: --model NAME, --params P, or its shape (--layers --hidden --heads --seq --vocab)");
  if (f.given("--params")) {
    for (const char* s : {"--model", "--layers", "--hidden", "--heads", "--vocab", "--dropout"})
      if (f.given(s)) throw Error(std::string("--params gives the model by its count alone: not with ") + s);
    PlanModel m;
    m.kind = PlanModelKind::Params;
    m.name = "params";
    m.params = static_cast<int64_t>(f.params);
    if (f.given("--seq")) m.sample_tokens = f.seq;
    return m;
  }
  PlanModel m;
  if (f.given("--model")) {
    m = plan_model_preset(f.model, "--model");
  } else {
    for (const char* s : kShapeFlags)
      if (!f.given(s)) throw Error(std::string("a model by its shape needs ") + s + " too (--layers --hidden --heads --seq --vocab)");
    m.kind = PlanModelKind::Transformer;
    m.transformer.dropout = 0.1;
  }
  if (m.kind == PlanModelKind::Mlp) {
    if (any_shape) throw Error("--model " + m.name + " is an MLP: the shape flags (--layers ...) are a transformer's");
    if (f.given("--dropout")) throw Error("--dropout applies to transformers, not --model " + m.name);
    return m;
  }
  CharGptConfig& c = m.transformer;
  if (f.given("--layers")) c.layers = f.layers;
  if (f.given("--hidden")) c.dim = f.hidden;
  if (f.given("--heads")) c.heads = f.heads;
  if (f.given("--seq")) c.context = f.seq;
  if (f.given("--vocab")) c.vocab = f.vocab;
  if (f.given("--dropout")) c.dropout = f.dropout;
  if (f.given("--model") && any_shape) m.name += " (reshaped)";
  return m;
}

PlanSetup plan_setup_of(const PlanFlags& f) {
  PlanSetup s;
  s.model = plan_model_of(f);
  resolve_plan_setup(s, f.precision, f.optimizer, f.gpu);
  if (f.offload != "none" && f.offload != "cpu") throw Error("--offload '" + f.offload + "': expected none or cpu");
  s.offload = f.offload == "cpu";
  s.micro_batch = f.batch;
  s.gpus = f.gpus;
  s.nodes = f.nodes;
  s.mfu = f.mfu;
  if (f.given("--activations"))
    s.count = activation_count_from_name(f.activations, "--activations");
  else
    s.count = f.given("--model") || s.model.kind != PlanModelKind::Transformer ? ActivationCount::Lab : ActivationCount::Megatron;
  if (f.given("--gpu-memory")) s.gpu_memory_bytes = f.gpu_memory * 1e9;
  if (f.given("--nvlink-gbs")) s.nvlink_bytes_per_s = f.nvlink * 1e9;
  if (f.given("--network-gbs")) s.network_bytes_per_s = f.network * 1e9;
  // NaN and infinity compare false against every bound: validate_plan refuses them by name.
  return s;
}

Layout layout_of(const PlanFlags& f) {
  Layout l;
  l.tp = f.tp;
  l.pp = f.pp;
  // DP is what TP and PP leave of the GPUs (validate_plan names the options when they do not divide).
  const bool sane = f.tp >= 1 && f.pp >= 1 && f.tp <= (int64_t{1} << 20) && f.pp <= (int64_t{1} << 20);
  l.dp = sane && f.gpus % (f.tp * f.pp) == 0 ? f.gpus / (f.tp * f.pp) : 1;
  l.zero = static_cast<int>(f.zero);
  l.recompute = recompute_from_name(f.recompute, "--recompute");
  l.recompute_every = f.recompute_every;
  l.micro_batches = f.micro_batches;
  l.sequence_parallel = f.sequence_parallel;
  l.schedule = dist::pipeline_schedule_from_name(f.schedule, "--schedule");
  l.virtual_stages = f.virtual_stages;
  return l;
}

// --search: the fixed values are the flags given; the rest are searched.
SearchSpace search_space_of(const PlanFlags& f, const Layout& l) {
  SearchSpace sp;
  if (f.given("--tp")) sp.tp = {l.tp};
  if (f.given("--pp")) sp.pp = {l.pp};
  if (f.given("--zero")) sp.zero = {l.zero};
  if (f.given("--recompute")) sp.recompute = {l.recompute};
  sp.recompute_every = l.recompute_every;
  sp.micro_batches = l.micro_batches;
  if (f.given("--global-batch")) sp.global_batch = f.global_batch;
  sp.schedule = l.schedule;
  sp.virtual_stages = l.virtual_stages;
  return sp;
}

// --finetune lora|qlora|dora: the fine-tuning run's lines (plan/finetune_memory.h) for the model.
std::optional<FinetuneMemory> finetune_lines(const PlanFlags& f, const PlanSetup& s) {
  for (const char* only : {"--rank", "--targets"})
    if (f.given(only) && !f.given("--finetune")) throw Error(std::string(only) + " applies to --finetune");
  FinetuneOptions o;
  o.method = finetune_method_from_name(f.finetune);
  if (!o.adapters()) return std::nullopt;
  if (s.model.kind != PlanModelKind::Transformer)
    throw Error("--finetune " + f.finetune + " adapts a transformer's products: give --model char-gpt-* or a shape");
  o.rank = f.rank;
  o.targets = parse_finetune_targets(f.targets);
  const CharGptConfig& c = s.model.transformer;
  OptimizerOptions opt;
  opt.name = s.optimizer;
  return predict_finetune_memory(finetune_targets(c.layers, c.dim, c.padded_vocab(), o), s.model.total_params(), o,
                                 opt, s.element_bytes);
}

int run_plan(const PlanFlags& f) {
  for (const char* only : {"--global-batch", "--top"})
    if (f.given(only) && !f.search) throw Error(std::string(only) + " applies to --search");
  for (const char* only : {"--device", "--steps", "--out"})
    if (f.given(only) && !f.check) throw Error(std::string(only) + " applies to --check");
  if (f.search && f.check) throw Error("--search and --check: one at a time");
  if (f.print_schedule && (f.search || f.json || f.check))
    throw Error("--print-schedule prints one layout's schedule as text: not with --search, --json or --check");
  const PlanSetup s = plan_setup_of(f);
  const Layout l = layout_of(f);
  if (f.search) {
    const SearchResult r = search_layouts(s, search_space_of(f, l));
    if (f.json)
      print_search_json(s, r);
    else
      print_search_table(s, r, f.top);
    return 0;
  }
  const PlanResult r = plan_layout(s, l);
  if (!f.check) {
    const std::optional<FinetuneMemory> ft = finetune_lines(f, s);
    if (f.json) {
      Json j = plan_json(s, r);
      if (ft) j["finetune"] = ft->to_json();
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      print_plan_table(s, r);
      if (ft)
        for (const std::string& line : ft->lines()) std::printf("%s\n", line.c_str());
    }
    if (f.print_schedule) print_schedule_table(l);
    return 0;
  }
  return run_plan_check(s, r, f.device, f.out, f.steps, f.json);
}

}  // namespace

Runner add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand("plan", "Memory per GPU and time per step of a model on a layout of GPUs (DP x TP x PP, "
                                             "ZeRO, recomputation), the layouts that fit (--search), a check on this machine");
  add_plan_options(cmd, *f);
  cmd->footer("Bytes are printed in GB (10^9) and GiB (2^30). docs/PLANNER.md gives every formula with its source and "
              "worked examples.");
  return [f, cmd]() -> int {
    if (!cmd->parsed()) return -1;
    return run_plan(*f);
  };
}

}  // namespace trainlab::cli
