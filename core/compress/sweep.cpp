#include "compress/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "backend/backend.h"
#include "compress/compression.h"
#include "compress/ptq_methods.h"
#include "io/weights.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace trainlab {

Json SweepRow::to_json() const {
  return {{"method", method},         {"granularity", granularity},
          {"bits", bits},             {"sparsity", sparsity},
          {"test_accuracy", test_accuracy}, {"model_bytes", model_bytes},
          {"bits_per_weight", bits_per_weight}, {"train_steps", train_steps},
          {"forward_ms", forward_ms}, {"run_dir", run_dir},
          {"note", note}};
}

Json SweepTable::to_json() const {
  Json j = header;
  Json rs = Json::array();
  for (const auto& r : rows) rs.push_back(r.to_json());
  j["rows"] = rs;
  return j;
}

std::string SweepTable::to_csv() const {
  std::string csv = "method,granularity,bits,sparsity,test_accuracy,model_bytes,bits_per_weight,train_steps,forward_ms,run_dir,note\n";
  for (const auto& r : rows) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s,%s,%d,%.2f,%.4f,%lld,%.4f,%ld,%.4f,%s,\"%s\"\n", r.method.c_str(), r.granularity.c_str(),
                  r.bits, r.sparsity, r.test_accuracy, static_cast<long long>(r.model_bytes), r.bits_per_weight, r.train_steps,
                  r.forward_ms, r.run_dir.c_str(), r.note.c_str());
    csv += buf;
  }
  return csv;
}

namespace {

void write_json(const std::string& path, const Json& j) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(path + ": cannot write");
  out << j.dump(2) << "\n";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(path + ": cannot write");
  out << text;
}

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

struct Sweep {
  Sweep(Backend& b, const TrainTestSplit& d, const SweepOptions& opts, const SweepTrain& t, const SweepLog& l)
      : be(b), data(d), o(opts), trainer(t), log(l) {}
  Backend& be;
  const TrainTestSplit& data;
  const SweepOptions& o;
  const SweepTrain& trainer;
  const SweepLog& log;
  std::vector<SweepRow> rows;
  std::string base_weights;
  SafeTensorsFile base_file;
  int64_t weights_count = 0;  // linear weights of the baseline (for bits per weight)
  long base_steps = 0;
  Json skipped = Json::array();

  std::string dir(const std::string& name) const { return o.out + "/runs/" + name; }

  // Runs one section of the grid when the backend supports every operation it needs; otherwise the
  // section is skipped with a note in the table.
  struct Need {
    Op op;
    DType dtype;
    const char* name;  // the backend operation, for the note
  };
  template <class F>
  void section(const char* label, const std::vector<Need>& needs, F&& f) {
    for (const Need& n : needs)
      if (!be.supports(n.op, n.dtype)) {
        const std::string why = std::string(n.name) + " (" + dtype_name(n.dtype) + ") is not supported on " + be.info().name;
        log(fmt("  %s skipped: %s", label, why.c_str()));
        skipped.push_back({{"section", label}, {"reason", why}});
        return;
      }
    f();
  }

  void add(SweepRow r) {
    log(fmt("  %-22s %-10s bits %2d  sparsity %5.1f%%  acc %.4f  %8lld bytes  %.3f bits/w", r.method.c_str(), r.granularity.c_str(),
            r.bits, r.sparsity, r.test_accuracy, static_cast<long long>(r.model_bytes), r.bits_per_weight));
    rows.push_back(std::move(r));
  }

  // Trains one point (fine-tuning from the baseline unless `from_scratch`); returns its summary and
  // compression report (compression.json, empty when the run compressed nothing).
  std::pair<SweepTrained, Json> train(const std::string& name, const SweepSets& sets, long steps, bool from_scratch = false) {
    // Points keep the baseline's step count for fresh trainings (distillation, lottery ticket).
    SweepSets all = {{"train.epochs", "0"}, {"run.out", dir(name)}, {"train.steps", std::to_string(steps)}};
    if (!from_scratch) all.emplace_back("compress.init_from", base_weights);
    all.insert(all.end(), sets.begin(), sets.end());
    SweepTrained s = trainer(all);
    if (s.status != "completed") throw Error("sweep point " + name + " " + s.status + ": " + s.message);
    Json comp;
    std::ifstream in(dir(name) + "/compression.json");
    if (in) in >> comp;
    return {s, comp};
  }

