#include "plot_panel.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "plot_decimation.h"
#include "plot_style.h"

namespace trainlab::app {

namespace {

const char* kTitles[kPlotCount] = {"Loss",          "Accuracy",        "Throughput",       "Memory",
                                   "Learning rate", "fp16 loss scale", "Sparsity and bits"};

QCPTextElement* title_element(QCustomPlot* p) {
  if (p->plotLayout()->rowCount() > 1) return qobject_cast<QCPTextElement*>(p->plotLayout()->element(0, 0));
  return nullptr;
}

}  // namespace

PlotPanel::PlotPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(2);

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(6, 2, 6, 2);
  m_smooth_label = new QLabel(this);
  m_smooth_slider = new QSlider(Qt::Horizontal, this);
  m_smooth_slider->setObjectName("smoothing");
  m_smooth_slider->setRange(0, 99);
  m_smooth_slider->setValue(static_cast<int>(m_smoothing * 100));
  m_smooth_slider->setMaximumWidth(160);
  m_smooth_slider->setToolTip("Exponential moving average of the training curves (weight of the past, 0 = raw). "
                              "Validation points and stored data are never smoothed.");
  connect(m_smooth_slider, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  m_log_loss = new QCheckBox("Log loss", this);
  m_log_loss->setToolTip("Logarithmic y axis for the loss (right-click any plot for its own log toggle).");
  connect(m_log_loss, &QCheckBox::toggled, this, &PlotPanel::set_log_loss);
  m_follow_box = new QCheckBox("Follow", this);
  m_follow_box->setChecked(true);
  m_follow_box->setToolTip("Rescale the plots to the data as it arrives. Zooming (wheel) or panning (drag) turns "
                           "this off; double-click a plot to turn it back on.");
  connect(m_follow_box, &QCheckBox::toggled, this, &PlotPanel::set_follow);
  auto* hint = new QLabel("wheel: zoom · drag: pan · double-click: fit · right-click: options", this);
  hint->setEnabled(false);
  bar->addWidget(new QLabel("Smoothing", this));
  bar->addWidget(m_smooth_slider);
  bar->addWidget(m_smooth_label);
  bar->addSpacing(12);
  bar->addWidget(m_log_loss);
  bar->addWidget(m_follow_box);
  bar->addStretch(1);
  bar->addWidget(hint);
  outer->addLayout(bar);

  auto* grid = new QGridLayout;
  grid->setContentsMargins(2, 0, 2, 2);
  grid->setSpacing(4);
  for (int i = 0; i < kPlotCount; ++i) {
    auto* p = new QCustomPlot(this);
    p->setObjectName(QString("plot_%1").arg(i));
    p->setMinimumSize(260, 170);
    p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    p->setNoAntialiasingOnDrag(true);
    p->plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(p, kTitles[i], QFont(font().family(), font().pointSize(), QFont::DemiBold));
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
    p->xAxis->setLabel("step");
    p->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new CompactTicker));
    p->installEventFilter(this);
    connect(p, &QCustomPlot::mouseMove, this, [this, p](QMouseEvent* e) { show_hover(p, e->pos()); });
    connect(p, &QCustomPlot::mouseWheel, this, [this] { m_follow_box->setChecked(false); });
    connect(p->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this] {
      if (m_in_refresh || m_follow) return;
      m_range_dirty = true;  // a zoom or pan: rebuild the envelopes for the new view
      m_dirty = true;
    });
    connect(p, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
      if (e->button() == Qt::LeftButton) m_follow_box->setChecked(false);
    });
    connect(p, &QCustomPlot::mouseDoubleClick, this, [this] {
      m_follow_box->setChecked(true);
      refresh();
    });
    m_plots[i] = p;
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
    // The memory stack's legend sits right of the plot, where it hides no data.
    QCustomPlot* mp = plot(PlotKind::Memory);
    mp->axisRect()->insetLayout()->take(mp->legend);
    mp->axisRect()->insetLayout()->simplify();
    auto* side = new QCPLayoutGrid;
    mp->plotLayout()->addElement(1, 1, side);
    side->addElement(0, 0, mp->legend);
    side->addElement(1, 0, new QCPLayoutElement(mp));  // filler below the legend
    side->setRowStretchFactor(0, 0.01);
    side->setMargins(QMargins(0, 10, 6, 0));
    mp->plotLayout()->setColumnStretchFactor(1, 0.01);
  }
  for (int i = 0; i < kPlotCount; ++i) m_cells[i] = m_plots[i];
  m_grid = grid;
  outer->addLayout(grid, 1);
  apply_palette();
  set_smoothing(m_smoothing);
  update_visibility();

  m_timer.setInterval(40);
  connect(&m_timer, &QTimer::timeout, this, [this] {
    if (m_dirty) refresh();
  });
  m_timer.start();
}

