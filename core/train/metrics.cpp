#include "train/metrics.h"

#include <cstdint>

#include "util/error.h"

namespace trainlab {

int64_t MemoryBytes::total() const {
  int64_t t = 0;
  for (auto v : by_category) t += v;
  return t;
}

Json MemoryBytes::to_json() const {
  Json j = Json::object();
  for (size_t i = 0; i < kMemCategoryCount; ++i) j[mem_category_name(static_cast<MemCategory>(i))] = by_category[i];
  j["total"] = total();
  return j;
}

namespace {

// Readers of one field of a metrics line. Each throws Error naming the field when its type or range
// is wrong; an absent field gives `fallback`.
double number_field(const Json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_null()) return std::nan("");  // no value
  if (!it->is_number()) throw Error(std::string("field '") + key + "': expected a number or null");
  return it->get<double>();
}

int64_t whole_number(const Json& v, const std::string& key) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)
      return static_cast<int64_t>(d);
  }
  throw Error("field '" + key + "': expected a whole number in [-2^63, 2^63)");
}

int64_t whole_field(const Json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return whole_number(*it, key);
}

std::string text_field(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) throw Error(std::string("field '") + key + "': expected a string");
  return it->get<std::string>();
}

std::optional<double> optional_field(const Json& j, const char* key) {
  const double v = number_field(j, key, std::nan(""));
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}

MemoryBytes mem_from_json(const Json& j, const char* key) {
  MemoryBytes m;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return m;
  if (!it->is_object()) throw Error(std::string("field '") + key + "': expected an object of bytes by category");
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const char* c = mem_category_name(static_cast<MemCategory>(i));
    if (const auto v = it->find(c); v != it->end() && !v->is_null())
      m.by_category[i] = whole_number(*v, std::string(key) + "." + c);
  }
  return m;
}

std::vector<KernelTime> kernels_from_json(const Json& j) {
  std::vector<KernelTime> out;
  const auto it = j.find("kernels");
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) throw Error("field 'kernels': expected an array of {name, ms, calls}");
  for (const auto& k : *it) {
    if (!k.is_object()) throw Error("field 'kernels': expected an array of {name, ms, calls}");
    out.push_back({text_field(k, "name"), number_field(k, "ms", 0.0), whole_field(k, "calls", 0),
                   number_field(k, "flops", 0.0), number_field(k, "bytes", 0.0)});
  }
  return out;
}

}  // namespace

Json RankPipelineMetrics::to_json() const {
  return {{"stage", stage},   {"forward_ms", forward_ms}, {"backward_ms", backward_ms},
          {"recv_wait_ms", recv_wait_ms}, {"other_ms", other_ms}, {"bubble", bubble},
          {"simulated_bubble", simulated_bubble}, {"formula_bubble", formula_bubble}};
}

RankPipelineMetrics RankPipelineMetrics::from_json(const Json& j) {
  if (!j.is_object()) throw Error("field 'pipeline': expected an object");
  RankPipelineMetrics r;
  r.stage = static_cast<int>(whole_field(j, "stage", 0));
  r.forward_ms = number_field(j, "forward_ms", 0.0);
  r.backward_ms = number_field(j, "backward_ms", 0.0);
  r.recv_wait_ms = number_field(j, "recv_wait_ms", 0.0);
  r.other_ms = number_field(j, "other_ms", 0.0);
  r.bubble = number_field(j, "bubble", 0.0);
  r.simulated_bubble = number_field(j, "simulated_bubble", 0.0);
  r.formula_bubble = number_field(j, "formula_bubble", 0.0);
  return r;
}

Json RankStepMetrics::to_json() const {
  Json j = {{"rank", rank},       {"step_ms", step_ms},       {"compute_ms", compute_ms}, {"comm_ms", comm_ms},
            {"wait_ms", wait_ms}, {"bytes_sent", bytes_sent}, {"mem", mem_current.to_json()},
            {"mem_peak", mem_peak.to_json()}, {"mem_predicted", mem_predicted.to_json()}};
  if (pipeline) j["pipeline"] = pipeline->to_json();
  return j;
}

