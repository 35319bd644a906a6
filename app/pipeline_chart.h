// PipelineChart: a pipeline schedule drawn as the textbook draws it (dist/pipeline_schedule.h):
// one row per stage (stage 0 on top), time across in units of one forward, each action a block
// coloured by its micro-batch (forwards light, backwards full, zero-bubble's weight-gradient
// blocks dark), labelled F3 / B3 / W3 (with its chunk, interleaved: F3.1), and the idle time left
// as the row's shaded background. The title gives the schedule's idle fraction beside the closed
// form the textbook states for it. The Planner view shows it for its layout's P, M and V.
#pragma once
#include <QString>
#include <QWidget>
#include <vector>

#include "dist/pipeline_schedule.h"

class QCustomPlot;
class QLabel;

namespace trainlab::app {

class PipelineChart : public QWidget {
  Q_OBJECT
 public:
  explicit PipelineChart(QWidget* parent = nullptr);

  // Builds and simulates the schedule (F = B = W = 1, a chunk 1/v of that) and draws it; a layout
  // the schedule does not suit draws nothing and says why.
  void show_schedule(dist::PipelineSchedule kind, int p, int m, int v);
  // A run's measured step (the run record's pipeline timeline): the same blocks at the times the
  // stages took, in milliseconds from the step's start, `chunks` (v) for the labels; the title
  // gives the measured idle fraction beside the schedule's and the formula's.
  void show_measured(const dist::PipelineTiming& measured, dist::PipelineSchedule kind, int p, int m, int v,
                     const QString& what);
  // Nothing to draw (no pipeline): `why` instead.
  void show_none(const QString& why);

  // What is drawn: one block per action, for tests and the report.
  struct Block {
    int stage = 0, micro_batch = 0, chunk = 0;
    dist::PipeOp op = dist::PipeOp::Forward;
    double start = 0, end = 0;
  };
  const std::vector<Block>& blocks() const { return m_blocks; }
  const dist::PipelineTiming& timing() const { return m_timing; }
  QString title() const;
  QString note() const;
  QCustomPlot* plot() const { return m_plot; }

 private:
  void draw(int stages, int chunks);

  QCustomPlot* m_plot = nullptr;
  QLabel* m_note = nullptr;
  std::vector<Block> m_blocks;
  dist::PipelineTiming m_timing;
};

// The idle fraction of a timing as the schedule's simulation counts it: each stage's idle time
// (the step's span less its busy time) over p spans; the span from the earliest start to the last end.
double measured_idle_fraction(const dist::PipelineTiming& t);

// "(p-1)/(m+p-1) = 27.3 %" and the like: the textbook's closed form of a schedule's idle fraction
// at backward = 2 x forward ("" for zero-bubble, which has none of its own in the textbook).
QString bubble_formula(dist::PipelineSchedule kind, int p, int m, int v);

}  // namespace trainlab::app
