// PlotPanel: the live plots (QCustomPlot), PlotJuggler-style: runs append metrics to their
// RunSeries; the panel copies only the new points into the graphs and replots from a 40 ms timer
// (never per step). All points are kept in the RunSeries; a graph holds every point up to 8,000,
// beyond that a min/max envelope of the visible range (plot_decimation.h), so a million points per
// series stay smooth.
//
// Plots: loss (train + val), accuracy (train + val), throughput (samples/s, tokens/s for the
// character transformer, MFU on the right axis when known), memory (stacked by category for the
// primary run, with the predicted total as a dashed line and the device capacity), learning rate
// (only when it changes: a constant one is named in the loss plot's title), fp16 loss scale +
// skipped steps (only when a run uses fp16), sparsity and bits per weight (only when a run prunes
// or quantizes). Smoothed curves have their raw data drawn faintly behind them. Every `event` of a
// run becomes a labelled vertical marker on every plot. Several runs overlay.
//
// The x axes are linked (zoom or pan one plot, all follow) and show steps or elapsed time; the
// crosshair at the hovered x reads every plot's values there. Which plots show and in how many
// columns is the user's choice, kept in QSettings (plots/hidden, plots/columns, plots/x_axis).
#pragma once
#include <QCheckBox>
#include <QSet>
#include <QSlider>
#include <QTimer>
#include <QWidget>
#include <cmath>
#include <functional>
#include <memory>

#include "plot_style.h"
#include "run_series.h"

class QCustomPlot;
class QCPGraph;
class QComboBox;
class QLabel;
class QCPPainter;
class QCPMarginGroup;
class QGridLayout;

namespace trainlab::app {

enum class PlotKind { Loss, Accuracy, Throughput, Memory, LearningRate, LossScale, Compression };
constexpr int kPlotCount = 7;
// The x axis of every plot: optimizer steps, or seconds of training (RunSeries::elapsed_s).
enum class XAxis { Step, Time };
// Titles of the plots, and their names in QSettings (plots/hidden).
inline constexpr const char* kPlotTitles[kPlotCount] = {"Loss",          "Accuracy",        "Throughput", "Memory",
                                                        "Learning rate", "fp16 loss scale", "Sparsity and bits"};
inline constexpr const char* kPlotKeys[kPlotCount] = {"loss", "accuracy", "throughput", "memory",
                                                      "lr",   "loss_scale", "compression"};

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
  bool follow() const { return m_follow; }
  // For reports: draw a plot onto any painter (PDF page, SVG) at the given size.
  void render(PlotKind k, QCPPainter* painter, const QRectF& target);

  // Whether a plot is on screen now (chosen by the user and applicable to the runs drawn).
  bool plot_shown(PlotKind k) const;
  // The user's choice of plots and columns (1-3); both saved in QSettings.
  void set_plot_chosen(PlotKind k, bool on);
  bool plot_chosen(PlotKind k) const { return !m_hidden.contains(static_cast<int>(k)); }
  void set_columns(int n);
  int columns() const { return m_columns; }
  void set_x_axis(XAxis a);
  XAxis x_axis() const { return m_x_axis; }
  // Elapsed time and ETA of the primary run ("elapsed 00:42 · ETA 01:10"; "took 02:05" when done).
  QString time_text() const;
  // The crosshair at x (steps or seconds, as the x axis) on every shown plot, each with a readout
  // of its curves' values there; the mouse sets it, tests call it.
  void set_crosshair(double x);
  void clear_crosshair();
  QString readout(PlotKind k) const;

 protected:
  void changeEvent(QEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;
  void leaveEvent(QEvent* e) override;

 private:
  struct Track {
    QCPGraph* graph = nullptr;
    std::function<int(const RunSeries&)> count;
    std::function<double(const RunSeries&, int)> x, y;
    bool smooth = false;
    bool raw = false;  // the faint unsmoothed copy of a smoothed track (drawn only while smoothing)
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
  using Value = std::function<double(const RunSeries&, int)>;
  QCPGraph* add_track(Drawn& d, PlotKind k, const QString& name, const QPen& pen, bool per_step, Value y, bool smooth,
                      bool right_axis = false);
  void build_graphs(Drawn& d);
  void build_memory_graphs(Drawn& d);
  void rebuild();
  void add_marker(double step, const QString& label, const QColor& color);
  void apply_palette();
  void update_visibility();
  bool needs_rebuild() const;
  void update_track(Track& t, const RunSeries& r);
  void update_titles();
  QString constant_lr_text() const;
  void fit_axes();
  void setup_plot(QCustomPlot* p, int index);
  QWidget* make_bar();
  QWidget* make_plot_chooser(QWidget* parent);
  void connect_interaction(QCustomPlot* p);
  void link_x(QCustomPlot* source);
  void place_plots(const QVector<PlotKind>& shown);
  QVector<PlotKind> applicable_plots() const;
  void style_validation(QCustomPlot* p);
  void save_choices() const;
  double x_of_step(const RunSeries& r, double step) const;
  QString readout_text(QCustomPlot* p, double x) const;

  QCustomPlot* m_plots[kPlotCount] = {};
  QCPMarginGroup* m_columns_margins[3] = {};  // aligns the axis rects of a column

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
  QLabel* m_time_label = nullptr;
  QComboBox* m_x_box = nullptr;
  QSet<int> m_hidden;          // plots the user turned off
  int m_columns = 2;
  XAxis m_x_axis = XAxis::Step;
  bool m_linking = false;     // inside link_x: the other axes' rangeChanged is ours
  QCPRange m_press_x, m_press_y;  // the ranges at a mouse press: a drag that moved them ends Follow
  double m_crosshair = std::nan("");
};

}  // namespace trainlab::app
