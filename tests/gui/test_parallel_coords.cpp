// View > Parallel coordinates (issue 21): the ticked (or selected) runs of the runs table drawn as
// lines across one axis per config key in which they differ and one per final metric; numbers
// scaled from their smallest to their largest value, text values spread evenly.
#include <QAction>
#include <QImage>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"
#include "parallel_coords_view.h"

using namespace trainlab::app;

class TestParallelCoords : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_root;
  QStringList m_dirs;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_parallel_coords");
    m_root = m_tmp.filePath("runs");
    m_dirs << gui_test::make_run(m_root, "20260101-000000-a", "fp32", 20, "a fp32");
    m_dirs << gui_test::make_run(m_root, "20260101-000100-b", "bf16", 20, "b bf16");
    m_dirs << gui_test::make_run(m_root, "20260101-000200-c", "fp16", 30, "c fp16");
  }

  void ticksRunsAgainstFinalMetrics() {
    MainWindow w(m_root);
    w.runs()->set_checked(m_dirs);
    w.findChild<QAction*>("action_parallel_coords")->trigger();
    auto* v = w.findChild<ParallelCoordsView*>();
    QVERIFY(v && v->isVisible());
    const QStringList keys = v->offered_keys();
    QVERIFY2(keys.contains("precision.dtype") && keys.contains("train.steps"), qPrintable(keys.join(",")));
    QVERIFY(!keys.contains("model.name"));  // the same in every run
    QVERIFY(!keys.contains("run.name"));
    const auto& axes = v->plot()->axes();
    QCOMPARE(axes.size(), keys.size() + ParallelCoordsView::metric_names().size());
    // Runs in table order (newest first): c (fp16, 30 steps), b (bf16, 20), a (fp32, 20).
    const auto axis = [&](const QString& name) {
      for (const auto& a : axes)
        if (a.name == name) return a;
      return ParallelCoordsPlot::Axis{};
    };
    const auto steps = axis("train.steps");
    QCOMPARE(steps.position, (QVector<double>{1.0, 0.0, 0.0}));
    QCOMPARE(steps.low, QString("20"));
    const auto precision = axis("precision.dtype");
    QCOMPARE(precision.labels, (QStringList{"fp16", "bf16", "fp32"}));
    QCOMPARE(precision.position, (QVector<double>{0.5, 0.0, 1.0}));  // sorted: bf16, fp16, fp32
    const auto acc = axis("test accuracy");
    for (double p : acc.position) QVERIFY(p >= 0 && p <= 1);
    // Fewer axes when keys are unticked; the picture has the runs' colours on it.
    v->set_keys({"precision.dtype"});
    QCOMPARE(v->plot()->axes().size(), 1 + ParallelCoordsView::metric_names().size());
    v->resize(1000, 500);
    const QImage img = v->plot()->grab().toImage();
    int coloured = 0;
    for (int y = 0; y < img.height(); y += 3)
      for (int x = 0; x < img.width(); x += 3)
        if (QColor(img.pixel(x, y)).saturation() > 120) ++coloured;
    QVERIFY2(coloured > 50, qPrintable(QString::number(coloured)));
    // One run: a sentence says what to do.
    w.runs()->set_checked({m_dirs[0]});
    w.findChild<QAction*>("action_parallel_coords")->trigger();
    QVERIFY(v->message().contains("two or more runs"));
  }
};

QTEST_MAIN(TestParallelCoords)
#include "test_parallel_coords.moc"