QList<QCustomPlot*> PlotPanel::plots() const {
  QList<QCustomPlot*> l;
  for (auto* p : m_plots) l << p;
  return l;
}

QString PlotPanel::plot_title(PlotKind k) const {
  auto* t = title_element(plot(k));
  return t ? t->text() : QString(kTitles[static_cast<int>(k)]);
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
    build_graphs(m_drawn[i], i);
  }
  update_visibility();
  refresh();
}

void PlotPanel::build_graphs(Drawn& d, int index) {
  const bool overlay = m_drawn.size() > 1;
  const QString prefix = overlay ? d.run->name + " · " : QString();
  const QColor c = d.run->color;
  const bool primary = d.primary;
  auto add = [&](PlotKind k, const QString& name, QPen pen, std::function<int(const RunSeries&)> count,
                 std::function<double(const RunSeries&, int)> x, std::function<double(const RunSeries&, int)> y,
                 bool smooth, bool right_axis = false) -> QCPGraph* {
    QCustomPlot* p = plot(k);
    QCPGraph* g = p->addGraph(p->xAxis, right_axis ? p->yAxis2 : p->yAxis);
    g->setName(prefix + name);
    g->setPen(pen);
    g->setAdaptiveSampling(true);
    Track t;
    t.graph = g;
    t.count = std::move(count);
    t.x = std::move(x);
    t.y = std::move(y);
    t.smooth = smooth;
    d.tracks.push_back(std::move(t));
    return g;
  };
  auto steps = [](const RunSeries& r) { return r.size(); };
  auto vals = [](const RunSeries& r) { return static_cast<int>(r.val_step.size()); };
  auto sx = [](const RunSeries& r, int i) { return r.step[i]; };
  auto vx = [](const RunSeries& r, int i) { return r.val_step[i]; };
  QPen solid(c, 1.6);
  QPen val_pen(c.darker(primary && !overlay ? 100 : 130), 1.4, Qt::DashLine);
  QColor val_color = overlay ? c : QColor(255, 127, 14);
  if (!overlay) val_pen = QPen(val_color, 1.6);
  QCPScatterStyle dots(QCPScatterStyle::ssDisc, val_color, 5);

  add(PlotKind::Loss, "train", solid, steps, sx, [](const RunSeries& r, int i) { return r.loss[i]; }, true);
  add(PlotKind::Loss, "validation", val_pen, vals, vx, [](const RunSeries& r, int i) { return r.val_loss[i]; }, false)
      ->setScatterStyle(dots);
  add(PlotKind::Accuracy, "train", solid, steps, sx, [](const RunSeries& r, int i) { return 100 * r.train_acc[i]; }, true);
  add(PlotKind::Accuracy, "validation", val_pen, vals, vx, [](const RunSeries& r, int i) { return 100 * r.val_acc[i]; }, false)
      ->setScatterStyle(dots);
  add(PlotKind::Throughput, "samples/s", solid, steps, sx, [](const RunSeries& r, int i) { return r.samples_per_s[i]; }, true);
  if (d.run->has_mfu())
    add(PlotKind::Throughput, "MFU %", QPen(c.lighter(140), 1.2, Qt::DotLine), steps, sx,
        [](const RunSeries& r, int i) { return 100 * r.mfu[i]; }, true, true);

  QCustomPlot* mp = plot(PlotKind::Memory);
  if (primary) {
    QCPGraph* below = nullptr;
    for (size_t cat = 0; cat < kMemCategoryCount; ++cat) {
      bool any = false;
      for (double v : d.run->mem[cat]) {
        if (v > 0) {
          any = true;
          break;
        }
      }
      // Categories that stay at zero (communication on one device) are left out of the stack.
      if (!any && d.run->size() > 0) continue;
      QColor cc = category_color(cat);
      QCPGraph* g = add(PlotKind::Memory, mem_category_name(static_cast<MemCategory>(cat)), QPen(cc.darker(115), 1), steps,
                        sx, [cat](const RunSeries& r, int i) {
                          double s = 0;
                          for (size_t k = 0; k <= cat; ++k) s += r.mem[k][i];
                          return s;
                        }, false);
      d.tracks.back().category = static_cast<int>(cat);
      cc.setAlpha(150);
      g->setBrush(cc);
      if (below) g->setChannelFillGraph(below);
      below = g;
    }
    // Activations against their prediction (plan/memory_model.h):
    // drawn where the activations band's top edge is when the prediction holds, i.e. on top of
    // the measured categories below it.
    {
      constexpr size_t act = static_cast<size_t>(MemCategory::Activations);
      QColor ac = category_color(act).darker(140);
      add(PlotKind::Memory, "activations predicted", QPen(ac, 1.4, Qt::DotLine), steps, sx,
          [](const RunSeries& r, int i) {
            double s = r.act_predicted[i];
            for (size_t k = 0; k < act; ++k) s += r.mem[k][i];
            return s;
          },
          false);
    }
    // Stacked graphs: the legend reads top-down like the stack.
    add(PlotKind::Memory, "predicted", QPen(QApplication::palette().color(QPalette::Text), 1.6, Qt::DashLine), steps, sx,
        [](const RunSeries& r, int i) { return r.mem_predicted[i]; }, false);
    if (d.run->device_total_bytes > 0) {
      auto* line = new QCPItemStraightLine(mp);
      line->setObjectName("capacity");
      line->point1->setCoords(0, d.run->device_total_bytes);
      line->point2->setCoords(1, d.run->device_total_bytes);
      line->setPen(QPen(QColor(200, 0, 0), 1.5, Qt::DashDotLine));
    }
  } else {
    add(PlotKind::Memory, "total", solid, steps, sx, [](const RunSeries& r, int i) { return r.mem_total[i]; }, false);
  }
  add(PlotKind::LearningRate, "lr", solid, steps, sx, [](const RunSeries& r, int i) { return r.lr[i]; }, false);
  if (d.run->has_sparsity())
    add(PlotKind::Compression, "sparsity %", solid, steps, sx, [](const RunSeries& r, int i) { return r.sparsity[i]; }, false)
        ->setLineStyle(QCPGraph::lsStepLeft);
  if (d.run->has_bits())
    add(PlotKind::Compression, "bits/weight", QPen(c.lighter(140), 1.4, Qt::DashLine), steps, sx,
        [](const RunSeries& r, int i) { return r.bits[i]; }, false, true)
        ->setLineStyle(QCPGraph::lsStepLeft);
  if (d.run->has_loss_scale()) {
    add(PlotKind::LossScale, "loss scale", solid, steps, sx, [](const RunSeries& r, int i) { return r.loss_scale[i]; }, false);
    add(PlotKind::LossScale, "skipped", QPen(c.lighter(150), 1.2, Qt::DashLine), steps, sx,
        [](const RunSeries& r, int i) { return r.skipped_steps[i]; }, false, true);
  }
  (void)index;
}

