#include "plot_panel.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSettings>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "plot_decimation.h"
#include "plot_style.h"

namespace trainlab::app {

namespace {

QCPTextElement* title_element(QCustomPlot* p) {
  if (p->plotLayout()->rowCount() > 1) return qobject_cast<QCPTextElement*>(p->plotLayout()->element(0, 0));
  return nullptr;
}

// A title wider than its plot breaks before its parenthesis: beside a dock on a 1280 px screen
// "Throughput  (2,162 tokens/s, last 50 steps)" was cut at both ends. Replots when it changed.
void fit_title(QCustomPlot* p) {
  QCPTextElement* t = title_element(p);
  if (!t) return;
  const QString one = QString(t->text()).replace("\n(", "  (");
  const bool wide = QFontMetrics(t->font()).horizontalAdvance(one) > p->width() - 12;
  const QString want = wide ? QString(one).replace("  (", "\n(") : one;
  if (want == t->text()) return;
  t->setText(want);
  p->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace

PlotPanel::PlotPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(2);
  outer->addWidget(make_bar());

  m_grid = new QGridLayout;
  m_grid->setContentsMargins(2, 0, 2, 2);
  m_grid->setSpacing(4);
  for (int i = 0; i < kPlotCount; ++i) {
    m_plots[i] = new QCustomPlot(this);
    setup_plot(m_plots[i], i);
  }
  // One margin group per column: the axis rects of a column line up (their x axes start and end
  // at the same pixel) whatever their tick labels and right axes.
  for (auto*& g : m_columns_margins) {
    g = new QCPMarginGroup(m_plots[0]);
    g->setParent(this);  // outlives every plot's axis rect (created after them)
  }
  plot(PlotKind::Loss)->yAxis->setLabel("cross-entropy");
  plot(PlotKind::Accuracy)->yAxis->setLabel("%");
  plot(PlotKind::Throughput)->yAxis->setLabel("samples/s");
  plot(PlotKind::Throughput)->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new CompactTicker));
  plot(PlotKind::Throughput)->yAxis2->setLabel("MFU %");
  plot(PlotKind::Memory)->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  plot(PlotKind::LearningRate)->yAxis->setLabel("lr");
  plot(PlotKind::LossScale)->yAxis->setLabel("scale");
  plot(PlotKind::LossScale)->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot(PlotKind::LossScale)->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
  plot(PlotKind::LossScale)->yAxis2->setLabel("skipped steps");
  plot(PlotKind::Compression)->yAxis->setLabel("sparsity %");
  plot(PlotKind::Compression)->yAxis2->setLabel("bits per weight");
  {
    // The memory stack's legend sits below the plot, in as many columns as fit: beside the plot it
    // took the width of the longest name (an overlay's "run · total") from the plot itself.
    QCustomPlot* mp = plot(PlotKind::Memory);
    mp->axisRect()->insetLayout()->take(mp->legend);
    mp->axisRect()->insetLayout()->simplify();
    mp->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    mp->legend->setWrap(3);
    mp->plotLayout()->addElement(2, 0, mp->legend);
    mp->plotLayout()->setRowStretchFactor(2, 0.001);
    mp->legend->setMargins(QMargins(6, 2, 6, 4));
    // An empty legend grid's largest size is its margins, and its layout column takes that as its
    // own: before any run the plot shrank to a stamp in its corner. A stated maximum (well below
    // QWIDGETSIZE_MAX, which QCustomPlot reads as "none" even with margins added) leaves the column
    // its width.
    mp->legend->setMaximumSize(QWIDGETSIZE_MAX / 2, QWIDGETSIZE_MAX / 2);
    connect(mp, &QCustomPlot::afterLayout, mp, [mp] { fit_legend_columns(mp); });
  }
  outer->addLayout(m_grid, 1);
  QSettings s;
  for (const QString& k : s.value("plots/hidden").toStringList())
    for (int i = 0; i < kPlotCount; ++i)
      if (k == kPlotKeys[i]) m_hidden.insert(i);
  m_columns = std::clamp(s.value("plots/columns", 2).toInt(), 1, 3);
  m_x_axis = s.value("plots/x_axis").toString() == "time" ? XAxis::Time : XAxis::Step;
  apply_palette();
  set_smoothing(m_smoothing);
  set_x_axis(m_x_axis);
  update_visibility();

