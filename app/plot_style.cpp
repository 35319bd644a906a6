#include "plot_style.h"

#include <algorithm>
#include <cmath>
#include <iterator>

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
                                  QColor(118, 183, 178), QColor(89, 161, 79), QColor(176, 122, 161),
                                  QColor(156, 117, 95)};
  return colors[c % std::size(colors)];
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
  // Titles in the plot's layout (the roofline's and the ranks' plots) were black on a dark Base.
  for (QCPLayoutElement* e : p->plotLayout()->elements(true))
    if (auto* t = qobject_cast<QCPTextElement*>(e)) t->setTextColor(fg);
}

// Marker labels near the right edge go to the left of their line, so that they are not clipped.
// Labels that would overlap go one row lower; dense markers (a gradual pruning schedule: eight
// "prune: 26.4% (gradual, per layer)" a few dozen pixels apart) first lose their repeated parts,
// the parenthesis and then a prefix the label before already showed ("prune: 26.4%", "46.2%",
// ...), so that each keeps a label in at most two rows (three stacked full labels read as one
// block of text over the curves). Where even the short ones do not fit, one that finds no free row
// of three is left out (its dashed line stays, and zooming in shows it). Runs after every layout of
// the plot (QCustomPlot::afterLayout), so a resize or zoom places them again.
namespace {
// Points of `p`'s visible graphs inside `r` (pixels), from at most about 2,000 points a graph.
int points_in(QCustomPlot* p, const QRectF& r) {
  int n = 0;
  for (int g = 0; g < p->graphCount(); ++g) {
    QCPGraph* graph = p->graph(g);
    if (!graph->visible() || graph->data()->isEmpty()) continue;
    const auto data = graph->data();
    const int stride = std::max(1, data->size() / 2000);
    for (int i = 0; i < data->size(); i += stride) {
      const auto it = data->at(i);
      const QPointF px(graph->keyAxis()->coordToPixel(it->key), graph->valueAxis()->coordToPixel(it->value));
      n += r.contains(px);
    }
  }
  return n;
}

struct MarkerLabel {
  double px;  // the marker's x in pixels
  QCPItemText* item;
  QString full;
};

// The labels' texts at a level of shortening: 0 full, 1 without a trailing parenthesis, 2 also
// without a "key: " prefix the label before (left of it) had.
QStringList marker_texts(const QVector<MarkerLabel>& labels, int level) {
  QStringList out;
  QString last_prefix;
  for (const MarkerLabel& l : labels) {
    QString t = l.full;
    if (level >= 1 && t.endsWith(')') && t.lastIndexOf(" (") > 0) t = t.left(t.lastIndexOf(" ("));
    const int colon = t.lastIndexOf(": ");
    const QString prefix = colon > 0 ? t.left(colon + 2) : QString();
    if (level >= 2 && !prefix.trimmed().isEmpty() && prefix == last_prefix) t = " " + t.mid(colon + 2);
    last_prefix = prefix;
    out << t;
  }
  return out;
}

// Rows of the labels with `texts` placed left to right in `rows` rows (-1: no free row), and in
// `left_of_line_out` whether each goes left of its line (near the right edge, so as not to be clipped).
QVector<int> marker_rows(QCustomPlot* p, const QVector<MarkerLabel>& labels, const QStringList& texts, int rows,
                         QVector<bool>* left_of_line_out = nullptr) {
  QVector<double> row_right(rows, -1e9);
  QVector<int> out;
  for (int i = 0; i < labels.size(); ++i) {
    QCPItemText* t = labels[i].item;
    const QFontMetrics fm(t->font());
    const double room = fm.horizontalAdvance(texts[i]) + t->padding().left() + t->padding().right() + 6;
    const double px = labels[i].px;
    const bool left_of_line = px + room > p->axisRect()->right();
    const double start = left_of_line ? px - room : px;
    int row = 0;
    while (row < rows && start <= row_right[row]) ++row;
    if (row < rows) row_right[row] = start + room;
    out << (row < rows ? row : -1);
    if (left_of_line_out) *left_of_line_out << left_of_line;
  }
  return out;
}
}  // namespace

