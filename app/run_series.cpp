#include "run_series.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <cmath>

#include "train/run_record.h"

namespace trainlab::app {

void RunSeries::append(const StepMetrics& m) {
  const double s = static_cast<double>(m.step);
  step.push_back(s);
  epoch.push_back(m.epoch);
  loss.push_back(m.loss);
  train_acc.push_back(m.train_accuracy);
  lr.push_back(m.lr);
  samples_per_s.push_back(m.samples_per_s);
  mfu.push_back(m.mfu);
  loss_scale.push_back(m.loss_scale);
  skipped_steps.push_back(static_cast<double>(m.skipped_steps));
  wall_s.push_back(m.wall_s);
  {
    // A resumed run's clock starts again: its first step adds its own wall_s.
    const double prev_wall = wall_s.size() > 1 ? wall_s[wall_s.size() - 2] : 0.0;
    const double prev = elapsed_s.isEmpty() ? 0.0 : elapsed_s.back();
    elapsed_s.push_back(prev + (m.wall_s >= prev_wall ? m.wall_s - prev_wall : std::max(0.0, m.wall_s)));
  }
  total_steps = m.total_steps;
  if (m.val_loss) {
    val_step.push_back(s);
    val_loss.push_back(*m.val_loss);
    val_acc.push_back(m.val_accuracy.value_or(std::nan("")));
  }
  sparsity.push_back(m.sparsity.value_or(std::nan("")));
  bits.push_back(m.bits_per_weight.value_or(std::nan("")));
  if (!m.kernel_times.empty()) {
    ++kernel_steps;
    for (const auto& k : m.kernel_times) {
      const QString name = QString::fromStdString(k.name);
      auto it = std::find_if(kernels.begin(), kernels.end(), [&](const KernelTotal& t) { return t.name == name; });
      if (it == kernels.end()) it = kernels.insert(kernels.end(), KernelTotal{name, 0.0, 0});
      it->ms += k.ms;
      it->calls += k.calls;
      it->flops += k.flops;
      it->bytes += k.bytes;
    }
  }
  if (m.roofline) roofline = m.roofline;
  for (size_t c = 0; c < kMemCategoryCount; ++c) mem[c].push_back(static_cast<double>(m.mem_current.by_category[c]));
  mem_total.push_back(static_cast<double>(m.mem_current.total()));
  mem_predicted.push_back(static_cast<double>(m.mem_predicted.total()));
  act_predicted.push_back(static_cast<double>(m.mem_predicted.by_category[static_cast<size_t>(MemCategory::Activations)]));
  mem_peak_total.push_back(static_cast<double>(m.mem_peak.total()));
  for (size_t c = 0; c < kMemCategoryCount; ++c) {
    last_predicted[c] = static_cast<double>(m.mem_predicted.by_category[c]);
    last_peak[c] = static_cast<double>(m.mem_peak.by_category[c]);
  }
  std::array<double, kMemCategoryCount> predicted{};
  for (size_t c = 0; c < kMemCategoryCount; ++c) predicted[c] = static_cast<double>(m.mem_predicted.by_category[c]);
  if (memory_segments.isEmpty() || !m.event.empty() || memory_segments.back().predicted != predicted) {
    MemorySegment seg;
    seg.first_step = s;
    seg.change = QString::fromStdString(m.event);
    memory_segments.push_back(seg);
  }
  MemorySegment& seg = memory_segments.back();
  seg.last_step = s;
  seg.predicted = predicted;
  for (size_t c = 0; c < kMemCategoryCount; ++c)
    seg.measured[c] = std::max(seg.measured[c], static_cast<double>(m.mem_current.by_category[c]));
  if (m.device_total_bytes > 0) device_total_bytes = static_cast<double>(m.device_total_bytes);
  if (!m.event.empty()) events.push_back({s, QString::fromStdString(m.event)});
  precision = QString::fromStdString(m.precision);
  if (!m.ranks.empty()) last_ranks = m.ranks;
  dist_times.add(m);
}

bool RunSeries::has_mfu() const {
  for (double v : mfu)
    if (v > 0) return true;
  return false;
}

bool RunSeries::has_loss_scale() const {
  const std::string p = config.is_object() ? config.value("/precision/dtype"_json_pointer, std::string()) : "";
  if (p == "fp16" || precision == "fp16") return true;
  for (const auto& e : events)
    if (e.label.contains("fp16")) return true;
  return false;
}

static bool any_finite(const QVector<double>& v) {
  for (double x : v)
    if (std::isfinite(x)) return true;
  return false;
}

bool RunSeries::has_sparsity() const { return any_finite(sparsity); }
bool RunSeries::has_bits() const { return any_finite(bits); }

QVector<RunSeries::KernelTotal> RunSeries::kernels_by_time() const {
  QVector<KernelTotal> k = kernels;
  std::stable_sort(k.begin(), k.end(), [](const KernelTotal& a, const KernelTotal& b) { return a.ms > b.ms; });
  return k;
}

QString RunSeries::status() const {
  if (summary.is_object()) return QString::fromStdString(summary.value("status", std::string("completed")));
  return dir.isEmpty() ? QStringLiteral("running") : QStringLiteral("unfinished");
}

QString RunSeries::throughput_unit() const {
  const std::string model = config.is_object() ? config.value("/model/name"_json_pointer, std::string()) : "";
  return model == "char-gpt" ? QStringLiteral("tokens/s") : QStringLiteral("samples/s");
}

bool RunSeries::constant_lr(double* value) const {
  if (lr.isEmpty()) return false;
  const auto [lo, hi] = std::minmax_element(lr.begin(), lr.end());
  if (value) *value = *lo;
  return *hi - *lo <= std::fabs(*hi) * 1e-9;
}

QString RunSeries::display_name(const Json& config, const QString& dir) {
  std::string n;
  try {
    n = config.value("/run/name"_json_pointer, std::string());
  } catch (...) {
  }
  if (!n.empty()) return QString::fromStdString(n);
  return QFileInfo(dir).fileName();
}

// Room for `rows` steps in every per-step column of `s`: a long record's 100,000 rows are appended
// without the columns growing, and copying, again and again.
static void reserve_steps(RunSeries& s, size_t rows) {
  const auto n = static_cast<qsizetype>(rows);
  for (QVector<double>* v : {&s.step, &s.epoch, &s.loss, &s.train_acc, &s.lr, &s.samples_per_s, &s.mfu, &s.loss_scale,
                             &s.skipped_steps, &s.wall_s, &s.elapsed_s, &s.sparsity, &s.bits, &s.mem_total,
                             &s.mem_predicted, &s.mem_peak_total, &s.act_predicted})
    v->reserve(n);
  for (auto& v : s.mem) v.reserve(n);
}

RunSeries RunSeries::load(const QString& dir, size_t max_rows) {
  const LoadedRun r = load_run(dir.toStdString(), max_rows);
  RunSeries s;
  s.dir = QDir(dir).absolutePath();
  s.config = r.config;
  s.summary = r.summary;
  s.name = display_name(r.config, s.dir);
  reserve_steps(s, r.steps.size());
  for (const auto& m : r.steps) s.append(m);
  for (const auto& w : r.warnings) s.warnings << QString::fromStdString(w);
  return s;
}

QVector<double> smooth_ema(const QVector<double>& v, double alpha) {
  if (alpha <= 0) return v;
  QVector<double> out(v.size());
  double acc = 0;
  bool have = false;
  double debias = 0;
  for (int i = 0; i < v.size(); ++i) {
    const double x = v[i];
    if (!std::isfinite(x)) {
      out[i] = x;
      continue;
    }
    // Debiased EMA (TensorBoard style): no pull towards 0 at the start.
    acc = have ? alpha * acc + (1 - alpha) * x : (1 - alpha) * x;
    debias = have ? alpha * debias + (1 - alpha) : (1 - alpha);
    have = true;
    out[i] = acc / debias;
  }
  return out;
}

static void flatten_into(const Json& j, const std::string& prefix, Json& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string k = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object() && !find_config_key(k))
      flatten_into(*it, k, out);
    else
      out[k] = *it;
  }
}

