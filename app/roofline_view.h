// RooflineView (View > Roofline): the shown run's kernels on a roofline, log-log. The x axis is a
// kernel's arithmetic intensity (FLOPs per byte of memory traffic), the y axis its achieved FLOP/s;
// the device's measured roofs (backend/calibration.h) bound it: the memory roof (bandwidth x
// intensity, rising) and one flat compute roof per precision, the run's own drawn solid. Each
// kernel is a labelled point sized by its share of the kernel time; hovering one shows its
// achieved FLOP/s, bandwidth, intensity and % of its roof. The numbers are train/roofline.h's
// build_roofline, which `trainlab-cli roofline` prints. It follows a live run with kernel timing
// (refresh() after new steps) and reads a finished run's record; a run without kernel times or
// without roofs gets a sentence that says how to get them. The report draws it through render(),
// which places the labels for the page as the dock places them for its size.
#pragma once
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "run_series.h"
#include "train/roofline.h"

class QCustomPlot;
class QCPPainter;
class QLabel;
class QStackedLayout;

namespace trainlab::app {

// The roofline of a run's kernels so far, or nullopt with `why` (no kernel times, no roofs).
std::optional<Roofline> roofline_of(const RunSeries& run, QString* why);

class RooflineView : public QWidget {
  Q_OBJECT
 public:
  explicit RooflineView(QWidget* parent = nullptr);

  void set_run(std::shared_ptr<RunSeries> run);
  // Redraws from the run's kernels (only when it has new timed steps).
  void refresh();

  QCustomPlot* plot() const { return m_plot; }
  QString plot_title() const;
  QString message() const;  // the explanation shown instead of the plot ("" while the plot shows)
  int kernel_points() const { return static_cast<int>(m_placed.size()); }
  // The tooltip of the kernel drawn nearest to `pos` (widget pixels of the plot) within 14 px.
  QString tooltip_at(const QPointF& pos) const;
  // For reports: draws the plot onto any painter (PDF page, SVG) at the given size, its kernels'
  // labels placed apart for that size as in the dock.
  void render(QCPPainter* painter, const QRectF& target);
  // Where the shown kernel labels are (plot pixels, padding included): as the last layout placed
  // them, and as the last render() drew them (in the plot's pixels before the painter's scale).
  const std::vector<QRectF>& label_rects() const { return m_label_rects; }
  const std::vector<QRectF>& rendered_labels() const { return m_rendered_labels; }

 protected:
  void changeEvent(QEvent* e) override;

 private:
  void draw(const Roofline& r);
  void draw_roofs(const Roofline& r, double x0, double x1);

  std::shared_ptr<RunSeries> m_run;
  QCustomPlot* m_plot = nullptr;
  QLabel* m_empty = nullptr;
  QStackedLayout* m_stack = nullptr;
  std::vector<RooflinePoint> m_placed;  // the kernels drawn, in the plot's order
  std::vector<QRectF> m_label_rects, m_rendered_labels;
  int m_shown_steps = -1;
};

}  // namespace trainlab::app
