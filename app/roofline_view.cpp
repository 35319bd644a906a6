#include "roofline_view.h"

#include <QEvent>
#include <QLabel>
#include <QStackedLayout>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "plot_style.h"

namespace trainlab::app {

namespace {

// "12.3 TFLOP/s", "850 GFLOP/s"; "1.2 TB/s".
QString rate(double v, const char* unit) {
  const char* prefix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) v /= 1000, ++i;
  return QString::number(v, 'g', 3) + " " + prefix[i] + unit;
}

// Moves the kernels' labels (the plot's text items, each knowing its kernel's point and radius:
// draw()) apart and returns where they are: each takes the first place beside its point (right,
// left, below, above; then one to five lines up or down, right or left, tied to it by a line) where it overlaps no label
// placed before it and no other kernel's point and stays inside the axes. A label with no such
// place is hidden: clustered kernels (a transformer's LayerNorm and GELU passes at one intensity)
// would otherwise print over each other; hovering the point still names it.
std::vector<QRectF> place_labels_apart(QCustomPlot* plot) {
  const QRectF inside = plot->axisRect()->rect();
  std::vector<QCPItemText*> labels;
  std::vector<QRectF> discs;  // the kernels' points, in the labels' order
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) {
      const QPointF at = t->property("point").toPointF();
      const double r = t->property("radius").toDouble();
      const QPointF c(plot->xAxis->coordToPixel(at.x()), plot->yAxis->coordToPixel(at.y()));
      labels.push_back(t);
      discs.emplace_back(c - QPointF(r, r), QSizeF(2 * r, 2 * r));
    }
  std::vector<QRectF> taken;
  for (size_t i = 0; i < labels.size(); ++i) {
    QCPItemText* t = labels[i];
    const QPointF at = t->property("point").toPointF();
    const int pad = static_cast<int>(t->property("radius").toDouble()) + 3;  // the point's radius and a gap
    const double line = QFontMetrics(t->font()).height() + 2;
    struct Place {
      Qt::Alignment align;
      QMargins margins;
      double dy;  // pixels below the point
    };
    const Place right{Qt::AlignLeft | Qt::AlignVCenter, QMargins(pad, 0, 0, 0), 0};
    const Place left{Qt::AlignRight | Qt::AlignVCenter, QMargins(0, 0, pad, 0), 0};
    std::vector<Place> places{right, left, {Qt::AlignHCenter | Qt::AlignTop, QMargins(0, pad, 0, 0), 0},
                              {Qt::AlignHCenter | Qt::AlignBottom, QMargins(0, 0, 0, pad), 0}};
    for (const double k : {-1.0, 1.0, -2.0, 2.0, -3.0, 3.0, -4.0, 4.0, -5.0, 5.0})
      for (Place p : {right, left}) places.push_back({p.align, p.margins, k * line});
    auto put = [&](const Place& p) {
      t->setPositionAlignment(p.align);
      t->setPadding(p.margins);
      t->position->setCoords(at.x(), plot->yAxis->pixelToCoord(plot->yAxis->coordToPixel(at.y()) + p.dy));
      return QRectF(t->topLeft->pixelPosition(), t->bottomRight->pixelPosition()).normalized();
    };
    auto clear = [&](const QRectF& rect) {
      if (!inside.contains(rect)) return false;
      if (std::any_of(taken.begin(), taken.end(), [&](const QRectF& o) { return o.intersects(rect); })) return false;
      for (size_t j = 0; j < discs.size(); ++j)
        if (j != i && discs[j].intersects(rect)) return false;
      return true;
    };
    const auto found = std::find_if(places.begin(), places.end(), [&](const Place& p) { return clear(put(p)); });
    t->setVisible(found != places.end());
    auto* leader = qobject_cast<QCPItemLine*>(t->property("leader").value<QObject*>());
    if (found == places.end()) {
      put(right);
    } else {
      taken.push_back(put(*found));
      // A label moved up or down is tied to its point by a thin line to the near end of its text.
      const QRectF& r = taken.back();
      const double x = found->align & Qt::AlignLeft ? r.left() + pad : r.right() - pad;
      if (leader) leader->end->setCoords(x, r.center().y());
    }
    if (leader) leader->setVisible(found != places.end() && found->dy != 0);
  }
  return taken;
}

// The colour of a kernel by what bounds it: memory-bound warm, compute-bound cool.
QColor bound_color(const RooflinePoint& p) { return p.memory_bound ? run_color(1) : run_color(0); }

}  // namespace

