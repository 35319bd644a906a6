// PipelineView (View > Pipeline...): a pipelined run's schedule as the textbook draws it, from the
// run's measured timeline (pipeline.jsonl, train/pipeline_record.h): stages as rows, time across in
// milliseconds, each forward and backward a block coloured by its micro-batch and idle time
// shaded; a slider picks the recorded step. Below it, the ideal schedule of the same p, m and v at
// unit costs (what the planner draws), and a table of each stage's forward, backward, waiting and
// bubble beside the schedule's and the formula's.
#pragma once
#include <QString>
#include <QWidget>
#include <vector>

#include "train/pipeline_record.h"

class QLabel;
class QSlider;
class QTableWidget;

namespace trainlab::app {

class PipelineChart;

class PipelineView : public QWidget {
  Q_OBJECT
 public:
  explicit PipelineView(QWidget* parent = nullptr);

  // Reads `run_dir`'s pipeline.jsonl and shows its first recorded step; false (error() says why,
  // naming the folder) when the run has none or the file is malformed. The view keeps what it
  // showed before on failure.
  bool load(const QString& run_dir);
  // Shows the `index`-th recorded step (the slider's position).
  void show_step(int index);

  QString error() const { return m_error; }
  const std::vector<PipelineStepRecord>& records() const { return m_records; }
  PipelineChart* measured() const { return m_measured; }
  PipelineChart* ideal() const { return m_ideal; }
  QSlider* slider() const { return m_slider; }
  QTableWidget* table() const { return m_table; }

 private:
  void fill_table(const PipelineStepRecord& r);

  QLabel* m_header = nullptr;
  QLabel* m_step_label = nullptr;
  QSlider* m_slider = nullptr;
  PipelineChart* m_measured = nullptr;
  PipelineChart* m_ideal = nullptr;
  QTableWidget* m_table = nullptr;
  std::vector<PipelineStepRecord> m_records;
  QString m_dir, m_error;
};

}  // namespace trainlab::app