  m_timer.setInterval(40);
  connect(&m_timer, &QTimer::timeout, this, [this] {
    if (m_dirty) refresh();
  });
  m_timer.start();
}

void PlotPanel::setup_plot(QCustomPlot* p, int i) {
  p->setObjectName(QString("plot_%1").arg(i));
  p->setMinimumSize(260, 170);
  p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  p->setNoAntialiasingOnDrag(true);
  p->plotLayout()->insertRow(0);
  auto* title = new QCPTextElement(p, kPlotTitles[i], QFont(font().family(), font().pointSize(), QFont::DemiBold));
  title->setMargins(QMargins(0, 4, 0, 0));
  p->plotLayout()->addElement(0, 0, title);
  p->legend->setVisible(true);
  QFont lf = font();
  lf.setPointSizeF(std::max(7.0, font().pointSizeF() - 1.5));
  p->legend->setFont(lf);
  p->legend->setRowSpacing(-2);
  p->legend->setIconSize(16, 8);
  // Rising curves (accuracy, sparsity) leave the bottom right free; falling ones the top right.
  const bool bottom = i == static_cast<int>(PlotKind::Accuracy) || i == static_cast<int>(PlotKind::Compression);
  p->axisRect()->insetLayout()->setInsetAlignment(0, bottom ? (Qt::AlignBottom | Qt::AlignRight)
                                                            : (Qt::AlignTop | Qt::AlignRight));
  // Raw curves and validation lines are drawn behind the smoothed training curves; the crosshair
  // has a buffered layer of its own, so that moving it replots only that layer.
  p->addLayer("behind", p->layer("main"), QCustomPlot::limBelow);
  p->addLayer("crosshair", p->layer("legend"), QCustomPlot::limAbove);
  p->layer("crosshair")->setMode(QCPLayer::lmBuffered);
  p->installEventFilter(this);
  connect_interaction(p);
  // Marker labels are placed for the plot's current size on every replot (a resize included).
  connect(p, &QCustomPlot::afterLayout, p, [p] {
    layout_marker_labels(p);
    fit_title(p);
  });
  // Its legend keeps clear of the curves (plot_style.h).
  connect(p, &QCustomPlot::afterReplot, p, [p] { place_legend_clear(p); });
}

QWidget* PlotPanel::make_bar() {
  auto* box = new QWidget(this);
  auto* bar = new QHBoxLayout(box);
  bar->setContentsMargins(6, 2, 6, 2);
  m_smooth_label = new QLabel(box);
  m_smooth_slider = new QSlider(Qt::Horizontal, box);
  m_smooth_slider->setObjectName("smoothing");
  m_smooth_slider->setRange(0, 99);
  m_smooth_slider->setValue(static_cast<int>(m_smoothing * 100));
  m_smooth_slider->setMaximumWidth(160);
  m_smooth_slider->setToolTip("Exponential moving average of the training curves (weight of the past, 0 = raw); the raw "
                              "curve stays faintly behind. Validation points and stored data are never smoothed.");
  connect(m_smooth_slider, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  m_log_loss = new QCheckBox("Log loss", box);
  m_log_loss->setToolTip("Logarithmic y axis for the loss (right-click any plot for its own log toggle).");
  connect(m_log_loss, &QCheckBox::toggled, this, &PlotPanel::set_log_loss);
  m_follow_box = new QCheckBox("Follow", box);
  m_follow_box->setChecked(true);
  m_follow_box->setToolTip("Rescale the plots to the data as it arrives. Zooming (wheel) or panning (drag) turns "
                           "this off; double-click a plot to turn it back on.");
  connect(m_follow_box, &QCheckBox::toggled, this, &PlotPanel::set_follow);
  m_x_box = new QComboBox(box);
  m_x_box->setObjectName("x_axis");
  m_x_box->addItems({"step", "elapsed time"});
  m_x_box->setToolTip("The x axis of every plot: optimizer steps, or the training time (wall clock) they took.");
  connect(m_x_box, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_x_axis(i == 1 ? XAxis::Time : XAxis::Step); });
  m_time_label = new QLabel(box);
  m_time_label->setObjectName("run_time");
  m_time_label->setToolTip("Training time of the run shown first, and the time left at its pace so far.");
  auto* hint = new QLabel("wheel: zoom · drag: pan · double-click: fit · right-click: options", box);
  hint->setEnabled(false);
  hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // the first thing to give way
  bar->addWidget(new QLabel("Smoothing", box));
  bar->addWidget(m_smooth_slider);
  bar->addWidget(m_smooth_label);
  bar->addSpacing(12);
  bar->addWidget(m_log_loss);
  bar->addWidget(m_follow_box);
  bar->addWidget(new QLabel("x:", box));
  bar->addWidget(m_x_box);
  bar->addWidget(make_plot_chooser(box));
  bar->addSpacing(12);
  bar->addWidget(m_time_label);
  bar->addStretch(1);
  bar->addWidget(hint);
  return box;
}