  SweepRow sparse_row(const std::string& method, const std::string& gran, const Json& comp, double acc, long steps,
                      const std::string& name) const {
    SweepRow r;
    r.method = method;
    r.granularity = gran;
    r.sparsity = 100.0 * comp.at("sparsity").at("sparsity").get<double>();
    r.test_accuracy = acc;
    r.model_bytes = comp.at("sparsity").at("sparse_bytes").get<int64_t>();
    // Bits a weight of the weight matrices alone (the biases stay dense fp32 in model_bytes).
    const int64_t bias_bytes = comp.at("sparsity").at("dense_bytes").get<int64_t>() - 4 * weights_count;
    r.bits_per_weight = 8.0 * static_cast<double>(r.model_bytes - bias_bytes) / static_cast<double>(weights_count);
    r.train_steps = steps;
    r.run_dir = dir(name);
    return r;
  }

  void baseline();
  long baseline_steps_from_summary() const;
  void check_baseline_seed() const;
  void ptq(const std::string& method);
  void w8a8();
  void pruning();
  void prune_at(int pct);
  void lottery_ticket();
  void structured(int pct);
  void qat();
  void distillation();
  Json speed();
};

long Sweep::baseline_steps_from_summary() const {
  // The lottery ticket and the students train as long as the baseline did.
  const fs::path summary = fs::path(o.baseline).parent_path() / "summary.json";
  std::ifstream in(summary);
  if (!in) throw Error("--baseline " + o.baseline + ": give --steps N (the baseline's training steps) or keep its summary.json beside it");
  Json j;
  in >> j;
  const long steps = j.value("steps", 0L);
  if (steps <= 0) throw Error(summary.string() + ": no \"steps\" in the run summary");
  return steps;
}

void Sweep::check_baseline_seed() const {
  // A run record beside the weights: its seed must be the sweep's, or the points would be measured
  // on another train/test split than the one the baseline was trained on.
  const fs::path run_config = fs::path(o.baseline).parent_path() / "config.json";
  if (!fs::exists(run_config)) return;
  const int64_t seed = Config::from_file(run_config.string()).get_int("train.seed");
  if (seed != o.seed)
    throw Error("--baseline " + o.baseline + ": its run (" + run_config.string() + ") used train.seed " + std::to_string(seed) +
                ", this sweep " + std::to_string(o.seed) + " (another train/test split): add --set train.seed=" + std::to_string(seed));
}

void Sweep::baseline() {
  base_steps = o.steps;
  base_weights = dir("baseline") + "/model.safetensors";
  SweepTrained s;
  if (o.baseline.empty()) {
    log("sweep: training the fp32 baseline");
    SweepSets sets = {{"run.out", dir("baseline")}};
    if (base_steps > 0) sets.emplace_back("train.steps", std::to_string(base_steps));
    s = trainer(sets);
    base_steps = s.steps;
  } else {
    log("sweep: baseline from " + o.baseline);
    if (!fs::exists(o.baseline)) throw Error("--baseline " + o.baseline + ": no such file");
    if (base_steps <= 0) base_steps = baseline_steps_from_summary();
    check_baseline_seed();
    std::unique_ptr<Model> m;
    try {  // the one weights loader's checks, before anything is copied from the file
      m = load_model_file(be, o.baseline);
    } catch (const Error& e) {
      throw Error(std::string("--baseline: ") + e.what());
    }
    fs::create_directories(dir("baseline"));
    fs::copy_file(o.baseline, base_weights, fs::copy_options::overwrite_existing);
    s.steps = base_steps;
    s.test_accuracy = model_accuracy(be, *m, data.test);
  }
  base_file = read_safetensors(base_weights);
  auto m = model_from_file(be, base_file, base_weights);
  for (Parameter* p : prunable_parameters(*m)) weights_count += p->numel();
  SweepRow r;
  r.method = "fp32";
  r.test_accuracy = s.test_accuracy;
  r.model_bytes = tensor_bytes(base_file);
  r.train_steps = s.steps;
  r.run_dir = dir("baseline");
  if (!o.baseline.empty()) r.note = "weights from " + o.baseline;
  add(r);
  if (s.test_accuracy < o.min_accuracy)
    throw Error(fmt("the fp32 baseline reached %.4f test accuracy, below --min-accuracy %.4f", s.test_accuracy, o.min_accuracy));
}

