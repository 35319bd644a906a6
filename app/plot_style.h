// The look of the plots, shared by the live panel, the reports and the config form's preview:
// colours of runs and memory categories, axis tickers for bytes and large counts, and the
// palette-following style of a QCustomPlot (light or dark).
#pragma once
#include <QColor>
#include <QPalette>
#include <qcustomplot.h>

namespace trainlab::app {

// Colour of the index-th run (tab10), and of a memory category in the stack.
QColor run_color(int index);
QColor category_color(size_t category);

// Byte-valued axis: ticks at 1, 2, 5 x powers of 1024 units, labelled "12 MiB".
class BytesTicker : public QCPAxisTicker {
 protected:
  double getTickStep(const QCPRange& range) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar format, int precision) override;
};

// Compact numbers: 12k, 1.5M, 2G.
class CompactTicker : public QCPAxisTicker {
 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar format, int precision) override;
};

// Background, axes, grid, legend and the layout's titles in the palette's colours (text on Base),
// so that the plots stay readable under a dark palette.
void style_plot(QCustomPlot* p, const QPalette& palette);

// Places the labels of a plot's markers (QCPItemText items named "marker") for its current layout:
// left of their line near the right edge; overlapping labels in up to two rows, shortened first
// where that makes them fit (no repeated parenthesis or "key: " prefix), else in three rows with
// any further one hidden.
void layout_marker_labels(QCustomPlot* p);

// Draws a plot onto any painter (a PDF page, an SVG) at the target's size, as vector graphics.
// Large targets draw at a smaller logical size scaled up, so that text keeps its proportion to the
// plot; marker labels are placed for the target's size, then again for the widget's.
void render_plot(QCustomPlot* p, QCPPainter* painter, const QRectF& target);

// A legend laid out below its plot in rows: as many columns as its widest entry fits in the plot's
// width (1-4), so that no entry is cut off at the edge; replots when that number changes.
void fit_legend_columns(QCustomPlot* p);
// An empty plot says what fills it ("No run shown yet: press Start, or tick runs in the table
// below") in the middle of its axes, in `color`; hidden once it has a curve.
void show_empty_hint(QCustomPlot* p, bool empty, const QColor& color);

// A legend inside the axes moves to the corner where it covers the fewest points of the visible
// curves (the throughput plot's legend sat on the samples/s curve). It moves only when that corner
// covers fewer than half the points of its own, so that it does not flicker as a run goes on.
// Returns whether it moved (a queued replot then draws it there).
bool place_legend_clear(QCustomPlot* p);

}  // namespace trainlab::app