RankStepMetrics RankStepMetrics::from_json(const Json& j) {
  if (!j.is_object()) throw Error("field 'ranks': expected an array of objects");
  RankStepMetrics r;
  r.rank = static_cast<int>(whole_field(j, "rank", 0));
  r.step_ms = number_field(j, "step_ms", 0.0);
  r.compute_ms = number_field(j, "compute_ms", 0.0);
  r.comm_ms = number_field(j, "comm_ms", 0.0);
  r.wait_ms = number_field(j, "wait_ms", 0.0);
  r.bytes_sent = whole_field(j, "bytes_sent", 0);
  r.mem_current = mem_from_json(j, "mem");
  r.mem_peak = mem_from_json(j, "mem_peak");
  r.mem_predicted = mem_from_json(j, "mem_predicted");
  if (const auto it = j.find("pipeline"); it != j.end()) r.pipeline = RankPipelineMetrics::from_json(*it);
  return r;
}

Json StepMetrics::to_json() const {
  Json j = {{"step", step},
            {"epoch", epoch},
            {"loss", loss},
            {"train_accuracy", train_accuracy},
            {"lr", lr},
            {"loss_scale", loss_scale},
            {"skipped_steps", skipped_steps},
            {"samples_per_s", samples_per_s},
            {"step_ms", step_ms},
            {"wall_s", wall_s},
            {"precision", precision},
            {"mem", mem_current.to_json()},
            {"mem_peak", mem_peak.to_json()},
            {"mem_predicted", mem_predicted.to_json()}};
  if (skipped) j["skipped"] = true;
  if (mfu > 0) j["mfu"] = mfu;
  if (mfu_datasheet > 0) j["mfu_datasheet"] = mfu_datasheet;
  if (device_total_bytes) {
    j["device_used_bytes"] = device_used_bytes;
    j["device_total_bytes"] = device_total_bytes;
    j["runtime_context_bytes"] = runtime_context_bytes;
  }
  if (val_loss) j["val_loss"] = *val_loss;
  if (val_accuracy) j["val_accuracy"] = *val_accuracy;
  if (sparsity) j["sparsity"] = *sparsity;
  if (bits_per_weight) j["bits_per_weight"] = *bits_per_weight;
  if (grad_norm) j["grad_norm"] = *grad_norm;
  if (system) j["system"] = system->to_json();
  if (!event.empty()) j["event"] = event;
  if (!kernel_times.empty()) {
    Json k = Json::array();
    for (const auto& t : kernel_times) {
      Json e = {{"name", t.name}, {"ms", t.ms}, {"calls", t.calls}};
      if (t.flops > 0) e["flops"] = t.flops;  // the roofline's work and traffic (backend/op_cost.h)
      if (t.bytes > 0) e["bytes"] = t.bytes;
      k.push_back(e);
    }
    j["kernels"] = k;
  }
  if (roofline) j["roofline"] = Json::parse(calibration_to_json(*roofline));
  if (!ranks.empty()) {
    Json r = Json::array();
    for (const auto& x : ranks) r.push_back(x.to_json());
    j["ranks"] = r;
  }
  return j;
}