// Post-training quantization at bits 2..8: rtn per tensor, channel and group of 32; gptq or awq
// (calibrated on the training split) per channel and group of 32, beside the rtn rows.
void Sweep::ptq(const std::string& method) {
  const bool rtn = method == "rtn";
  log(rtn ? "sweep: post-training quantization" : "sweep: post-training quantization by " + method);
  const CalibrationSet cal = rtn ? CalibrationSet{} : classification_calibration(data.train, o.batch, o.calibration);
  PtqMethodOptions mo;
  mo.method = method;
  mo.damp = o.damp;
  mo.act_order = o.act_order;
  const std::vector<const char*> grans = rtn ? std::vector<const char*>{"tensor", "channel", "group"}
                                             : std::vector<const char*>{"channel", "group"};
  for (int bits = 2; bits <= 8; ++bits)
    for (const char* gran : grans) {
      QuantSpec spec;
      spec.bits = bits;
      spec.granularity = granularity_from_name(gran);
      spec.group = 32;
      const bool grouped = spec.granularity == QuantGranularity::Group;
      QuantFileReport rep;
      Json info;
      SafeTensorsFile q = quantize_by_method(be, base_file, base_weights, QuantPlan::parse(spec, ""), mo, cal, &rep, &info);
      const std::string name = std::string(rtn ? "ptq" : "ptq-" + method) + "-int" + std::to_string(bits) + "-" + gran +
                               (grouped ? "32" : "");
      fs::create_directories(dir(name));
      write_safetensors(dir(name) + "/model.quant.safetensors", q);
      rep.file_bytes = static_cast<int64_t>(fs::file_size(dir(name) + "/model.quant.safetensors"));
      SweepRow r;
      r.method = rtn ? "ptq" : "ptq-" + method;
      r.granularity = grouped ? "group32" : gran;
      r.bits = bits;
      r.test_accuracy = file_accuracy(be, q, data.test);
      r.model_bytes = rep.model_bytes;
      r.bits_per_weight = rep.bits_per_weight();
      r.run_dir = dir(name);
      if (!rtn) r.note = "calibration: " + cal.description;
      Json point = {{"row", r.to_json()}, {"spec", spec.to_json()}, {"storage", rep.to_json()}, {"from", base_weights}};
      if (!rtn) point["method"] = info;
      write_json(dir(name) + "/point.json", point);
      add(r);
    }
}

void Sweep::w8a8() {
  auto m = load_model_file(be, base_weights);
  auto* mlp = dynamic_cast<Mlp*>(m.get());
  if (!mlp) throw Error("W8A8 needs an MLP");
  W8A8Mlp w8(be, *mlp, data.train, o.batch, o.calibration_batches);
  SweepRow r;
  r.method = "ptq-w8a8";
  r.granularity = "channel";
  r.bits = 8;
  r.test_accuracy = w8.accuracy(be, data.test);
  r.model_bytes = w8.weight_bytes();
  // Codes and one fp16 scale per output channel, over the weights.
  int64_t code = 0, scales = 0;
  for (Parameter* p : prunable_parameters(*m)) code += p->numel(), scales += p->shape[0] * 2;
  r.bits_per_weight = 8.0 * static_cast<double>(code + scales) / static_cast<double>(code);
  r.note = "int8 activations from " + std::to_string(o.calibration_batches) + " calibration batches; int8 x int8 -> int32 GEMM";
  fs::create_directories(dir("ptq-w8a8"));
  r.run_dir = dir("ptq-w8a8");
  write_json(dir("ptq-w8a8") + "/point.json",
             {{"row", r.to_json()}, {"activation_scales", w8.activation_scales()}, {"from", base_weights}});
  add(r);
}