void PlotPanel::add_marker(double step, const QString& label, const QColor& color_in) {
  // On a dark background the marker colour is lightened so that line and label stay readable.
  const bool dark = palette().color(QPalette::Base).lightness() < 128;
  const QColor color = dark && color_in.lightness() < 150 ? color_in.lighter(170) : color_in;
  for (auto* p : m_plots) {
    auto* line = new QCPItemStraightLine(p);
    line->setObjectName("marker");
    line->point1->setTypeX(QCPItemPosition::ptPlotCoords);
    line->point1->setCoords(step, 0);
    line->point2->setCoords(step, 1);
    line->setPen(QPen(color, 1.2, Qt::DashLine));
    auto* text = new QCPItemText(p);
    text->setObjectName("marker");
    text->position->setTypeX(QCPItemPosition::ptPlotCoords);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setAxes(p->xAxis, p->yAxis);
    text->position->setAxisRect(p->axisRect());
    text->position->setCoords(step, 0.03);
    text->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
    text->setText(" " + label);
    QFont f = font();
    f.setPointSizeF(std::max(7.0, f.pointSizeF() - 1.5));
    text->setFont(f);
    text->setColor(color);
    text->setClipToAxisRect(true);
  }
}

int PlotPanel::marker_count(PlotKind k) const {
  int n = 0;
  QCustomPlot* p = plot(k);
  for (int i = 0; i < p->itemCount(); ++i)
    if (qobject_cast<QCPItemStraightLine*>(p->item(i)) && p->item(i)->objectName() == "marker") ++n;
  return n;
}

