// SystemView: the system metrics of the shown run (StepMetrics::system, core/train/system_monitor.h)
// against its steps: the host's CPU utilisation and, on a GPU with its driver's NVML, the GPU's
// utilisation (left axis, %), power (W) and temperature (°C) (right axis), with the last values and
// the GPU's memory in a line above. A run without them (one second or less, a record written before
// they existed) says so instead of showing empty axes. View > System metrics shows it as a dock.
#pragma once
#include <QVector>
#include <QWidget>

#include "train/metrics.h"

class QLabel;
class QCustomPlot;

namespace trainlab::app {

class SystemView : public QWidget {
  Q_OBJECT
 public:
  explicit SystemView(QWidget* parent = nullptr);

  void clear();
  // Steps of the live run, in order (the steps without a sample are skipped).
  void append(const StepMetrics& m);
  // A finished run's record (load_run); the view says why when it cannot be read.
  void show_run(const QString& dir);
  void refresh();

  int samples() const { return static_cast<int>(m_step.size()); }
  QString summary() const;  // the line above the plot
  QCustomPlot* plot() const { return m_plot; }

 protected:
  void changeEvent(QEvent* e) override;

 private:
  QVector<double> m_step, m_cpu, m_gpu, m_power, m_temp;
  double m_mem_used = 0, m_mem_total = 0;
  QString m_note;
  QLabel* m_summary = nullptr;
  QCustomPlot* m_plot = nullptr;
};

}  // namespace trainlab::app