QList<QCustomPlot*> PlotPanel::plots() const {
  QList<QCustomPlot*> l;
  for (auto* p : m_plots) l << p;
  return l;
}

QString PlotPanel::plot_title(PlotKind k) const {
  auto* t = title_element(plot(k));
  return t ? t->text() : QString(kPlotTitles[static_cast<int>(k)]);
}

QVector<std::shared_ptr<RunSeries>> PlotPanel::runs() const {
  QVector<std::shared_ptr<RunSeries>> r;
  for (const auto& d : m_drawn) r << d.run;
  return r;
}

void PlotPanel::set_runs(const QVector<std::shared_ptr<RunSeries>>& runs) {
  m_drawn.clear();
  for (int i = 0; i < runs.size(); ++i) {
    Drawn d;
    d.run = runs[i];
    d.primary = i == 0;
    if (!d.run->color.isValid()) d.run->color = run_color(i);
    m_drawn.push_back(d);
  }
  rebuild();
}

void PlotPanel::rebuild() {
  for (auto* p : m_plots) {
    p->clearGraphs();
    p->clearItems();
  }
  for (int i = 0; i < m_drawn.size(); ++i) {
    m_drawn[i].tracks.clear();
    m_drawn[i].events_drawn = 0;
    build_graphs(m_drawn[i]);
  }
  update_visibility();
  refresh();
}

// Brings one graph up to its run's data: smoothing (a debiased exponential moving average with
// factor m_smoothing) of the new points, then either appending them or rebuilding the min/max
// envelope of the visible range (plot_decimation.h decides which).
void PlotPanel::update_track(Track& t, const RunSeries& r) {
  const double a = m_smoothing;
  const int n = t.count(r);
  if (n == 0 || (t.raw && a <= 0)) return;  // a raw copy is hidden (and left as it is) without smoothing
  if (t.smooth && a > 0) {
    for (int i = t.smoothed.size(); i < n; ++i) {
      double y = t.y(r, i);
      if (std::isfinite(y)) {
        t.acc = t.have ? a * t.acc + (1 - a) * y : (1 - a) * y;
        t.debias = t.have ? a * t.debias + (1 - a) : (1 - a);
        t.have = true;
        y = t.acc / t.debias;
      }
      t.smoothed.push_back(y);
    }
  }
  const bool use_smoothed = t.smooth && a > 0;
  auto val = [&](int i) { return use_smoothed ? t.smoothed[i] : t.y(r, i); };
  if (t.category >= 0 && !t.nonzero)
    for (int i = t.drawn; i < n && !t.nonzero; ++i) t.nonzero = r.mem[static_cast<size_t>(t.category)][i] > 0;
  const bool rebuild = envelope_needs_rebuild(n, t.decimated, t.built_n, m_range_dirty);
  if (!rebuild) {
    if (n <= t.drawn) return;
    // Append the new points as they are (a decimated graph gets its raw tail until the next rebuild).
    QVector<double> xs, ys;
    xs.reserve(n - t.drawn);
    ys.reserve(n - t.drawn);
    for (int i = t.drawn; i < n; ++i) {
      xs.push_back(t.x(r, i));
      ys.push_back(val(i));
    }
    t.graph->addData(xs, ys, true);
    t.drawn = n;
    return;
  }
  double lo = t.x(r, 0), hi = t.x(r, n - 1);
  if (!m_follow) {  // the visible range only
    lo = std::max(lo, t.graph->keyAxis()->range().lower);
    hi = std::min(hi, t.graph->keyAxis()->range().upper);
  }
  const QVector<QCPGraphData> out = decimate_range(
      n, [&](int i) { return t.x(r, i); }, val, lo, hi, t.graph->keyAxis()->axisRect()->width());
  t.graph->data()->set(out, true);
  if (!t.decimated) {
    // A dense envelope draws fast only with a thin pen (wide pens go through QPainter's stroker).
    QPen pen = t.graph->pen();
    pen.setWidthF(1.0);
    t.graph->setPen(pen);
  }
  t.decimated = true;
  t.built_n = n;
  t.drawn = n;
}