Json flatten_config(const Json& nested) {
  Json out = Json::object();
  if (nested.is_object()) flatten_into(nested, "", out);
  return out;
}

double summary_number(const Json& summary, const char* key) {
  if (!summary.is_object()) return std::nan("");
  const auto it = summary.find(key);
  return it != summary.end() && it->is_number() ? it->get<double>() : std::nan("");
}

double summary_peak_bytes(const Json& summary) {
  if (!summary.is_object()) return 0.0;
  const auto pb = summary.find("peak_bytes");
  if (pb == summary.end() || !pb->is_object()) return 0.0;
  const auto t = pb->find("total");
  return t != pb->end() && t->is_number() ? t->get<double>() : 0.0;
}

QString number_text(double v, char format, int precision, const QString& suffix) {
  return std::isnan(v) ? QStringLiteral("no value") : QString::number(v, format, precision) + suffix;
}

QString loss_text(double v) {
  if (std::isnan(v)) return QStringLiteral("no value");
  if (v == 0 || std::fabs(v) >= 0.1) return QString::number(v, 'f', 4);
  return QString::number(v, 'g', 3);
}

QString format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  // 512 KiB, 1.5 MiB, 2.01 MiB, 12.3 GiB: three significant digits, no trailing zeros.
  return QString::number(b, 'g', std::fabs(b) >= 100 ? 4 : 3) + " " + units[u];
}

QString json_value_text(const Json& v) {
  if (v.is_string()) return QString::fromStdString(v.get<std::string>());
  if (v.is_array()) {
    QStringList parts;
    for (const auto& e : v) parts << json_value_text(e);
    return parts.join(",");
  }
  if (v.is_number_float()) return QString::number(v.get<double>(), 'g', 6);
  return QString::fromStdString(v.dump());
}

}  // namespace trainlab::app
