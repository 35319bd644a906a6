// RunSeries: one run's metrics as plain columns (every step kept), filled live from StepMetrics or
// read back from a run-record folder. The plots, the runs table and the reports all read these.
#pragma once
#include <QColor>
#include <QString>
#include <QStringList>
#include <QVector>
#include <array>

#include "config/config.h"
#include "train/metrics.h"

namespace trainlab::app {

struct RunEvent {
  double step = 0;
  QString label;
};

// A stretch of steps with one config: a run's first steps, then each mid-run change that alters
// the prediction (or leaves an event) opens the next. The report compares memory per segment, so a
// run switched from fp32 to bf16 is not held to its final config's prediction over its fp32 steps.
struct MemorySegment {
  double first_step = 0, last_step = 0;
  QString change;  // the event that opened it ("" for the first)
  std::array<double, kMemCategoryCount> predicted{};  // the segment's prediction (plan/memory_model.h)
  std::array<double, kMemCategoryCount> measured{};   // the most bytes the ledger held after a step of it (its peak)
};

struct RunSeries {
  QString dir;       // run folder ("" for a run that has not written one yet)
  QString name;      // run.name, or the folder's name
  Json config;       // nested config JSON
  Json summary;      // summary.json (null while running)
  QColor color;

  QVector<double> step, epoch, loss, train_acc, lr, samples_per_s, mfu, loss_scale, skipped_steps, wall_s;
  // Seconds of training up to each step, never decreasing: wall_s restarts at 0 when a run is
  // resumed, elapsed_s goes on from where it was (the plots' time axis).
  QVector<double> elapsed_s;
  long total_steps = 0;  // of the last step
  QVector<double> val_step, val_loss, val_acc;
  // Compression (NaN on steps without the field): sparsity in %, bits per weight.
  QVector<double> sparsity, bits;
  // Per-kernel times summed over the steps that reported them (device.kernel_timing on a GPU).
  struct KernelTotal {
    QString name;
    double ms = 0;
    qint64 calls = 0;
    double flops = 0, bytes = 0;  // the roofline's work and traffic (backend/op_cost.h)
  };
  QVector<KernelTotal> kernels;  // in first-seen order
  int kernel_steps = 0;          // steps that carried kernel times
  std::optional<Calibration> roofline;  // the device's measured roofs, the last recorded
  std::array<QVector<double>, kMemCategoryCount> mem;  // current bytes by category
  QVector<double> mem_total, mem_predicted, mem_peak_total;
  QVector<double> act_predicted;  // predicted activation bytes (the MLP's count, CharGpt's formula)
  std::array<double, kMemCategoryCount> last_predicted{}, last_peak{};  // by category, at the last step
  QVector<MemorySegment> memory_segments;
  double device_total_bytes = 0;
  QVector<RunEvent> events;
  QString precision;  // of the last step
  // A run over several ranks: every rank's figures of the last step (memory, its prediction) and
  // the time split summed over the steps (metrics.h's DistTimeTotals, as summary.json's dist_times).
  std::vector<RankStepMetrics> last_ranks;
  DistTimeTotals dist_times;
  bool has_ranks() const { return !last_ranks.empty(); }
  // What the reader skipped (load_run): "…/metrics.jsonl line 17: not valid JSON; skipped".
  QStringList warnings;

  void append(const StepMetrics& m);
  int size() const { return static_cast<int>(step.size()); }
  bool has_mfu() const;
  bool has_loss_scale() const;  // any fp16 step with loss scaling
  bool has_sparsity() const;    // pruning was configured or happened
  bool has_bits() const;        // pruning or QAT reported bits per weight
  // kernels sorted by total time, longest first
  QVector<KernelTotal> kernels_by_time() const;
  QString status() const;       // summary.status, or "running"/"unfinished"
  // What samples_per_s counts: "tokens/s" for the character transformer (its samples are tokens),
  // else "samples/s".
  QString throughput_unit() const;
  // Whether the learning rate never changed (a run with no schedule); its value in `value`.
  bool constant_lr(double* value = nullptr) const;

  // Reads a run folder (load_run; max_rows > 0: thinned for plots, min/max per bucket of steps);
  // throws trainlab::Error.
  static RunSeries load(const QString& dir, size_t max_rows = 0);
  // Display name of a folder's run: run.name from config, else the folder name.
  static QString display_name(const Json& config, const QString& dir);
};

// Exponential moving average with weight `alpha` in [0, 1) (0: raw). NaNs are passed through.
QVector<double> smooth_ema(const QVector<double>& v, double alpha);

// Flat "a.b" -> value view of a nested config JSON.
Json flatten_config(const Json& nested);
// A number of a summary.json (NaN when absent or null: no value, e.g. a diverged run's test accuracy).
double summary_number(const Json& summary, const char* key);
// peak_bytes.total of a summary.json; 0 when absent or not a number.
double summary_peak_bytes(const Json& summary);
// `v` formatted (QString::number(v, format, precision) + suffix), or "no value" when it is NaN.
QString number_text(double v, char format, int precision, const QString& suffix = {});
// A loss: 4 decimals from 0.1 up (2.3026, 0.1234), else 3 significant digits (0.0123, 4.56e-05),
// so that a small loss never reads "0.0000"; "no value" for NaN.
QString loss_text(double v);
// Human-readable bytes: "1.2 MiB".
QString format_bytes(double bytes);
QString json_value_text(const Json& v);

}  // namespace trainlab::app