// Titles carry what does not fit in the legend: the device capacity, the recent throughput, and a
// learning rate that never changes (its plot, a flat line, is left out then).
void PlotPanel::update_titles() {
  if (auto* t = title_element(plot(PlotKind::Memory))) {
    QString s = "Memory by category";
    if (!m_drawn.isEmpty() && m_drawn[0].run->device_total_bytes > 0)
      s += "  (device capacity " + format_bytes(m_drawn[0].run->device_total_bytes) + ", red line)";
    t->setText(s);
  }
  if (auto* t = title_element(plot(PlotKind::Throughput))) {
    QString s = "Throughput";
    if (!m_drawn.isEmpty() && m_drawn[0].run->size() > 0) {
      const auto& r = *m_drawn[0].run;
      double sum = 0;
      int n = 0;
      for (int i = std::max(0, r.size() - 50); i < r.size(); ++i, ++n) sum += r.samples_per_s[i];
      if (n)
        s += QString("  (%1 %2, last 50 steps)").arg(QLocale::system().toString(sum / n, 'f', 0), r.throughput_unit());
    }
    t->setText(s);
  }
  QStringList units;
  for (const auto& d : m_drawn)
    if (!units.contains(d.run->throughput_unit())) units << d.run->throughput_unit();
  plot(PlotKind::Throughput)->yAxis->setLabel(units.isEmpty() ? QStringLiteral("samples/s") : units.join(" · "));
  if (auto* t = title_element(plot(PlotKind::Loss))) t->setText("Loss" + constant_lr_text());
  for (PlotKind k : {PlotKind::Memory, PlotKind::Throughput, PlotKind::Loss}) fit_title(plot(k));
}

// "  ·  learning rate 0.001 (constant)" when every run drawn kept one learning rate, else "".
QString PlotPanel::constant_lr_text() const {
  QStringList parts;
  for (const auto& d : m_drawn) {
    double v = 0;
    if (!d.run->constant_lr(&v)) return {};
    const QString text = QString::number(v, 'g', 4);
    parts << (m_drawn.size() > 1 ? d.run->name + " " + text : text);
  }
  if (parts.isEmpty()) return {};
  parts.removeDuplicates();
  return "  ·  learning rate " + parts.join(", ") + " (constant)";
}

// Following the run: every axis fits its data, with some headroom so that lines do not sit on the
// frame and labels have room.
void PlotPanel::fit_axes() {
  for (auto* p : m_plots) {
    p->rescaleAxes(true);
    for (QCPAxis* ax : {p->yAxis, p->yAxis2}) {
      if (!ax->visible() && ax == p->yAxis2) continue;
      if (ax->scaleType() != QCPAxis::stLinear) continue;
      // The data's own range (rescaleAxes widens a constant series arbitrarily).
      bool any = false;
      QCPRange dr;
      for (int g = 0; g < p->graphCount(); ++g) {
        QCPGraph* gr = p->graph(g);
        if (gr->valueAxis() != ax || !gr->visible() || gr->dataCount() == 0) continue;
        bool found = false;
        const QCPRange r = gr->getValueRange(found);
        if (!found) continue;
        dr = any ? QCPRange(std::min(dr.lower, r.lower), std::max(dr.upper, r.upper)) : r;
        any = true;
      }
      if (!any) continue;
      if (dr.size() <= std::fabs(dr.center()) * 1e-6) {
        // A constant series (a fixed learning rate): show it with room around it.
        const double v = dr.center();
        ax->setRange(v >= 0 ? 0 : v * 1.3, v > 0 ? v * 1.3 : (v == 0 ? 1 : 0));
      } else {
        const double pad = dr.size() * 0.06;
        ax->setRange(dr.lower >= 0 && dr.lower - pad < 0 ? 0 : dr.lower - pad, dr.upper + pad * 1.6);
      }
    }
  }
  // One x range for all (the axes are linked): the union of the plots' data.
  bool any = false;
  QCPRange xr;
  for (auto* p : m_plots) {
    bool found = false;
    for (int g = 0; g < p->graphCount(); ++g) found = found || p->graph(g)->dataCount() > 0;
    if (!found) continue;
    const QCPRange r = p->xAxis->range();
    xr = any ? QCPRange(std::min(xr.lower, r.lower), std::max(xr.upper, r.upper)) : r;
    any = true;
  }
  if (any)
    for (auto* p : m_plots) p->xAxis->setRange(xr);
  QCustomPlot* acc = plot(PlotKind::Accuracy);
  if (acc->yAxis->range().upper > 100) acc->yAxis->setRangeUpper(101);
  QCustomPlot* mp = plot(PlotKind::Memory);
  mp->yAxis->setRangeLower(0);
}

