// The plots: incremental updates from a timer, smoothing recomputed from the full data, markers on
// every plot, and a million points per series kept in full and drawn quickly (decimated).
#include <QtTest>
#include <cmath>
#include <qcustomplot.h>

#include "gui_support.h"
#include "plot_panel.h"
#include "plot_test_data.h"

using namespace trainlab;
using namespace trainlab::app;

using plot_test::fake_step;

class TestPlotPanel : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { gui_test::isolate_settings("test_plot_panel"); }

  void incrementalAndMarkers() {
    PlotPanel p;
    p.resize(1000, 700);
    p.show();
    auto run = std::make_shared<RunSeries>();
    run->name = "r";
    p.set_runs({run});
    for (long i = 1; i <= 100; ++i) run->append(fake_step(i));
    p.notify_data();
    // The timer picks the data up (no explicit refresh).
    QTRY_COMPARE(p.graph(PlotKind::Loss, "train")->dataCount(), 100);
    StepMetrics m = fake_step(101);
    m.event = "dtype: fp32 -> bf16";
    run->append(m);
    p.refresh();
    for (int k = 0; k < kPlotCount; ++k) QCOMPARE(p.marker_count(static_cast<PlotKind>(k)), 1);
    QCOMPARE(p.graph(PlotKind::Loss, "train")->dataCount(), 101);
    // Smoothing changes recompute the curve but keep every point.
    const double raw_last = run->loss.back();
    p.set_smoothing(0.0);
    QCOMPARE(p.graph(PlotKind::Loss, "train")->data()->at(100)->value, raw_last);
    p.set_smoothing(0.9);
    QCOMPARE(p.graph(PlotKind::Loss, "train")->dataCount(), 101);
    QVERIFY(p.graph(PlotKind::Loss, "train")->data()->at(100)->value != raw_last);
  }

  // A million steps: the graphs hold an envelope, extremes kept. How fast it builds and repaints
  // is a benchmark, not this test: tests/gui/bench_plot_repaint (BENCHMARKS.md).
  void millionPoints() {
    PlotPanel p;
    p.resize(1200, 800);
    p.show();
    auto run = std::make_shared<RunSeries>();
    run->name = "big";
    p.set_runs({run});
    const long n = 1000000;
    for (long i = 1; i <= n; ++i) run->append(fake_step(i));
    p.refresh();
    // Every point is kept in the run; the graph holds an envelope of a few thousand points.
    QCOMPARE(run->size(), static_cast<int>(n));
    QCPGraph* loss = p.graph(PlotKind::Loss, "train");
    QVERIFY2(loss->dataCount() <= 8100 && loss->dataCount() > 200, qPrintable(QString::number(loss->dataCount())));
    // Live appends between rebuilds only add the new tail.
    for (long i = n + 1; i <= n + 100; ++i) run->append(fake_step(i));
    const int before = loss->dataCount();
    p.refresh();
    QCOMPARE(loss->dataCount(), before + 100);
    // Zoomed in far enough, the graph shows the raw points of the view.
    p.set_follow(false);
    p.set_smoothing(0.0);
    p.plot(PlotKind::Loss)->xAxis->setRange(5000, 6000);
    p.refresh();
    QVERIFY2(loss->dataCount() >= 1001 && loss->dataCount() <= 1010, qPrintable(QString::number(loss->dataCount())));
    QCOMPARE(loss->data()->findBegin(5500, false)->value, run->loss[5499]);
  }
};

QTEST_MAIN(TestPlotPanel)
#include "test_plot_panel.moc"
