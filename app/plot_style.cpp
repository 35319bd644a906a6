#include "plot_style.h"

#include <algorithm>
#include <cmath>

#include "run_series.h"

namespace trainlab::app {

QColor run_color(int index) {
  static const QColor colors[] = {QColor(31, 119, 180), QColor(214, 39, 40),  QColor(44, 160, 44),
                                  QColor(148, 103, 189), QColor(255, 127, 14), QColor(23, 190, 207),
                                  QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127),
                                  QColor(188, 189, 34)};
  return colors[index % 10];
}

QColor category_color(size_t c) {
  static const QColor colors[] = {QColor(78, 121, 167), QColor(242, 142, 43), QColor(225, 87, 89),
                                  QColor(118, 183, 178), QColor(89, 161, 79), QColor(176, 122, 161)};
  return colors[c % 6];
}

double BytesTicker::getTickStep(const QCPRange& range) {
  double unit = 1;
  while (range.size() / unit >= 1024 && unit < 1e15) unit *= 1024;
  const double raw = range.size() / unit / std::max(1, tickCount());
  double mag = 1;
  const double mant = getMantissa(raw, &mag);
  const double nice = mant < 1.5 ? 1 : mant < 3 ? 2 : mant < 7 ? 5 : 10;
  return nice * mag * unit;
}

QString BytesTicker::getTickLabel(double tick, const QLocale&, QChar, int) { return format_bytes(tick); }

QString CompactTicker::getTickLabel(double tick, const QLocale& l, QChar f, int p) {
  const double a = std::fabs(tick);
  if (a >= 1e9) return QString::number(tick / 1e9, 'g', 4) + "G";
  if (a >= 1e6) return QString::number(tick / 1e6, 'g', 4) + "M";
  if (a >= 1e4) return QString::number(tick / 1e3, 'g', 4) + "k";
  return QCPAxisTicker::getTickLabel(tick, l, f, p);
}

void style_plot(QCustomPlot* p, const QPalette& pal) {
  const QColor fg = pal.color(QPalette::WindowText), bg = pal.color(QPalette::Base);
  QColor grid = fg;
  grid.setAlpha(40);
  p->setBackground(bg);
  for (QCPAxis* ax : p->axisRect()->axes()) {
    ax->setBasePen(QPen(fg, 1));
    ax->setTickPen(QPen(fg, 1));
    ax->setSubTickPen(QPen(fg, 1));
    ax->setTickLabelColor(fg);
    ax->setLabelColor(fg);
    ax->grid()->setPen(QPen(grid, 1, Qt::DotLine));
    ax->grid()->setZeroLinePen(Qt::NoPen);
  }
  QColor lb = bg;
  lb.setAlpha(210);
  p->legend->setBrush(lb);
  p->legend->setBorderPen(QPen(grid));
  p->legend->setTextColor(fg);
}

// Marker labels near the right edge go to the left of their line, so that they are not clipped;
// a label that would overlap the one before it is left out (its dashed line stays, and zooming in
// shows it), so that dense markers (a gradual pruning schedule) stay readable.
void layout_marker_labels(QCustomPlot* p) {
  QVector<QPair<double, QCPItemText*>> labels;
  for (int i = 0; i < p->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "marker")
      labels.push_back({p->xAxis->coordToPixel(t->position->key()), t});
  std::stable_sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double last_right = -1e9;
  for (const auto& [px, t] : labels) {
    const double room = QFontMetrics(t->font()).horizontalAdvance(t->text()) + 8;
    const bool left_of_line = px + room > p->axisRect()->right();
    t->setPositionAlignment(Qt::AlignTop | (left_of_line ? Qt::AlignRight : Qt::AlignLeft));
    const double start = left_of_line ? px - room : px;
    const bool show = start > last_right;
    t->setVisible(show);
    if (show) last_right = start + room;
  }
}

void render_plot(QCustomPlot* p, QCPPainter* painter, const QRectF& target) {
  const double s = std::max(1.0, target.width() / 860.0);
  const int w = static_cast<int>(target.width() / s), h = static_cast<int>(target.height() / s);
  const QRect old_viewport = p->viewport();
  p->setViewport(QRect(0, 0, w, h));
  p->replot(QCustomPlot::rpImmediateRefresh);
  layout_marker_labels(p);
  painter->save();
  painter->translate(target.topLeft());
  painter->setMode(QCPPainter::pmVectorized);
  painter->setMode(QCPPainter::pmNoCaching);
  painter->scale(s, s);
  p->toPainter(painter, w, h);
  painter->restore();
  p->setViewport(old_viewport);
  layout_marker_labels(p);
  p->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace trainlab::app
