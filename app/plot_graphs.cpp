// PlotPanel's graphs: which curves each plot gets for a run (build_graphs), the faint raw copy of
// every smoothed curve, the event markers, and the x coordinate of a step on the chosen x axis.
#include <QApplication>
#include <qcustomplot.h>

#include "plot_decimation.h"
#include "plot_panel.h"

namespace trainlab::app {

double PlotPanel::x_of_step(const RunSeries& r, double step) const {
  if (m_x_axis == XAxis::Step || r.size() == 0) return step;
  const int i = first_index_at_or_after(r.size(), [&r](int j) { return r.step[j]; }, step);
  return r.elapsed_s[std::min(i, r.size() - 1)];
}

// One curve of a run: per training step, or per validation point (per_step false). A smoothed
// curve gets its raw data as a faint curve behind it (not in the legend; hidden at smoothing 0).
QCPGraph* PlotPanel::add_track(Drawn& d, PlotKind k, const QString& name, const QPen& pen, bool per_step, Value y,
                               bool smooth, bool right_axis) {
  const QString prefix = m_drawn.size() > 1 ? d.run->name + " · " : QString();
  QCustomPlot* p = plot(k);
  auto make = [&](const QString& n, const QPen& pn, bool smoothed, bool raw) {
    QCPGraph* g = p->addGraph(p->xAxis, right_axis ? p->yAxis2 : p->yAxis);
    g->setName(n);
    g->setPen(pn);
    g->setAdaptiveSampling(true);
    Track t;
    t.graph = g;
    if (per_step) {
      t.count = [](const RunSeries& r) { return r.size(); };
      if (m_x_axis == XAxis::Time)
        t.x = [](const RunSeries& r, int i) { return r.elapsed_s[i]; };
      else
        t.x = [](const RunSeries& r, int i) { return r.step[i]; };
    } else {
      t.count = [](const RunSeries& r) { return static_cast<int>(r.val_step.size()); };
      t.x = [this](const RunSeries& r, int i) { return x_of_step(r, r.val_step[i]); };
    }
    t.y = y;
    t.smooth = smoothed;
    t.raw = raw;
    d.tracks.push_back(std::move(t));
    return g;
  };
  if (smooth) {
    QColor faint = pen.color();
    faint.setAlpha(60);
    QCPGraph* raw = make(prefix + name + " (raw)", QPen(faint, 1.0), false, true);
    raw->setLayer("behind");
    raw->removeFromLegend();
    raw->setVisible(m_smoothing > 0);
  }
  return make(prefix + name, pen, smooth, false);
}

void PlotPanel::build_graphs(Drawn& d) {
  const bool overlay = m_drawn.size() > 1;
  const QColor c = d.run->color;
  QPen solid(c, 1.6);
  QPen val_pen(c.darker(130), 1.4, Qt::DashLine);
  QColor val_color = overlay ? c : QColor(255, 127, 14);
  if (!overlay) val_pen = QPen(val_color, 1.6);
  QCPScatterStyle dots(QCPScatterStyle::ssDisc, val_color, 5);
  auto val = [&](PlotKind k, Value y) {
    QCPGraph* g = add_track(d, k, "validation", val_pen, false, std::move(y), false);
    g->setScatterStyle(dots);
    g->setLayer("behind");  // dense validation points must not hide the training curve
  };

  add_track(d, PlotKind::Loss, "train", solid, true, [](const RunSeries& r, int i) { return r.loss[i]; }, true);
  val(PlotKind::Loss, [](const RunSeries& r, int i) { return r.val_loss[i]; });
  add_track(d, PlotKind::Accuracy, "train", solid, true, [](const RunSeries& r, int i) { return 100 * r.train_acc[i]; }, true);
  val(PlotKind::Accuracy, [](const RunSeries& r, int i) { return 100 * r.val_acc[i]; });
  add_track(d, PlotKind::Throughput, d.run->throughput_unit(), solid, true,
            [](const RunSeries& r, int i) { return r.samples_per_s[i]; }, true);
  if (d.run->has_mfu())
    add_track(d, PlotKind::Throughput, "MFU %", QPen(c.lighter(140), 1.2, Qt::DotLine), true,
              [](const RunSeries& r, int i) { return 100 * r.mfu[i]; }, true, true);
  build_memory_graphs(d);
  add_track(d, PlotKind::LearningRate, "lr", solid, true, [](const RunSeries& r, int i) { return r.lr[i]; }, false);
  if (d.run->has_sparsity())
    add_track(d, PlotKind::Compression, "sparsity %", solid, true, [](const RunSeries& r, int i) { return r.sparsity[i]; },
              false)
        ->setLineStyle(QCPGraph::lsStepLeft);
  if (d.run->has_bits())
    add_track(d, PlotKind::Compression, "bits/weight", QPen(c.lighter(140), 1.4, Qt::DashLine), true,
              [](const RunSeries& r, int i) { return r.bits[i]; }, false, true)
        ->setLineStyle(QCPGraph::lsStepLeft);
  if (d.run->has_loss_scale()) {
    add_track(d, PlotKind::LossScale, "loss scale", solid, true, [](const RunSeries& r, int i) { return r.loss_scale[i]; },
              false);
    add_track(d, PlotKind::LossScale, "skipped", QPen(c.lighter(150), 1.2, Qt::DashLine), true,
              [](const RunSeries& r, int i) { return static_cast<double>(r.skipped_steps[i]); }, false, true);
  }
}

// The memory plot: the primary run's categories stacked, the activations' and the total's
// predictions and the device capacity; an overlaid run's total as one line.
void PlotPanel::build_memory_graphs(Drawn& d) {
  if (!d.primary) {
    add_track(d, PlotKind::Memory, "total", QPen(d.run->color, 1.6), true,
              [](const RunSeries& r, int i) { return r.mem_total[i]; }, false);
    return;
  }
  QCPGraph* below = nullptr;
  for (size_t cat = 0; cat < kMemCategoryCount; ++cat) {
    const auto& v = d.run->mem[cat];
    // Categories that stay at zero (communication on one device) are left out of the stack.
    if (d.run->size() > 0 && std::none_of(v.begin(), v.end(), [](double b) { return b > 0; })) continue;
    QColor cc = category_color(cat);
    QCPGraph* g = add_track(d, PlotKind::Memory, mem_category_name(static_cast<MemCategory>(cat)), QPen(cc.darker(115), 1),
                            true, [cat](const RunSeries& r, int i) {
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
  // Activations against their prediction (plan/memory_model.h): drawn where the activations
  // band's top edge is when the prediction holds, i.e. on top of the measured categories below it.
  constexpr size_t act = static_cast<size_t>(MemCategory::Activations);
  add_track(d, PlotKind::Memory, "activations predicted", QPen(category_color(act).darker(140), 1.4, Qt::DotLine), true,
            [](const RunSeries& r, int i) {
              double s = r.act_predicted[i];
              for (size_t k = 0; k < act; ++k) s += r.mem[k][i];
              return s;
            }, false);
  add_track(d, PlotKind::Memory, "predicted", QPen(QApplication::palette().color(QPalette::Text), 1.6, Qt::DashLine), true,
            [](const RunSeries& r, int i) { return r.mem_predicted[i]; }, false);
  if (d.run->device_total_bytes > 0) {
    auto* line = new QCPItemStraightLine(plot(PlotKind::Memory));
    line->setObjectName("capacity");
    line->point1->setCoords(0, d.run->device_total_bytes);
    line->point2->setCoords(1, d.run->device_total_bytes);
    line->setPen(QPen(QColor(200, 0, 0), 1.5, Qt::DashDotLine));
  }
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

}  // namespace trainlab::app