StepMetrics StepMetrics::from_json(const Json& j) {
  if (!j.is_object()) throw Error("expected a JSON object");
  if (!j.contains("step")) throw Error("no \"step\"");
  StepMetrics m;
  m.step = whole_field(j, "step", 0);
  m.epoch = number_field(j, "epoch", 0.0);
  m.loss = number_field(j, "loss", std::nan(""));  // null: a diverged step (JSON has no NaN)
  m.train_accuracy = number_field(j, "train_accuracy", std::nan(""));
  m.lr = number_field(j, "lr", 0.0);
  m.loss_scale = number_field(j, "loss_scale", 1.0);
  m.skipped_steps = whole_field(j, "skipped_steps", 0);
  if (const auto it = j.find("skipped"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) throw Error("field 'skipped': expected true or false");
    m.skipped = it->get<bool>();
  }
  m.samples_per_s = number_field(j, "samples_per_s", 0.0);
  m.step_ms = number_field(j, "step_ms", 0.0);
  m.wall_s = number_field(j, "wall_s", 0.0);
  m.mfu = number_field(j, "mfu", 0.0);
  m.mfu_datasheet = number_field(j, "mfu_datasheet", 0.0);
  m.precision = text_field(j, "precision");
  m.mem_current = mem_from_json(j, "mem");
  m.mem_peak = mem_from_json(j, "mem_peak");
  m.mem_predicted = mem_from_json(j, "mem_predicted");
  m.device_used_bytes = whole_field(j, "device_used_bytes", 0);
  m.device_total_bytes = whole_field(j, "device_total_bytes", 0);
  m.runtime_context_bytes = whole_field(j, "runtime_context_bytes", 0);
  m.val_loss = optional_field(j, "val_loss");
  m.val_accuracy = optional_field(j, "val_accuracy");
  m.sparsity = optional_field(j, "sparsity");
  m.bits_per_weight = optional_field(j, "bits_per_weight");
  m.grad_norm = optional_field(j, "grad_norm");
  if (const auto it = j.find("system"); it != j.end() && !it->is_null()) m.system = SystemSample::from_json(*it);
  m.event = text_field(j, "event");
  m.kernel_times = kernels_from_json(j);
  if (const auto it = j.find("roofline"); it != j.end() && !it->is_null()) {
    try {
      m.roofline = parse_calibration(it->dump());
    } catch (const Error& e) {
      throw Error(std::string("field 'roofline': ") + e.what());
    }
  }
  if (const auto it = j.find("ranks"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw Error("field 'ranks': expected an array of per-rank metrics");
    for (const auto& r : *it) m.ranks.push_back(RankStepMetrics::from_json(r));
  }
  return m;
}

void DistTimeTotals::add(const StepMetrics& m) {
  if (m.ranks.empty() || m.step <= 1) return;
  if (ranks.size() != m.ranks.size()) {  // the first step added (a record's ranks never change)
    ranks.assign(m.ranks.size(), {});
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r].rank = m.ranks[r].rank;
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankStepMetrics& x = m.ranks[r];
    RankTimeTotals& t = ranks[r];
    ++t.steps;
    t.step_ms += x.step_ms;
    t.compute_ms += x.compute_ms;
    t.comm_ms += x.comm_ms;
    t.wait_ms += x.wait_ms;
    t.bytes_sent += static_cast<double>(x.bytes_sent);
  }
}

double DistTimeTotals::efficiency_estimate() const {
  double compute = 0.0, step = 0.0;
  for (const RankTimeTotals& t : ranks) {
    compute += t.compute_ms;
    step += t.step_ms;
  }
  return step > 0.0 ? compute / step : std::nan("");
}

Json DistTimeTotals::to_json() const {
  if (steps() == 0) return nullptr;
  Json r = Json::array();
  for (const RankTimeTotals& t : ranks) {
    const double n = static_cast<double>(t.steps);
    r.push_back({{"rank", t.rank},
                 {"step_ms", t.step_ms / n},
                 {"compute_ms", t.compute_ms / n},
                 {"comm_ms", t.comm_ms / n},
                 {"wait_ms", t.wait_ms / n},
                 {"bytes_sent", t.bytes_sent / n}});
  }
  return {{"steps", steps()}, {"efficiency_estimate", efficiency_estimate()}, {"ranks", r}};
}

Json RunSummary::to_json() const {
  Json j = {{"status", status},   {"steps", steps},
            {"epochs", epochs},   {"params", params},
            {"final_train_loss", final_train_loss},  // NaN: null
            {"test_accuracy", test_accuracy},
            {"test_loss", test_loss},
            {"samples_per_s", samples_per_s},
            {"wall_s", wall_s},   {"skipped_steps", skipped_steps},
            {"peak_bytes", peak_bytes.to_json()},
            {"device", device},   {"precision", precision}};
  if (!message.empty()) j["message"] = message;
  if (ranks > 1) {
    j["ranks"] = ranks;
    j["dist_strategy"] = dist_strategy;
    if (!dist_layout.empty()) j["dist_layout"] = dist_layout;
    j["dist_times"] = dist_times.to_json();
  }
  return j;
}

}  // namespace trainlab