std::optional<Roofline> roofline_of(const RunSeries& run, QString* why) {
  std::vector<KernelTime> kernels;
  for (const auto& k : run.kernels) kernels.push_back({k.name.toStdString(), k.ms, k.calls, k.flops, k.bytes});
  if (kernels.empty()) {
    *why = "No kernel times for " + run.name +
           ": turn on Device → Kernel timing (device.kernel_timing) before starting a run, on the CPU or a GPU. "
           "Each timed kernel is then placed here by its arithmetic intensity.";
    return std::nullopt;
  }
  if (!run.roofline) {
    *why = "No measured roofs for " + run.name +
           ": the run was made with device.calibration off (or by an older TrainLab). Run `trainlab-cli calibrate` "
           "and train with device.calibration cached.";
    return std::nullopt;
  }
  try {
    return build_roofline(kernels, *run.roofline, run.precision.isEmpty() ? "fp32" : run.precision.toStdString());
  } catch (const std::exception& e) {
    *why = "No roofline for " + run.name + ": " + QString::fromStdString(e.what());
    return std::nullopt;
  }
}

RooflineView::RooflineView(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 6, 6, 6);
  auto* holder = new QWidget(this);
  m_stack = new QStackedLayout(holder);
  m_empty = new QLabel(holder);
  m_empty->setObjectName("roofline_message");
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_plot = new QCustomPlot(holder);
  m_plot->setObjectName("roofline_plot");
  m_plot->setMinimumSize(320, 280);  // 420 px made the window wider than a 1280 px screen (issue 41)
  m_plot->plotLayout()->insertRow(0);
  auto* title = new QCPTextElement(m_plot, "Roofline", QFont(font().family(), font().pointSize(), QFont::DemiBold));
  m_plot->plotLayout()->addElement(0, 0, title);
  for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis}) {
    a->setScaleType(QCPAxis::stLogarithmic);
    a->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    a->setNumberFormat("eb");
    a->setNumberPrecision(0);
  }
  // The roofs' legend below the plot, in as many columns as fit (as the memory plot's): inside the
  // axes it hid kernels (one above the memory roof sat under it). The kernels' labels are moved
  // apart at every layout, the dock's size being known only then.
  m_plot->axisRect()->insetLayout()->take(m_plot->legend);
  m_plot->axisRect()->insetLayout()->simplify();
  m_plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  m_plot->legend->setWrap(2);
  m_plot->plotLayout()->addElement(2, 0, m_plot->legend);
  m_plot->plotLayout()->setRowStretchFactor(2, 0.001);
  m_plot->legend->setMargins(QMargins(6, 2, 6, 4));
  connect(m_plot, &QCustomPlot::afterLayout, m_plot, [this] {
    fit_legend_columns(m_plot);
    m_label_rects = place_labels_apart(m_plot);
  });
  m_plot->xAxis->setLabel("arithmetic intensity (FLOP / byte)");
  m_plot->yAxis->setLabel("achieved FLOP/s");
  style_plot(m_plot, palette());
  m_plot->setMouseTracking(true);
  connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    const QString tip = tooltip_at(e->position());
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(e->globalPosition().toPoint(), tip, m_plot);
  });
  m_stack->addWidget(m_empty);
  m_stack->addWidget(m_plot);
  v->addWidget(holder, 1);
  refresh();
}

void RooflineView::set_run(std::shared_ptr<RunSeries> run) {
  m_run = std::move(run);
  m_shown_steps = -1;
  refresh();
}

QString RooflineView::message() const { return m_stack->currentWidget() == m_empty ? m_empty->text() : QString(); }

QString RooflineView::plot_title() const {
  auto* t = qobject_cast<QCPTextElement*>(m_plot->plotLayout()->element(0, 0));
  return t ? t->text() : QString();
}

void RooflineView::refresh() {
  QString why = "No run selected. Start a run with Device → Kernel timing on, or reopen one from the runs table.";
  std::optional<Roofline> r;
  if (m_run) r = roofline_of(*m_run, &why);
  if (!r) {
    m_placed.clear();
    m_empty->setText(why);
    m_stack->setCurrentWidget(m_empty);
    m_shown_steps = -1;
    return;
  }
  m_stack->setCurrentWidget(m_plot);
  if (m_shown_steps == m_run->kernel_steps) return;
  m_shown_steps = m_run->kernel_steps;
  draw(*r);
}

void RooflineView::draw_roofs(const Roofline& r, double x0, double x1) {
  const double bw = r.bandwidth_bytes_per_s;
  double top = r.peak_flops_per_s;
  for (const CalibratedPeak& p : r.peaks) top = std::max(top, p.tflops * 1e12);
  const QColor text = palette().color(QPalette::Text);
  // The roofs are named in the legend (top left: above the memory roof no kernel can be), not
  // beside their lines: roofs of nearly equal peaks would print their names over each other.
  auto* mem = m_plot->addGraph();
  mem->setName("memory " + rate(bw, "B/s"));
  mem->setPen(QPen(text, 2));
  mem->setData(QVector<double>{x0, top / bw}, QVector<double>{bw * x0, top});
  for (const CalibratedPeak& p : r.peaks) {
    const double P = p.tflops * 1e12;
    const QString label = QString::fromStdString(Calibration::precision_label(p.dtype, p.mode));
    const bool own = label.toStdString() == r.peak_label;
    auto* g = m_plot->addGraph();
    g->setName(label + " " + rate(P, "FLOP/s") + (own ? " (this run)" : ""));
    QColor c = text;
    if (!own) c.setAlpha(110);  // the other precisions' roofs, for comparison
    const QPen pen(c, own ? 2 : 1, own ? Qt::SolidLine : Qt::DashLine);
    g->setPen(pen);
    g->setData(QVector<double>{P / bw, x1}, QVector<double>{P, P});
  }
  m_plot->legend->setVisible(true);
}

