#include "train/metrics.h"

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
MemoryBytes mem_from_json(const Json& j) {
  MemoryBytes m;
  if (!j.is_object()) return m;
  for (size_t i = 0; i < kMemCategoryCount; ++i) m.by_category[i] = j.value(mem_category_name(static_cast<MemCategory>(i)), int64_t{0});
  return m;
}
}  // namespace

Json RankStepMetrics::to_json() const {
  return {{"rank", rank},       {"step_ms", step_ms},       {"compute_ms", compute_ms}, {"comm_ms", comm_ms},
          {"wait_ms", wait_ms}, {"bytes_sent", bytes_sent}, {"mem", mem_current.to_json()},
          {"mem_peak", mem_peak.to_json()}};
}

RankStepMetrics RankStepMetrics::from_json(const Json& j) {
  RankStepMetrics r;
  if (!j.is_object()) return r;
  r.rank = j.value("rank", 0);
  r.step_ms = j.value("step_ms", 0.0);
  r.compute_ms = j.value("compute_ms", 0.0);
  r.comm_ms = j.value("comm_ms", 0.0);
  r.wait_ms = j.value("wait_ms", 0.0);
  r.bytes_sent = j.value("bytes_sent", int64_t{0});
  if (j.contains("mem")) r.mem_current = mem_from_json(j["mem"]);
  if (j.contains("mem_peak")) r.mem_peak = mem_from_json(j["mem_peak"]);
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
  if (!event.empty()) j["event"] = event;
  if (!kernel_times.empty()) {
    Json k = Json::array();
    for (const auto& t : kernel_times) k.push_back({{"name", t.name}, {"ms", t.ms}, {"calls", t.calls}});
    j["kernels"] = k;
  }
  if (!ranks.empty()) {
    Json r = Json::array();
    for (const auto& x : ranks) r.push_back(x.to_json());
    j["ranks"] = r;
  }
  return j;
}

StepMetrics StepMetrics::from_json(const Json& j) {
  StepMetrics m;
  m.step = j.value("step", 0L);
  m.epoch = j.value("epoch", 0.0);
  // A diverged step records its loss as null (JSON has no NaN).
  m.loss = j.contains("loss") && j["loss"].is_number() ? j["loss"].get<double>() : std::nan("");
  m.train_accuracy = j.value("train_accuracy", 0.0);
  m.lr = j.value("lr", 0.0);
  m.loss_scale = j.value("loss_scale", 1.0);
  m.skipped_steps = j.value("skipped_steps", 0L);
  m.skipped = j.value("skipped", false);
  m.samples_per_s = j.value("samples_per_s", 0.0);
  m.step_ms = j.value("step_ms", 0.0);
  m.wall_s = j.value("wall_s", 0.0);
  m.mfu = j.value("mfu", 0.0);
  m.precision = j.value("precision", "");
  if (j.contains("mem")) m.mem_current = mem_from_json(j["mem"]);
  if (j.contains("mem_peak")) m.mem_peak = mem_from_json(j["mem_peak"]);
  if (j.contains("mem_predicted")) m.mem_predicted = mem_from_json(j["mem_predicted"]);
  m.device_used_bytes = j.value("device_used_bytes", int64_t{0});
  m.device_total_bytes = j.value("device_total_bytes", int64_t{0});
  m.runtime_context_bytes = j.value("runtime_context_bytes", int64_t{0});
  if (j.contains("val_loss") && j["val_loss"].is_number()) m.val_loss = j["val_loss"].get<double>();
  if (j.contains("val_accuracy") && j["val_accuracy"].is_number()) m.val_accuracy = j["val_accuracy"].get<double>();
  if (j.contains("sparsity") && j["sparsity"].is_number()) m.sparsity = j["sparsity"].get<double>();
  if (j.contains("bits_per_weight") && j["bits_per_weight"].is_number())
    m.bits_per_weight = j["bits_per_weight"].get<double>();
  if (j.contains("grad_norm") && j["grad_norm"].is_number()) m.grad_norm = j["grad_norm"].get<double>();
  m.event = j.value("event", "");
  if (j.contains("kernels"))
    for (const auto& k : j["kernels"]) m.kernel_times.push_back({k.value("name", ""), k.value("ms", 0.0), k.value("calls", int64_t{0})});
  if (j.contains("ranks") && j["ranks"].is_array())
    for (const auto& r : j["ranks"]) m.ranks.push_back(RankStepMetrics::from_json(r));
  return m;
}

Json RunSummary::to_json() const {
  Json j = {{"status", status},   {"steps", steps},
            {"epochs", epochs},   {"params", params},
            {"final_train_loss", final_train_loss},
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
  }
  return j;
}

}  // namespace trainlab
