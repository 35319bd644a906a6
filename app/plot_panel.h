// PlotPanel: the live plots (QCustomPlot), PlotJuggler-style: runs append metrics to their
// RunSeries; the panel copies only the new points into the graphs and replots from a 40 ms timer
// (never per step). All points are kept in the RunSeries; a graph holds every point up to 8,000,
// beyond that a min/max envelope of the visible range (plot_decimation.h), so a million points per
// series stay smooth.
//
// Plots: loss (train + val), accuracy (train + val), throughput (samples/s, MFU on the right axis
// when known), memory (stacked by category for the primary run, with the predicted total as a
// dashed line and the device capacity), learning rate, fp16 loss scale + skipped steps (only when
// a run uses fp16), sparsity and bits per weight (only when a run prunes or quantizes). Every
// `event` of a run becomes a labelled vertical marker on every plot. Several runs overlay.
#pragma once
#include <QCheckBox>
#include <QSlider>
#include <QTimer>
#include <QWidget>
#include <functional>
#include <memory>

#include "plot_style.h"
#include "run_series.h"

class QCustomPlot;
class QCPGraph;
class QLabel;
class QCPPainter;
class QGridLayout;

namespace trainlab::app {

enum class PlotKind { Loss, Accuracy, Throughput, Memory, LearningRate, LossScale, Compression };
constexpr int kPlotCount = 7;

class PlotPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PlotPanel(QWidget* parent = nullptr);

  // The runs to draw; the first is the primary one (stacked memory). Colors are assigned here.
  void set_runs(const QVector<std::shared_ptr<RunSeries>>& runs);
  QVector<std::shared_ptr<RunSeries>> runs() const;
  // New points were appended to some run: picked up at the next timer tick.
  void notify_data() { m_dirty = true; }
  // Copies new points into the graphs and replots now.
  void refresh();

  QCustomPlot* plot(PlotKind k) const { return m_plots[static_cast<int>(k)]; }
  QList<QCustomPlot*> plots() const;
  QString plot_title(PlotKind k) const;
  // Graph "name" of a plot (run name + series), for tests; nullptr when absent.
  QCPGraph* graph(PlotKind k, const QString& name) const;
  int marker_count(PlotKind k) const;

  void set_smoothing(double alpha);  // 0..0.99
  double smoothing() const { return m_smoothing; }
  void set_log_loss(bool on);
  void set_follow(bool on);
  // For reports: draw a plot onto any painter (PDF page, SVG) at the given size.
  void render(PlotKind k, QCPPainter* painter, const QRectF& target);

 protected:
  void changeEvent(QEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  struct Track {
    QCPGraph* graph = nullptr;
    std::function<int(const RunSeries&)> count;
    std::function<double(const RunSeries&, int)> x, y;
    bool smooth = false;
    int drawn = 0;
    double acc = 0, debias = 0;
    bool have = false;
    int category = -1;  // memory category of a stacked graph (hidden while it stays at zero)
    bool nonzero = false;
    QVector<double> smoothed;  // smoothed values of every point (smooth tracks only)
    bool decimated = false;    // the graph holds a min/max envelope, not every point
    int built_n = 0;           // points when the envelope was built
  };
  struct Drawn {
    std::shared_ptr<RunSeries> run;
    QVector<Track> tracks;
    int events_drawn = 0;
    bool primary = false;
  };
  void build_graphs(Drawn& d, int index);
  void rebuild();
  void add_marker(double step, const QString& label, const QColor& color);
  void apply_palette();
  void update_visibility();
  bool needs_rebuild() const;
  void update_track(Track& t, const RunSeries& r);
  void update_titles();
  void fit_axes();
  void show_hover(QCustomPlot* p, const QPoint& pos);

  QCustomPlot* m_plots[kPlotCount] = {};
  QWidget* m_cells[kPlotCount] = {};
  QGridLayout* m_grid = nullptr;
  QVector<Drawn> m_drawn;
  QTimer m_timer;
  bool m_dirty = false;
  bool m_follow = true;
  bool m_range_dirty = false;
  bool m_in_refresh = false;
  double m_smoothing = 0.6;
  QSlider* m_smooth_slider = nullptr;
  QCheckBox* m_log_loss = nullptr;
  QCheckBox* m_follow_box = nullptr;
  QLabel* m_smooth_label = nullptr;
};

}  // namespace trainlab::app