void RooflineView::draw(const Roofline& r) {
  m_plot->clearGraphs();
  m_plot->clearItems();
  m_placed.clear();
  for (const RooflinePoint& p : r.points)
    if (p.placed()) m_placed.push_back(p);
  double lo = r.ridge() > 0 ? r.ridge() : 1.0, hi = lo, ylo = r.peak_flops_per_s;
  for (const RooflinePoint& p : m_placed) {
    lo = std::min(lo, p.intensity);
    hi = std::max(hi, p.intensity);
    ylo = std::min(ylo, p.flops_per_s);
  }
  const double x0 = lo / 4, x1 = hi * 8;
  draw_roofs(r, x0, x1);
  double top = r.peak_flops_per_s;
  for (const CalibratedPeak& p : r.peaks) top = std::max(top, p.tflops * 1e12);
  for (const RooflinePoint& p : m_placed) {
    auto* g = m_plot->addGraph();
    g->setName(QString::fromStdString(p.name));
    g->removeFromLegend();  // named by its label
    g->setLineStyle(QCPGraph::lsNone);
    const double size = 6 + 26 * std::sqrt(p.time_share);
    QColor fill = bound_color(p);
    fill.setAlpha(150);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, bound_color(p), fill, size));
    g->setData(QVector<double>{p.intensity}, QVector<double>{p.flops_per_s});
    auto* t = new QCPItemText(m_plot);
    t->position->setCoords(p.intensity, p.flops_per_s);
    t->setProperty("point", QPointF(p.intensity, p.flops_per_s));  // place_labels_apart moves the label
    t->setProperty("radius", size / 2);
    auto* leader = new QCPItemLine(m_plot);  // shown when the label moves off its point's line
    leader->start->setCoords(p.intensity, p.flops_per_s);
    leader->end->setType(QCPItemPosition::ptAbsolute);
    QColor lc = palette().color(QPalette::Text);
    lc.setAlpha(120);
    leader->setPen(QPen(lc, 1));
    leader->setVisible(false);
    t->setProperty("leader", QVariant::fromValue<QObject*>(leader));
    t->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    t->setPadding(QMargins(static_cast<int>(size / 2) + 3, 0, 0, 0));
    t->setText(QString::fromStdString(p.name));
    t->setColor(palette().color(QPalette::Text));
  }
  m_plot->xAxis->setRange(x0, x1);
  m_plot->yAxis->setRange(ylo / 6, top * 3);
  double total_ms = 0;
  for (const RooflinePoint& p : r.points) total_ms += p.ms;
  auto* title = qobject_cast<QCPTextElement*>(m_plot->plotLayout()->element(0, 0));
  // Three lines: a dock beside the plots is narrower than the whole sentence.
  title->setText(QString("Roofline of %1 (%3)\n%2\n%4 kernels placed, %5 ms of kernel time")
                     .arg(m_run->name, QString::fromStdString(r.device), QString::fromStdString(r.precision))
                     .arg(m_placed.size())
                     .arg(QLocale::system().toString(total_ms, 'f', 1)));
  m_plot->replot();
}

QString RooflineView::tooltip_at(const QPointF& pos) const {
  const RooflinePoint* best = nullptr;
  double best_d = 14.0;
  for (const RooflinePoint& p : m_placed) {
    const double x = m_plot->xAxis->coordToPixel(p.intensity), y = m_plot->yAxis->coordToPixel(p.flops_per_s);
    const double d = std::hypot(x - pos.x(), y - pos.y());
    if (d <= best_d) best_d = d, best = &p;
  }
  if (!best) return {};
  return QString("<b>%1</b><br>%2 achieved, %3<br>intensity %4 FLOP/byte (%5-bound)<br>%6 % of its roof (%7)<br>"
                 "%8 % of the kernel time, %9 calls")
      .arg(QString::fromStdString(best->name).toHtmlEscaped(), rate(best->flops_per_s, "FLOP/s"),
           rate(best->bytes_per_s, "B/s"), QString::number(best->intensity, 'g', 3),
           best->memory_bound ? "memory" : "compute", QString::number(100 * best->of_roof, 'f', 1),
           rate(best->roof_flops_per_s, "FLOP/s"), QString::number(100 * best->time_share, 'f', 1))
      .arg(best->calls);
}

void RooflineView::render(QCPPainter* painter, const QRectF& target) {
  render_plot(m_plot, painter, target);  // lays the plot out at the target's size: the labels are placed for it
  m_rendered_labels = m_label_rects;
}

void RooflineView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange && m_plot) {
    style_plot(m_plot, palette());
    m_shown_steps = -1;
    refresh();
  }
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