void Sweep::prune_at(int pct) {
  const long ft = o.finetune;
  const double sp = pct / 100.0;
  const std::string s_txt = std::to_string(sp);
  {  // one-shot, no fine-tuning
    auto m = load_model_file(be, base_weights);
    auto ps = prunable_parameters(*m, o.include_output);
    apply_masks(be, ps, magnitude_masks(download_masters(be, ps), sp, PruneScope::Layer));
    const std::string name = "prune-oneshot-" + std::to_string(pct);
    fs::create_directories(dir(name));
    write_safetensors(dir(name) + "/model.safetensors", model_to_file(be, *m));
    Json comp = {{"sparsity", sparsity_report(be, *m).to_json()}};
    SweepRow r = sparse_row("prune-oneshot", "layer", comp, model_accuracy(be, *m, data.test), 0, name);
    write_json(dir(name) + "/point.json", {{"row", r.to_json()}, {"compression", comp}, {"from", base_weights}});
    add(r);
  }
  {  // one-shot + fine-tune
    const std::string name = "prune-oneshot-ft-" + std::to_string(pct);
    auto [s, comp] = train(name, {{"prune.method", "magnitude"}, {"prune.sparsity", s_txt}, {"prune.start_step", "0"}}, ft);
    add(sparse_row("prune-oneshot+ft", "layer", comp, s.test_accuracy, ft, name));
  }
  {  // gradual: the cubic schedule over the first half of the fine-tune steps, then fine-tuning
    const std::string name = "prune-gradual-" + std::to_string(pct);
    const long n = 10, interval = std::max(1L, ft / (2 * n));
    auto [s, comp] = train(name,
                           {{"prune.method", "gradual"},
                            {"prune.sparsity", s_txt},
                            {"prune.initial_sparsity", "0"},
                            {"prune.start_step", "0"},
                            {"prune.interval", std::to_string(interval)},
                            {"prune.n_steps", std::to_string(n)}},
                           ft);
    SweepRow r = sparse_row("prune-gradual", "layer", comp, s.test_accuracy, ft, name);
    r.note = "t0=0, dt=" + std::to_string(interval) + ", n=" + std::to_string(n);
    add(r);
  }
}

void Sweep::lottery_ticket() {
  // Train, prune 90% at the baseline's last step, rewind to the initialisation, retrain.
  const std::string name = "lottery-ticket-90";
  auto [s, comp] = train(name,
                         {{"prune.method", "magnitude"},
                          {"prune.sparsity", "0.9"},
                          {"prune.start_step", std::to_string(base_steps)},
                          {"prune.rewind", "true"},
                          {"prune.rewind_step", "0"}},
                         2 * base_steps, true);
  SweepRow r = sparse_row("lottery-ticket", "layer", comp, s.test_accuracy, 2 * base_steps, name);
  r.note = "pruned at step " + std::to_string(base_steps) + ", rewound to the initialisation, retrained";
  add(r);
}

void Sweep::structured(int pct) {
  // Remove hidden units: a smaller dense MLP, fine-tuned.
  auto m = load_model_file(be, base_weights);
  auto* mlp = dynamic_cast<Mlp*>(m.get());
  if (!mlp) throw Error("structured pruning needs an MLP");
  const StructuredPlan plan = plan_structured(be, *mlp, pct / 100.0);
  auto small = build_structured(be, *mlp, plan);
  const std::string name = "prune-structured-" + std::to_string(pct);
  fs::create_directories(dir(name));
  // Beside the point's run folder, not in it: a run folder holds only the run's own files.
  const std::string small_file = o.out + "/runs/" + name + ".init.safetensors";
  write_safetensors(small_file, model_to_file(be, *small));
  const auto& sz = small->sizes();
  std::string hidden = "[";
  for (size_t i = 1; i + 1 < sz.size(); ++i) hidden += (i > 1 ? "," : "") + std::to_string(sz[i]);
  hidden += "]";
  const double acc0 = model_accuracy(be, *small, data.test);
  auto [s, comp] = train(name, {{"model.name", "mlp"}, {"model.hidden", hidden}, {"compress.init_from", small_file}}, o.finetune);
  SweepRow r;
  r.method = "prune-structured+ft";
  r.granularity = "units";
  r.sparsity = 100.0 * (1.0 - static_cast<double>(small->parameter_count()) / static_cast<double>(mlp->parameter_count()));
  r.test_accuracy = s.test_accuracy;
  r.model_bytes = small->parameter_count() * 4;
  r.bits_per_weight = 32.0;
  r.train_steps = o.finetune;
  r.run_dir = dir(name);
  r.note = fmt("hidden %s (%d%% of units removed); %.4f before fine-tuning", hidden.c_str(), pct, acc0);
  add(r);
}

