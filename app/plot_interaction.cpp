// PlotPanel's interaction: zoom and pan (which end Follow only when they move the view), x axes
// linked across the plots, the crosshair with every plot's values at the hovered x, and the
// context menu of a plot.
#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <qcustomplot.h>

#include "plot_decimation.h"
#include "plot_panel.h"
#include "train/eta.h"

namespace trainlab::app {

void PlotPanel::connect_interaction(QCustomPlot* p) {
  connect(p, &QCustomPlot::mouseWheel, this, [this] { set_follow(false); });
  connect(p, &QCustomPlot::mousePress, this, [this, p](QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    m_press_x = p->xAxis->range();
    m_press_y = p->yAxis->range();
  });
  connect(p, &QCustomPlot::mouseMove, this, [this, p](QMouseEvent* e) {
    if (e->buttons() & Qt::LeftButton) {
      // A click leaves Follow as it is; a drag that moved the view ends it.
      if (m_follow && (p->xAxis->range() != m_press_x || p->yAxis->range() != m_press_y)) set_follow(false);
      return;
    }
    if (p->axisRect()->rect().contains(e->pos()))
      set_crosshair(p->xAxis->pixelToCoord(e->pos().x()));
    else
      clear_crosshair();
  });
  connect(p, &QCustomPlot::mouseRelease, this, [this, p](QMouseEvent* e) {
    if (e->button() == Qt::LeftButton && m_follow && (p->xAxis->range() != m_press_x || p->yAxis->range() != m_press_y))
      set_follow(false);
  });
  connect(p, &QCustomPlot::mouseDoubleClick, this, [this] {
    set_follow(true);
    refresh();
  });
  connect(p->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this, p] {
    link_x(p);
    if (m_in_refresh || m_follow) return;
    m_range_dirty = true;  // a zoom or pan: rebuild the envelopes for the new view
    m_dirty = true;
  });
}

// Zooming or panning one plot moves the x axis of every other plot with it.
void PlotPanel::link_x(QCustomPlot* source) {
  if (m_linking) return;
  m_linking = true;
  const QCPRange r = source->xAxis->range();
  for (auto* p : m_plots)
    if (p != source && p->xAxis->range() != r) {
      p->xAxis->setRange(r);
      if (!m_in_refresh) p->replot(QCustomPlot::rpQueuedReplot);
    }
  m_linking = false;
}

// The values of a plot's curves at x (the point nearest to it of each), one line each, under a
// line naming the step (and the elapsed time).
QString PlotPanel::readout_text(QCustomPlot* p, double x) const {
  QStringList lines;
  QString head;
  for (const auto& d : m_drawn) {
    const RunSeries& r = *d.run;
    for (const auto& t : d.tracks) {
      if (t.raw || t.graph->parentPlot() != p || !t.graph->visible()) continue;
      const int n = t.count(r);
      if (n == 0) continue;
      int i = first_index_at_or_after(n, [&](int j) { return t.x(r, j); }, x);
      if (i == n || (i > 0 && x - t.x(r, i - 1) < t.x(r, i) - x)) --i;
      const bool smoothed = t.smooth && m_smoothing > 0 && i < t.smoothed.size();
      const double v = smoothed ? t.smoothed[i] : t.y(r, i);
      const bool bytes = p == plot(PlotKind::Memory) && t.graph->valueAxis() == p->yAxis;
      const QString number = std::fabs(v) >= 1e4 ? QLocale::system().toString(v, 'f', 0) : QString::number(v, 'g', 4);
      lines << t.graph->name() + ": " + (bytes ? format_bytes(v) : number);
      if (head.isEmpty() && t.count(r) == r.size())
        head = QString("step %1 · %2").arg(r.step[i]).arg(QString::fromStdString(duration_text(r.elapsed_s[i])));
    }
  }
  if (lines.isEmpty()) return {};
  if (!head.isEmpty()) lines.prepend(head);
  return lines.join("\n");
}

void PlotPanel::set_crosshair(double x) {
  m_crosshair = x;
  for (auto* p : m_plots) {
    if (!p->isVisible() && isVisible()) continue;
    QCPItemStraightLine* line = nullptr;
    QCPItemText* text = nullptr;
    QList<QCPAbstractItem*> old_tracers;
    for (int i = 0; i < p->itemCount(); ++i) {
      QCPAbstractItem* it = p->item(i);
      if (it->objectName() == "crosshair_line") line = qobject_cast<QCPItemStraightLine*>(it);
      if (it->objectName() == "crosshair_text") text = qobject_cast<QCPItemText*>(it);
      if (it->objectName() == "crosshair_tracer") old_tracers << it;
    }
    for (auto* it : old_tracers) p->removeItem(it);
    if (!line) {
      line = new QCPItemStraightLine(p);
      line->setObjectName("crosshair_line");
      line->setLayer("crosshair");
      line->setPen(QPen(palette().color(QPalette::WindowText), 1, Qt::DotLine));
      text = new QCPItemText(p);
      text->setObjectName("crosshair_text");
      text->setLayer("crosshair");
      text->position->setType(QCPItemPosition::ptAxisRectRatio);
      text->position->setAxisRect(p->axisRect());
      text->position->setCoords(0.01, 0.02);
      text->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
      text->setTextAlignment(Qt::AlignLeft);
      text->setPadding(QMargins(4, 2, 4, 2));
      QFont f = font();
      f.setPointSizeF(std::max(7.0, f.pointSizeF() - 1.5));
      text->setFont(f);
    }
    QColor box = palette().color(QPalette::Base);
    box.setAlpha(225);
    text->setBrush(box);
    text->setColor(palette().color(QPalette::WindowText));
    line->point1->setCoords(x, 0);
    line->point2->setCoords(x, 1);
    text->setText(readout_text(p, x));
    line->setVisible(true);
    text->setVisible(!text->text().isEmpty());
    for (int g = 0; g < p->graphCount(); ++g) {
      QCPGraph* gr = p->graph(g);
      if (!gr->visible() || gr->dataCount() == 0 || gr->name().endsWith(" (raw)")) continue;
      auto* tracer = new QCPItemTracer(p);
      tracer->setObjectName("crosshair_tracer");
      tracer->setLayer("crosshair");
      tracer->setGraph(gr);
      tracer->setGraphKey(x);
      tracer->setStyle(QCPItemTracer::tsCircle);
      tracer->setSize(6);
      tracer->setPen(QPen(gr->pen().color(), 1.5));
    }
    p->layer("crosshair")->replot();
  }
}

void PlotPanel::clear_crosshair() {
  if (std::isnan(m_crosshair)) return;
  m_crosshair = std::nan("");
  for (auto* p : m_plots) {
    QList<QCPAbstractItem*> gone;
    for (int i = 0; i < p->itemCount(); ++i)
      if (p->item(i)->objectName().startsWith("crosshair")) gone << p->item(i);
    for (auto* it : gone) p->removeItem(it);
    p->layer("crosshair")->replot();
  }
}

QString PlotPanel::readout(PlotKind k) const {
  QCustomPlot* p = plot(k);
  for (int i = 0; i < p->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "crosshair_text" && t->visible())
      return t->text();
  return {};
}

void PlotPanel::leaveEvent(QEvent* e) {
  clear_crosshair();
  QWidget::leaveEvent(e);
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
  if (e->type() == QEvent::Leave && qobject_cast<QCustomPlot*>(o)) clear_crosshair();
  return QWidget::eventFilter(o, e);
}

}  // namespace trainlab::app
