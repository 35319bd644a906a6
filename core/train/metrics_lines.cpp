// MetricsLineWriter and MetricsLineReader (train/run_record.h): the slow fields of metrics.jsonl
// written where they change and carried forward on reading.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "train/run_record.h"
#include "train/step_columns.h"

namespace trainlab {

const std::array<const char*, 10> kSlowMetricsFields = {
    "precision", "mem", "mem_peak", "mem_predicted", "device_used_bytes", "device_total_bytes",
    "runtime_context_bytes", "loss_scale", "skipped_steps", "lr"};

namespace {

// `x` with `decimals` digits after the point (a timing: no host clock resolves finer), read back
// from its decimal text so that its shortest form is that text; NaN and infinities stay.
double round_to_decimals(double x, int decimals) {
  if (!std::isfinite(x)) return x;
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, x);
  return std::strtod(text, nullptr);
}

// `x` to `digits` significant decimal digits.
double round_to_digits(double x, int digits) {
  if (!std::isfinite(x) || x == 0.0) return x;
  char text[40];
  std::snprintf(text, sizeof text, "%.*g", digits, x);
  return std::strtod(text, nullptr);
}

}  // namespace

StepMetrics record_rounding(const StepMetrics& m) {
  StepMetrics r = m;
  r.step_ms = round_to_decimals(m.step_ms, 3);  // 1 us
  r.wall_s = round_to_decimals(m.wall_s, 4);    // 0.1 ms
  r.samples_per_s = round_to_digits(m.samples_per_s, 5);
  // A float's shortest round trip: the loss is a sum of fp32 values divided by the step's samples.
  r.loss = round_to_digits(m.loss, 9);
  r.epoch = round_to_digits(m.epoch, 7);
  return r;
}

Json MetricsLineWriter::diffed(const StepMetrics& m, bool keep_lr) {
  Json j = record_rounding(m).to_json();
  for (const char* k : kSlowMetricsFields) {
    const auto it = j.find(k);
    if (it == j.end() || (keep_lr && std::string_view(k) == "lr")) continue;
    if (const auto last = m_last.find(k); last != m_last.end() && *last == *it) {
      j.erase(it);
    } else {
      m_last[k] = *it;
    }
  }
  return j;
}

std::string MetricsLineWriter::line(const StepMetrics& m) {
  return diffed(m, false).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string MetricsLineWriter::extras_line(const StepMetrics& m) {
  // lr stays on every line written: a reader of metrics.jsonl alone then never carries a stale one
  // across the steps that only steps.bin holds.
  const Json j = diffed(m, true);
  bool extra = !std::isfinite(m.loss) || !std::isfinite(m.train_accuracy);
  for (auto it = j.begin(); it != j.end() && !extra; ++it) extra = !is_step_column(it.key());
  return extra ? j.dump(-1, ' ', false, Json::error_handler_t::replace) : std::string();
}

Json MetricsLineReader::expand(Json line) {
  if (!line.is_object()) return line;
  for (const char* k : kSlowMetricsFields) {
    if (const auto it = line.find(k); it != line.end()) {
      m_carried[k] = *it;
    } else if (const auto c = m_carried.find(k); c != m_carried.end()) {
      line[k] = *c;
    }
  }
  return line;
}

// Typed, without copying the carried JSON into every line (a long record reads millions of lines):
// the line's own fields first (a bad line throws before anything is carried), then the carried
// slow fields it omits, read from the carried object.
StepMetrics MetricsLineReader::read(const Json& line) {
  StepMetrics m = StepMetrics::from_json(line);
  bool missing = false;
  for (const char* k : kSlowMetricsFields) {
    if (const auto it = line.find(k); it != line.end())
      m_carried[k] = *it;
    else
      missing = missing || m_carried.contains(k);
  }
  if (!missing) return m;
  m_carried["step"] = 0;  // makes the carried fields a metrics object of their own
  const StepMetrics c = StepMetrics::from_json(m_carried);
  auto omitted = [&](const char* k) { return !line.contains(k); };
  if (omitted("precision")) m.precision = c.precision;
  if (omitted("mem")) m.mem_current = c.mem_current;
  if (omitted("mem_peak")) m.mem_peak = c.mem_peak;
  if (omitted("mem_predicted")) m.mem_predicted = c.mem_predicted;
  if (omitted("device_used_bytes")) m.device_used_bytes = c.device_used_bytes;
  if (omitted("device_total_bytes")) m.device_total_bytes = c.device_total_bytes;
  if (omitted("runtime_context_bytes")) m.runtime_context_bytes = c.runtime_context_bytes;
  if (omitted("loss_scale")) m.loss_scale = c.loss_scale;
  if (omitted("skipped_steps")) m.skipped_steps = c.skipped_steps;
  if (omitted("lr")) m.lr = c.lr;
  return m;
}

}  // namespace trainlab