void Sweep::pruning() {
  log("sweep: pruning");
  const long ft = o.finetune;
  for (int pct : {50, 75, 90, 95, 98}) prune_at(pct);
  {  // global threshold at 90% (layers get different sparsities)
    const std::string name = "prune-oneshot-ft-90-global";
    auto [s, comp] = train(name, {{"prune.method", "magnitude"}, {"prune.sparsity", "0.9"}, {"prune.scope", "global"}}, ft);
    add(sparse_row("prune-oneshot+ft", "global", comp, s.test_accuracy, ft, name));
  }
  {  // 2:4 + fine-tune
    const std::string name = "prune-2of4-ft";
    auto [s, comp] = train(name, {{"prune.method", "2:4"}}, ft);
    SweepRow r = sparse_row("prune-2:4+ft", "2:4", comp, s.test_accuracy, ft, name);
    r.note = "dense kernels: the zeros do not make it faster";
    add(r);
  }
  lottery_ticket();
  for (int pct : {50, 75, 90}) structured(pct);
}

void Sweep::qat() {
  log("sweep: quantization-aware training");
  const long ft = o.finetune;
  for (int bits : {2, 3, 4}) {
    const std::string name = "qat-int" + std::to_string(bits) + "-channel";
    auto [s, comp] = train(name, {{"quant.mode", "qat"}, {"quant.bits", std::to_string(bits)}, {"quant.granularity", "channel"}}, ft);
    const std::string qfile = dir(name) + "/model.quant.safetensors";
    SweepRow r;
    r.method = "qat";
    r.granularity = "channel";
    r.bits = bits;
    r.test_accuracy = file_accuracy(be, read_safetensors(qfile), data.test);  // the stored low-bit model
    r.model_bytes = comp.at("quant_storage").at("model_bytes").get<int64_t>();
    r.bits_per_weight = comp.at("quant_storage").at("bits_per_weight").get<double>();
    r.train_steps = ft;
    r.run_dir = dir(name);
    r.note = fmt("trainer's fake-quant test accuracy %.4f", s.test_accuracy);
    add(r);
  }
  // Control: the same fine-tuning without QAT, then PTQ (separates "more steps" from QAT).
  const std::string name = "ft-then-ptq";
  train(name, {}, ft);
  const SafeTensorsFile f = read_safetensors(dir(name) + "/model.safetensors");
  for (int bits : {2, 3, 4}) {
    QuantSpec spec;
    spec.bits = bits;
    spec.granularity = QuantGranularity::Channel;
    QuantFileReport rep;
    SafeTensorsFile q = quantize_weights(f, QuantPlan::parse(spec, ""), &rep);
    SweepRow r;
    r.method = "ft+ptq";
    r.granularity = "channel";
    r.bits = bits;
    r.test_accuracy = file_accuracy(be, q, data.test);
    r.model_bytes = rep.model_bytes;
    r.bits_per_weight = rep.bits_per_weight();
    r.train_steps = ft;
    r.run_dir = dir(name);
    r.note = "fine-tuned without QAT for the same steps, then PTQ";
    add(r);
  }
}