void PlotPanel::refresh() {
  m_dirty = false;
  if (needs_rebuild()) {
    for (auto& d : m_drawn) d.tracks.clear();
    // rebuild() calls refresh() again with the new graphs
    QVector<std::shared_ptr<RunSeries>> r = runs();
    m_drawn.clear();
    for (int i = 0; i < r.size(); ++i) m_drawn.push_back({r[i], {}, 0, i == 0});
    rebuild();
    return;
  }
  m_in_refresh = true;
  for (auto& d : m_drawn) {
    const RunSeries& r = *d.run;
    for (auto& t : d.tracks) update_track(t, r);
    for (auto& t : d.tracks)
      if (t.category >= 0) {
        // Categories that stay at zero (communication on one device) stay out of the stack's legend.
        t.graph->setVisible(t.nonzero);
        if (t.nonzero) t.graph->addToLegend(); else t.graph->removeFromLegend();
      }
    while (d.events_drawn < r.events.size()) {
      const RunEvent& e = r.events[d.events_drawn++];
      add_marker(x_of_step(r, e.step), (m_drawn.size() > 1 ? r.name + ": " : QString()) + e.label, d.primary ? QColor(120, 60, 200) : d.run->color);
    }
  }
  update_titles();
  if (m_follow) fit_axes();
  m_range_dirty = false;
  m_in_refresh = false;
  update_visibility();
  for (auto* p : {plot(PlotKind::Loss), plot(PlotKind::Accuracy)}) style_validation(p);
  m_time_label->setText(time_text());
  for (auto* p : m_plots)
    if (p->isVisible() || !isVisible()) p->replot(QCustomPlot::rpQueuedReplot);
}

void PlotPanel::set_smoothing(double alpha) {
  m_smoothing = std::clamp(alpha, 0.0, 0.99);
  m_smooth_label->setText(QString::number(m_smoothing, 'f', 2));
  if (m_smooth_slider->value() != static_cast<int>(std::lround(m_smoothing * 100)))
    m_smooth_slider->setValue(static_cast<int>(std::lround(m_smoothing * 100)));
  // Smoothed tracks are recomputed from the full data.
  for (auto& d : m_drawn)
    for (auto& t : d.tracks)
      if (t.smooth) {
        t.graph->data()->clear();
        t.drawn = 0;
        t.have = false;
        t.smoothed.clear();
        t.decimated = false;
      } else if (t.raw) {
        t.graph->setVisible(m_smoothing > 0);
      }
  m_dirty = true;
  if (!m_drawn.isEmpty()) refresh();
}

void PlotPanel::set_log_loss(bool on) {
  if (m_log_loss->isChecked() != on) m_log_loss->setChecked(on);
  QCPAxis* y = plot(PlotKind::Loss)->yAxis;
  y->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  y->setTicker(on ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog) : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  refresh();
}

void PlotPanel::set_follow(bool on) {
  m_follow = on;
  if (m_follow_box->isChecked() != on) m_follow_box->setChecked(on);
  if (on) m_dirty = true;
}

void PlotPanel::render(PlotKind k, QCPPainter* painter, const QRectF& target) { render_plot(plot(k), painter, target); }

void PlotPanel::apply_palette() {
  for (auto* p : m_plots) {
    style_plot(p, palette());
    if (auto* t = title_element(p)) t->setTextColor(palette().color(QPalette::WindowText));
    p->replot(QCustomPlot::rpQueuedReplot);
  }
}

void PlotPanel::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) apply_palette();
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
