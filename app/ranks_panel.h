// RanksPanel: a run over several ranks (core/dist), rank by rank. Two plots that follow the run as
// its record grows (refresh() after new steps):
//   Memory per rank: each rank's ledger at the last step, stacked by category, with the memory
//     core/plan predicts for that rank (predict_rank_memory: ZeRO's shard of each category) as a
//     lighter stacked bar beside it;
//   Time per rank: each rank's step split into compute, exposed communication and waiting (mean
//     per step over steps 2.., metrics.h's DistTimeTotals), the bytes it sent a step under its
//     label, and the run's scaling-efficiency estimate in the title.
// A run on one rank gets a sentence saying why there is nothing to show. The report draws the same
// plots through render(). A line above the plots names the layout; a tensor-parallel run's ranks
// stand in their groups (a gap between groups, each label naming its group).
#pragma once
#include <QWidget>
#include <memory>

#include "run_series.h"

class QCustomPlot;
class QCPPainter;
class QLabel;
class QStackedLayout;

namespace trainlab::app {

// A run's dist.tp (1 when its config has none), and its layout in words (dist_layout_text).
int tensor_parallel_degree(const RunSeries& run);
QString layout_text(const RunSeries& run);

class RanksPanel : public QWidget {
  Q_OBJECT
 public:
  enum class Plot { Memory, Time };

  explicit RanksPanel(QWidget* parent = nullptr);

  void set_run(std::shared_ptr<RunSeries> run);
  // Redraws from the run's figures (only when it has new steps).
  void refresh();

  QCustomPlot* plot(Plot k) const { return k == Plot::Memory ? m_memory : m_time; }
  QString plot_title(Plot k) const;
  // The explanation shown instead of the plots ("" while the plots show).
  QString message() const;
  // The line above the plots naming the run's layout ("" without plots).
  QString layout_line() const;
  // For reports: draws a plot onto any painter (PDF page, SVG) at the given size.
  void render(Plot k, QCPPainter* painter, const QRectF& target);

 protected:
  void changeEvent(QEvent* e) override;

 private:
  void draw_memory();
  void draw_time();

  std::shared_ptr<RunSeries> m_run;
  QCustomPlot* m_memory = nullptr;
  QCustomPlot* m_time = nullptr;
  QLabel* m_empty = nullptr;
  QLabel* m_layout = nullptr;
  QStackedLayout* m_stack = nullptr;
  int m_shown_steps = -1;
};

}  // namespace trainlab::app
