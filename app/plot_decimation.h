// Display decimation for the live plots: a graph draws every point of a series up to
// kRawPointLimit points; beyond that it draws a min/max envelope of the visible key range (one
// bucket per pixel column, at most kEnvelopeBuckets), so that a million points per series stay
// smooth while spikes stay visible. The data itself is never thinned: RunSeries keeps every point
// and the envelope is rebuilt from it when the series grew by 1 % or the view was zoomed or panned.
#pragma once
#include <QVector>
#include <functional>
#include <qcustomplot.h>

namespace trainlab::app {

constexpr int kRawPointLimit = 8000;
constexpr int kEnvelopeBuckets = 4000;

// Point i of a series (keys ascending).
using SeriesAt = std::function<double(int)>;

// Whether a graph of a series that now has n points must be rebuilt (rather than appended to):
// it is (or becomes) an envelope, and the envelope was built from fewer than 99 % of the points
// or the visible range changed.
bool envelope_needs_rebuild(int n, bool decimated, int built_n, bool view_changed);

// First index in [0, n) whose key is >= x (n when none).
int first_index_at_or_after(int n, const SeriesAt& key, double x);

// The points to draw for keys in [lo, hi] (plus one point either side, so lines reach the edges):
// every point when they are at most kRawPointLimit, else per bucket its minimum and maximum in
// key order. `pixels` is the plot's width (buckets = pixels, or kEnvelopeBuckets when unknown).
QVector<QCPGraphData> decimate_range(int n, const SeriesAt& key, const SeriesAt& value, double lo, double hi,
                                     int pixels);

}  // namespace trainlab::app
