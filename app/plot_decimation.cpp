#include "plot_decimation.h"

#include <algorithm>
#include <cmath>

namespace trainlab::app {

bool envelope_needs_rebuild(int n, bool decimated, int built_n, bool view_changed) {
  if (n <= kRawPointLimit) return false;
  return !decimated || view_changed || n > built_n + built_n / 100;
}

int first_index_at_or_after(int n, const SeriesAt& key, double x) {
  int l = 0, h = n;
  while (l < h) {
    const int m = l + (h - l) / 2;
    if (key(m) < x)
      l = m + 1;
    else
      h = m;
  }
  return l;
}

QVector<QCPGraphData> decimate_range(int n, const SeriesAt& key, const SeriesAt& value, double lo, double hi,
                                     int pixels) {
  QVector<QCPGraphData> out;
  if (n <= 0) return out;
  const int i0 = std::max(0, first_index_at_or_after(n, key, lo) - 1);
  const int i1 = std::min(n, first_index_at_or_after(n, key, hi) + 2);
  if (i1 - i0 <= kRawPointLimit) {
    out.reserve(i1 - i0);
    for (int i = i0; i < i1; ++i) out.push_back({key(i), value(i)});
    return out;
  }
  const int buckets = pixels > 50 ? std::min(kEnvelopeBuckets, pixels) : kEnvelopeBuckets;
  const int bucket = (i1 - i0 + buckets - 1) / buckets;
  out.reserve(2 * buckets + 2);
  for (int b = i0; b < i1; b += bucket) {
    const int e = std::min(i1, b + bucket);
    int imin = b, imax = b;
    double vmin = value(b), vmax = vmin;
    for (int i = b + 1; i < e; ++i) {
      const double v = value(i);
      // NaNs (a diverged step) never win; a bucket that starts with one takes the next value.
      if (v < vmin || !std::isfinite(vmin)) vmin = v, imin = i;
      if (v > vmax || !std::isfinite(vmax)) vmax = v, imax = i;
    }
    const int first = std::min(imin, imax), second = std::max(imin, imax);
    out.push_back({key(first), value(first)});
    if (second != first) out.push_back({key(second), value(second)});
  }
  return out;
}

}  // namespace trainlab::app
