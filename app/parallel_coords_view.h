// ParallelCoordsView: many runs at once (issue 21), as W&B draws them: one vertical axis per chosen
// config key and per final metric (test accuracy, test loss, samples/s, peak memory), each run a
// line through its values. Numeric keys are scaled from their smallest to their largest value
// (log-scaled when they span more than a factor of 20, as learning rates do); text keys (precision,
// optimizer) get one evenly spaced position per value. The keys offered are those in which the
// runs differ (run.* left out), all ticked at first. View > Parallel coordinates opens it on the
// runs table's selection (or the ticked runs).
#pragma once
#include <QWidget>

#include "runs_panel.h"

class QListWidget;
class QLabel;

namespace trainlab::app {

class ParallelCoordsPlot : public QWidget {
  Q_OBJECT
 public:
  struct Axis {
    QString name;                 // config key or metric name
    QVector<double> position;     // per run: 0 (bottom) .. 1 (top); NaN: no value
    QStringList labels;           // per run: the value as text
    QString low, high;            // the axis' ends as text
  };
  explicit ParallelCoordsPlot(QWidget* parent = nullptr);
  void set_data(QVector<Axis> axes, QStringList run_names);
  const QVector<Axis>& axes() const { return m_axes; }
  QSize sizeHint() const override { return {900, 420}; }

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  QVector<Axis> m_axes;
  QStringList m_names;
};

class ParallelCoordsView : public QWidget {
  Q_OBJECT
 public:
  explicit ParallelCoordsView(QWidget* parent = nullptr);
  // The runs to draw; offers the config keys in which they differ.
  void set_runs(const QVector<RunRow>& runs);
  QStringList offered_keys() const;
  // Ticks exactly `keys` among the offered ones and redraws.
  void set_keys(const QStringList& keys);
  ParallelCoordsPlot* plot() const { return m_plot; }
  QString message() const;

  // The metrics every run gets an axis for (summary.json).
  static QStringList metric_names();

 private:
  void rebuild();
  QVector<RunRow> m_runs;
  QListWidget* m_keys = nullptr;
  QLabel* m_message = nullptr;
  ParallelCoordsPlot* m_plot = nullptr;
};

}  // namespace trainlab::app