void Sweep::distillation() {
  log("sweep: distillation (students 64-64 and 16-16)");
  for (const char* hidden : {"64,64", "16,16"})
    for (const auto& [alpha, temp] : std::vector<std::pair<std::string, std::string>>{{"0", "1"}, {"0.5", "1"}, {"0.5", "4"}}) {
      const bool distill = alpha != "0";
      std::string tag = hidden;
      tag[tag.find(',')] = '-';
      const std::string name = "student-" + tag + (distill ? "-kd-a" + alpha + "-T" + temp : "-labels");
      SweepSets sets = {{"model.name", "mlp"}, {"model.hidden", std::string("[") + hidden + "]"}};
      if (distill) sets.insert(sets.end(), {{"distill.teacher", base_weights}, {"distill.alpha", alpha}, {"distill.temperature", temp}});
      auto [s, comp] = train(name, sets, base_steps, true);
      SweepRow r;
      r.method = distill ? "distill-student" : "labels-student";
      r.granularity = tag;
      r.test_accuracy = s.test_accuracy;
      r.model_bytes = s.params * 4;
      r.train_steps = base_steps;
      r.run_dir = dir(name);
      r.note = distill ? fmt("teacher = baseline, alpha=%s, T=%s; final train CE %.4f", alpha.c_str(), temp.c_str(), s.final_train_loss)
                       : fmt("labels only, same steps and seed; final train CE %.4f", s.final_train_loss);
      add(r);
    }
}

Json Sweep::speed() {
  // Dense vs 2:4-masked dense vs structurally pruned, measured interleaved (rounds of each model in
  // turn, the best round's median kept) so that a busy machine affects them alike.
  log(fmt("sweep: forward speed (%lld rows)", static_cast<long long>(o.speed_rows)));
  Json speed = Json::array();
  std::vector<std::pair<size_t, std::unique_ptr<Model>>> timed;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    if (r.method == "fp32" || r.method == "prune-2:4+ft" || r.method == "prune-structured+ft")
      timed.emplace_back(i, load_model_file(be, r.run_dir + "/model.safetensors"));
  }
  std::vector<double> best(timed.size(), 1e30);
  for (int round = 0; round < 5; ++round)
    for (size_t i = 0; i < timed.size(); ++i) best[i] = std::min(best[i], time_forward_ms(be, *timed[i].second, o.speed_rows, 15));
  for (size_t i = 0; i < timed.size(); ++i) {
    SweepRow& r = rows[timed[i].first];
    r.forward_ms = best[i];
    speed.push_back({{"method", r.method},
                     {"granularity", r.granularity},
                     {"sparsity", r.sparsity},
                     {"params", timed[i].second->parameter_count()},
                     {"forward_ms", best[i]},
                     {"speedup_vs_dense", best[0] / best[i]}});
    log(fmt("  %-22s %-6s sparsity %5.1f%%  %8.3f ms  x%.2f", r.method.c_str(), r.granularity.c_str(), r.sparsity, best[i],
            best[0] / best[i]));
  }
  return speed;
}

}  // namespace

SweepTable run_sweep(Backend& be, const TrainTestSplit& data, const SweepOptions& o, const SweepTrain& train,
                     const SweepLog& log) {
  const auto t_start = std::chrono::steady_clock::now();
  fs::create_directories(o.out + "/runs");
  Sweep sw(be, data, o, train, log);
  sw.baseline();
  sw.ptq("rtn");
  if (o.calibration > 0)
    for (const char* m : {"gptq", "awq"}) sw.ptq(m);
  sw.section("W8A8", {{Op::QuantizeI8, DType::F32, "quantize_i8"}, {Op::Int8Linear, DType::I8, "int8_linear"}},
             [&] { sw.w8a8(); });
  sw.section("pruning", {{Op::LinearForward, DType::F32, "linear_forward"}, {Op::LinearBackward, DType::F32, "linear_backward"}},
             [&] { sw.pruning(); });
  sw.section("QAT", {{Op::FakeQuantize, DType::F32, "fake_quantize"}}, [&] { sw.qat(); });
  sw.section("distillation", {{Op::DistillBackward, DType::F32, "distill_backward"}}, [&] { sw.distillation(); });
  SweepTable t;
  const Json speed = sw.speed();
  t.rows = std::move(sw.rows);
  t.header = {{"model", o.model},
              {"device", be.info().name},
              {"baseline_weights", sw.base_weights},
              {"finetune_steps", o.finetune},
              {"baseline_steps", sw.base_steps},
              {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()},
              {"speed_rows", o.speed_rows},
              {"speed", speed},
              {"skipped", sw.skipped}};
  write_json(o.out + "/sweep.json", t.to_json());
  write_text(o.out + "/sweep.csv", t.to_csv());
  return t;
}

}  // namespace trainlab
