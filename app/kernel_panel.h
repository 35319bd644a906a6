// KernelPanel: where a step's time goes, per kernel. Runs with device.kernel_timing (CUDA events
// on a GPU, the host clock around each operation on the CPU) report each kernel's time on every
// metrics line ("kernels"); the panel sums them over the run and shows them sorted by total time as
// a table with a share bar. Runs without kernel times get a sentence that says why and how to turn
// it on, not an empty table.
#pragma once
#include <QWidget>
#include <memory>

#include "run_series.h"

class QLabel;
class QTableWidget;
class QStackedLayout;

namespace trainlab::app {

class KernelPanel : public QWidget {
  Q_OBJECT
 public:
  explicit KernelPanel(QWidget* parent = nullptr);

  // The run whose kernels to show (nullptr: none); refresh() re-reads its totals.
  void set_run(std::shared_ptr<RunSeries> run);
  void refresh();

  QTableWidget* table() const { return m_table; }
  QString message() const;     // the explanation shown instead of the table ("" while the table shows)
  bool showing_table() const;

 private:
  std::shared_ptr<RunSeries> m_run;
  QLabel* m_summary = nullptr;
  QLabel* m_empty = nullptr;
  QTableWidget* m_table = nullptr;
  QStackedLayout* m_stack = nullptr;
  int m_shown_steps = -1;
};

}  // namespace trainlab::app
