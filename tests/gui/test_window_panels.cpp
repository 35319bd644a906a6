// The side panels and boxes of the window: per-kernel times (sorted table when a run has them,
// an explanation instead of an empty table for runs without kernel timing), and the About box's versions.
#include <QDockWidget>
#include <QProgressBar>
#include <QTableWidget>
#include <QtTest>

#include "gui_support.h"
#include "kernel_panel.h"
#include "main_window.h"

using namespace trainlab;
using namespace trainlab::app;

class TestWindowPanels : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_window_panels");
    QVERIFY(m_tmp.isValid());
  }

  void runWithoutTimingSaysWhyThereAreNoKernels() {
    const QString dir = gui_test::make_run(m_tmp.path(), "cpu-run", "fp32", 10);
    KernelPanel k;
    k.set_run(std::make_shared<RunSeries>(RunSeries::load(dir)));
    QVERIFY(!k.showing_table());
    QVERIFY2(k.message().contains("kernel timing was off"), qPrintable(k.message()));
    QVERIFY(k.message().contains("Kernel timing"));
    k.set_run(nullptr);
    QVERIFY(!k.showing_table());
    QVERIFY(!k.message().isEmpty());
  }

  void kernelsSortedByTime() {
    auto run = std::make_shared<RunSeries>();
    run->name = "gpu";
    for (long s = 1; s <= 3; ++s) {
      StepMetrics m;
      m.step = s;
      m.kernel_times = {{"gemm_bf16", 0.5, 3}, {"adamw", 0.1, 1}, {"softmax_xent", 0.2, 1}};
      run->append(m);
    }
    KernelPanel k;
    k.set_run(run);
    QVERIFY(k.showing_table());
    QVERIFY(k.message().isEmpty());
    QTableWidget* t = k.table();
    QCOMPARE(t->rowCount(), 3);
    QCOMPARE(t->item(0, 0)->text(), QString("gemm_bf16"));
    QCOMPARE(t->item(1, 0)->text(), QString("softmax_xent"));
    QCOMPARE(t->item(2, 0)->text(), QString("adamw"));
    QCOMPARE(t->item(0, 1)->data(Qt::UserRole).toDouble(), 1.5);  // summed over the 3 steps
    QCOMPARE(t->item(0, 2)->data(Qt::UserRole).toDouble(), 9.0);
    auto* bar = qobject_cast<QProgressBar*>(t->cellWidget(0, 4));
    QVERIFY(bar);
    QCOMPARE(bar->value(), 625);  // 1.5 of 2.4 ms: 62.5 %
    // New steps update the totals on refresh.
    StepMetrics m;
    m.step = 4;
    m.kernel_times = {{"adamw", 10.0, 1}};
    run->append(m);
    k.refresh();
    QCOMPARE(t->item(0, 0)->text(), QString("adamw"));
  }

  void windowHasKernelDock() {
    MainWindow w(m_tmp.filePath("runs"));
    QVERIFY(w.kernel_dock());
    QVERIFY(!w.kernel_dock()->isVisible());
    w.show();
    w.kernel_dock()->show();
    QVERIFY(!w.kernel_panel()->showing_table());  // nothing selected yet: a sentence, not an empty table
  }

  void aboutNamesVersions() {
    MainWindow w(m_tmp.filePath("runs"));
    const QString a = w.about_text();
    QVERIFY(a.contains(TRAINLAB_VERSION));
    QVERIFY(a.contains(qVersion()));
    QVERIFY(a.contains("CUDA"));
    QVERIFY(a.contains("cpu: CPU"));
  }
};

QTEST_MAIN(TestWindowPanels)
#include "test_window_panels.moc"