QCPGraph* PlotPanel::graph(PlotKind k, const QString& name) const {
  QCustomPlot* p = plot(k);
  for (int i = 0; i < p->graphCount(); ++i)
    if (p->graph(i)->name() == name) return p->graph(i);
  return nullptr;
}

// Whether a drawn run needs graphs it does not have yet: a run that turned fp16 (or started
// reporting MFU, sparsity or bits) mid-way, or the primary run's device capacity line.
bool PlotPanel::needs_rebuild() const {
  for (const auto& d : m_drawn) {
    bool has_ls = false, has_mfu = false, has_sp = false, has_bits = false;
    for (const auto& t : d.tracks) {
      if (t.graph->parentPlot() == plot(PlotKind::LossScale)) has_ls = true;
      if (t.graph->name().endsWith("MFU %")) has_mfu = true;
      if (t.graph->name().endsWith("sparsity %")) has_sp = true;
      if (t.graph->name().endsWith("bits/weight")) has_bits = true;
    }
    if ((!has_ls && d.run->has_loss_scale()) || (!has_mfu && d.run->has_mfu()) ||
        (!has_sp && d.run->has_sparsity()) || (!has_bits && d.run->has_bits()))
      return true;
    if (d.primary && d.run->device_total_bytes > 0) {
      bool have = false;
      for (int i = 0; i < plot(PlotKind::Memory)->itemCount(); ++i)
        have = have || plot(PlotKind::Memory)->item(i)->objectName() == "capacity";
      if (!have) return true;
    }
  }
  return false;
}

// Brings one graph up to its run's data: smoothing (a debiased exponential moving average with
// factor m_smoothing) of the new points, then either appending them or rebuilding the min/max
// envelope of the visible range (plot_decimation.h decides which).
void PlotPanel::update_track(Track& t, const RunSeries& r) {
  const double a = m_smoothing;
  const int n = t.count(r);
  if (n == 0) return;
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

// Titles carry what does not fit in the legend: the device capacity, the recent throughput.
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
      if (n) s += QString("  (%1 samples/s, last 50 steps)").arg(QLocale::system().toString(sum / n, 'f', 0));
    }
    t->setText(s);
  }
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
      add_marker(e.step, (m_drawn.size() > 1 ? r.name + ": " : QString()) + e.label, d.primary ? QColor(120, 60, 200) : d.run->color);
    }
  }
  update_titles();
  if (m_follow) fit_axes();
  for (auto* p : m_plots) layout_marker_labels(p);
  m_range_dirty = false;
  m_in_refresh = false;
  update_visibility();
  for (auto* p : m_plots)
    if (p->isVisible() || !isVisible()) p->replot(QCustomPlot::rpQueuedReplot);
}