void layout_marker_labels(QCustomPlot* p) {
  QVector<MarkerLabel> labels;
  for (int i = 0; i < p->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "marker") {
      if (!t->property("full_text").isValid()) t->setProperty("full_text", t->text());
      labels.push_back({p->xAxis->coordToPixel(t->position->key()), t, t->property("full_text").toString()});
    }
  std::stable_sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.px < b.px; });
  // The fullest texts that all fit in two rows; else the shortest in three, leaving out the rest.
  QStringList texts;
  QVector<int> rows;
  for (int level = 0; level <= 2; ++level) {
    texts = marker_texts(labels, level);
    rows = marker_rows(p, labels, texts, 2);
    if (!rows.contains(-1)) break;
  }
  QVector<bool> left_of_line;
  if (rows.contains(-1)) rows = marker_rows(p, labels, texts, 3, &left_of_line);
  else marker_rows(p, labels, texts, 2, &left_of_line);
  const double height = std::max(1, p->axisRect()->height());
  // The labels' rows go along the top of the plot, or along the bottom where the curves leave the
  // bottom freer (the accuracy rises to the top, where its labels were written over it).
  const QRect axes = p->axisRect()->rect();
  const int band = 3 * (QFontMetrics(p->font()).height() + 4);
  const bool bottom = !labels.isEmpty() && points_in(p, QRectF(axes.left(), axes.bottom() - band, axes.width(), band)) <
                                               points_in(p, QRectF(axes.left(), axes.top(), axes.width(), band)) / 2;
  for (int i = 0; i < labels.size(); ++i) {
    QCPItemText* t = labels[i].item;
    t->setText(texts[i]);
    t->setPositionAlignment((bottom ? Qt::AlignBottom : Qt::AlignTop) | (left_of_line[i] ? Qt::AlignRight : Qt::AlignLeft));
    t->setVisible(rows[i] >= 0);
    if (rows[i] < 0) continue;
    const double offset = 0.03 + rows[i] * (QFontMetrics(t->font()).height() + 4) / height;
    t->position->setCoords(t->position->key(), bottom ? 1 - offset : offset);
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


void show_empty_hint(QCustomPlot* p, bool empty, const QColor& color) {
  QCPItemText* hint = nullptr;
  for (int i = 0; i < p->itemCount() && !hint; ++i)
    if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "empty_hint") hint = t;
  if (!hint && !empty) return;
  if (!hint) {
    hint = new QCPItemText(p);
    hint->setObjectName("empty_hint");
    hint->position->setType(QCPItemPosition::ptAxisRectRatio);
    hint->position->setCoords(0.5, 0.5);
    hint->setText("No run shown yet: press Start (Ctrl+R),\nor tick runs in the table below");
    hint->setSelectable(false);
  }
  hint->setColor(color);
  hint->setVisible(empty);
}

bool place_legend_clear(QCustomPlot* p) {
  QCPLegend* l = p->legend;
  QCPLayoutInset* inset = p->axisRect()->insetLayout();
  if (!l->visible() || l->layout() != inset || inset->elementCount() == 0) return false;
  const int index = 0;
  if (inset->elementAt(index) != l || inset->insetPlacement(index) != QCPLayoutInset::ipBorderAligned) return false;
  const QRect axes = p->axisRect()->rect(), now = l->outerRect();
  if (now.isEmpty() || axes.isEmpty()) return false;
  const QMargins m = inset->margins();
  const Qt::Alignment corners[] = {Qt::AlignTop | Qt::AlignRight, Qt::AlignBottom | Qt::AlignRight,
                                   Qt::AlignTop | Qt::AlignLeft, Qt::AlignBottom | Qt::AlignLeft};
  auto rect_at = [&](Qt::Alignment a) {
    const int x = (a & Qt::AlignRight) ? axes.right() - m.right() - now.width() : axes.left() + m.left();
    const int y = (a & Qt::AlignBottom) ? axes.bottom() - m.bottom() - now.height() : axes.top() + m.top();
    return QRectF(x, y, now.width(), now.height());
  };
  const Qt::Alignment current = inset->insetAlignment(index);
  const int covered = points_in(p, rect_at(current));
  Qt::Alignment best = current;
  int best_n = covered;
  for (Qt::Alignment a : corners) {
    const int n = points_in(p, rect_at(a));
    if (n < best_n) best = a, best_n = n;
  }
  if (best == current || best_n * 2 >= covered) return false;
  inset->setInsetAlignment(index, best);
  p->replot(QCustomPlot::rpQueuedReplot);
  return true;
}

void fit_legend_columns(QCustomPlot* p) {
  QCPLegend* l = p->legend;
  int widest = 1;
  for (int i = 0; i < l->itemCount(); ++i)  // cells of a wrapped grid may be empty (no item)
    if (QCPAbstractLegendItem* item = l->item(i)) widest = std::max(widest, item->minimumOuterSizeHint().width());
  const int room = p->viewport().width() - l->margins().left() - l->margins().right();
  const int columns = std::clamp(room / (widest + l->columnSpacing()), 1, 4);
  if (columns == l->wrap()) return;
  l->setWrap(columns);
  l->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);  // rearranges the items for the new wrap
  p->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace trainlab::app