void PlotPanel::update_visibility() {
  bool ls = false, mfu = false, sp = false, bits = false;
  for (const auto& d : m_drawn) {
    ls = ls || d.run->has_loss_scale();
    mfu = mfu || d.run->has_mfu();
    sp = sp || d.run->has_sparsity();
    bits = bits || d.run->has_bits();
  }
  plot(PlotKind::Throughput)->yAxis2->setVisible(mfu);
  plot(PlotKind::LossScale)->yAxis2->setVisible(ls);
  plot(PlotKind::Compression)->yAxis->setVisible(sp || !bits);
  plot(PlotKind::Compression)->yAxis2->setVisible(bits);
  // The plots that apply, two a row; an odd last one spans the row. Loss scale (fp16) and
  // compression appear only when a run has them.
  QVector<PlotKind> shown = {PlotKind::Loss, PlotKind::Accuracy, PlotKind::Throughput, PlotKind::Memory,
                             PlotKind::LearningRate};
  if (ls) shown << PlotKind::LossScale;
  if (sp || bits) shown << PlotKind::Compression;
  QVector<PlotKind> layout_now;
  for (int i = 0; i < m_grid->count(); ++i)
    for (int k = 0; k < kPlotCount; ++k)
      if (m_grid->itemAt(i)->widget() == m_plots[k]) layout_now << static_cast<PlotKind>(k);
  if (layout_now != shown) {
    for (auto* p : m_plots) m_grid->removeWidget(p);
    for (int i = 0; i < shown.size(); ++i) {
      const bool span = i == shown.size() - 1 && i % 2 == 0;
      m_grid->addWidget(plot(shown[i]), i / 2, i % 2, 1, span ? 2 : 1);
    }
    for (int r = 0; r < 4; ++r) m_grid->setRowStretch(r, r < 2 ? 3 : (r * 2 < shown.size() ? 2 : 0));
  }
  for (int k = 0; k < kPlotCount; ++k) m_plots[k]->setVisible(shown.contains(static_cast<PlotKind>(k)));
  for (auto* p : m_plots) p->legend->setVisible(p->graphCount() > 0);
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

bool PlotPanel::eventFilter(QObject* o, QEvent* e) {
  if (e->type() == QEvent::ContextMenu) {
    auto* p = qobject_cast<QCustomPlot*>(o);
    if (!p) return false;
    QMenu menu(this);
    QAction* log = menu.addAction("Logarithmic y axis");
    log->setCheckable(true);
    log->setChecked(p->yAxis->scaleType() == QCPAxis::stLogarithmic);
    QAction* fit = menu.addAction("Fit to data");
    QAction* save = menu.addAction("Save image...");
    QAction* chosen = menu.exec(static_cast<QContextMenuEvent*>(e)->globalPos());
    if (chosen == log) {
      if (p == plot(PlotKind::Loss)) {
        set_log_loss(log->isChecked());
      } else {
        p->yAxis->setScaleType(log->isChecked() ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
        if (p != plot(PlotKind::Memory))
          p->yAxis->setTicker(log->isChecked() ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                                               : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
        refresh();
      }
    } else if (chosen == fit) {
      set_follow(true);
      refresh();
    } else if (chosen == save) {
      const QString f = QFileDialog::getSaveFileName(this, "Save plot", p->objectName() + ".png",
                                                     "PNG (*.png);;PDF (*.pdf);;SVG (*.svg)");
      if (f.endsWith(".pdf", Qt::CaseInsensitive))
        p->savePdf(f);
      else if (!f.isEmpty())
        p->savePng(f, 0, 0, 2.0);
    }
    return true;
  }
  return QWidget::eventFilter(o, e);
}

void PlotPanel::show_hover(QCustomPlot* p, const QPoint& pos) {
  if (p->graphCount() == 0) return;
  QCPGraph* best = nullptr;
  double best_dist = 1e9;
  int best_index = -1;
  for (int i = 0; i < p->graphCount(); ++i) {
    QCPGraph* g = p->graph(i);
    if (!g->visible() || g->dataCount() == 0) continue;
    // nearest point by key, then by pixel distance
    const double key = g->keyAxis()->pixelToCoord(pos.x());
    auto it = g->data()->findBegin(key, true);
    for (auto j = it; j != g->data()->constEnd() && j - it < 2; ++j) {
      const QPointF px = g->coordsToPixels(j->key, j->value);
      const double dist = std::hypot(px.x() - pos.x(), px.y() - pos.y());
      if (dist < best_dist) {
        best_dist = dist;
        best = g;
        best_index = static_cast<int>(j - g->data()->constBegin());
      }
    }
  }
  if (!best || best_dist > 40) {
    QToolTip::hideText();
    return;
  }
  const auto d = best->data()->at(best_index);
  QString value;
  if (p == plot(PlotKind::Memory) && best->valueAxis() == p->yAxis)
    value = format_bytes(d->value);
  else
    value = QString::number(d->value, 'g', 5);
  QString text = QString("<b>%1</b><br>step %2: %3").arg(best->name().toHtmlEscaped()).arg(d->key).arg(value);
  // The memory stack: show the category's own size too.
  QToolTip::showText(p->mapToGlobal(pos), text, p);
}

}  // namespace trainlab::app
