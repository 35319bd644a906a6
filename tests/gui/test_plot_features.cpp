// What TensorBoard, W&B and PlotJuggler users expect of the plots (issue 21): elapsed time and ETA,
// the raw curve faintly behind the smoothed one, x axes linked across plots with a crosshair
// reading every plot, an elapsed-time x axis, and a choice of plots and columns kept in QSettings.
#include <QToolButton>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "plot_panel.h"
#include "plot_test_data.h"

using namespace trainlab;
using namespace trainlab::app;
using plot_test::fake_run;
using plot_test::fake_step;

namespace {
// The grid cell (column, row) a plot sits in.
QPoint cell_of(PlotPanel& panel, PlotKind k) {
  auto* grid = qobject_cast<QGridLayout*>(panel.plot(k)->parentWidget()->layout()->itemAt(1)->layout());
  int r = 0, c = 0, rs = 0, cs = 0;
  grid->getItemPosition(grid->indexOf(panel.plot(k)), &r, &c, &rs, &cs);
  return {c, r};
}
}  // namespace

class TestPlotFeatures : public QObject {
  Q_OBJECT
 private slots:
  void init() { gui_test::isolate_settings("test_plot_features"); }

  void elapsedAndEta() {
    PlotPanel panel;
    auto run = fake_run("r", 100, 1000);  // 0.1 s a step, 100 of 1000 steps
    panel.set_runs({run});
    QCOMPARE(panel.time_text(), QString("elapsed 00:10 · ETA 01:30"));
    QCOMPARE(panel.findChild<QLabel*>("run_time")->text(), panel.time_text());
    run->summary = Json::parse(R"({"status": "stopped"})");
    panel.refresh();
    QCOMPARE(panel.time_text(), QString("took 00:10"));
    // A resumed run's clock starts again at 0: the elapsed time goes on.
    auto resumed = fake_run("resumed", 100, 1000);
    StepMetrics m = fake_step(101, 1000, 100);
    m.wall_s = 2.0;
    resumed->append(m);
    QCOMPARE(resumed->elapsed_s.back(), 12.0);
  }

  void rawCurveBehindTheSmoothedOne() {
    PlotPanel panel;
    auto run = fake_run("r", 300);
    panel.set_runs({run});
    panel.set_smoothing(0.8);
    QCPGraph* raw = panel.graph(PlotKind::Loss, "train (raw)");
    QCPGraph* smooth = panel.graph(PlotKind::Loss, "train");
    QVERIFY(raw && smooth);
    QVERIFY(raw->visible());
    QCOMPARE(raw->dataCount(), 300);
    QCOMPARE(raw->data()->at(150)->value, run->loss[150]);
    QVERIFY(smooth->data()->at(150)->value != run->loss[150]);
    QVERIFY(raw->pen().color().alpha() < 100);
    QVERIFY(raw->layer()->index() < smooth->layer()->index());
    QVERIFY2(!panel.plot(PlotKind::Loss)->legend->hasItemWithPlottable(raw), "the raw curve stays out of the legend");
    panel.set_smoothing(0);
    QVERIFY(!raw->visible());
  }

  void linkedAxesAndCrosshair() {
    PlotPanel panel;
    panel.resize(1200, 800);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    auto run = fake_run("r", 400, 400, 50);
    panel.set_runs({run});
    panel.set_smoothing(0);
    panel.refresh();
    panel.set_follow(false);
    panel.plot(PlotKind::Memory)->xAxis->setRange(100, 200);
    for (auto* p : panel.plots())
      if (p->isVisible()) QCOMPARE(p->xAxis->range(), QCPRange(100, 200));
    // The mouse over the loss plot at step 150: every shown plot reads its values there.
    QCustomPlot* lp = panel.plot(PlotKind::Loss);
    lp->replot(QCustomPlot::rpImmediateRefresh);
    const QPoint at(static_cast<int>(lp->xAxis->coordToPixel(150)), lp->axisRect()->center().y());
    QMouseEvent move(QEvent::MouseMove, QPointF(at), QPointF(lp->mapToGlobal(at)), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(lp, &move);
    const QString loss = panel.readout(PlotKind::Loss);
    QVERIFY2(loss.contains("step 150"), qPrintable(loss));
    QVERIFY2(loss.contains("train: " + QString::number(run->loss[149], 'g', 4)), qPrintable(loss));
    QVERIFY2(panel.readout(PlotKind::Accuracy).contains("train: " + QString::number(100 * run->train_acc[149], 'g', 4)),
             qPrintable(panel.readout(PlotKind::Accuracy)));
    QVERIFY2(panel.readout(PlotKind::Memory).contains(format_bytes(460000)), qPrintable(panel.readout(PlotKind::Memory)));
    QVERIFY2(panel.readout(PlotKind::Loss).contains("validation: " + QString::number(run->val_loss[2], 'g', 4)),
             qPrintable(loss));
    panel.clear_crosshair();
    QVERIFY(panel.readout(PlotKind::Loss).isEmpty());
  }

  void elapsedTimeAxis() {
    PlotPanel panel;
    auto run = std::make_shared<RunSeries>();
    run->name = "r";
    for (long i = 1; i <= 200; ++i) {
      StepMetrics m = fake_step(i, 200, 50);
      if (i == 120) m.event = "dtype: fp32 -> bf16";
      run->append(m);
    }
    panel.set_runs({run});
    panel.set_smoothing(0);
    panel.set_x_axis(XAxis::Time);
    QCPGraph* g = panel.graph(PlotKind::Loss, "train");
    QCOMPARE(g->data()->at(99)->key, run->elapsed_s[99]);
    QCOMPARE(panel.graph(PlotKind::Loss, "validation")->data()->at(0)->key, run->elapsed_s[49]);
    QVERIFY(panel.plot(PlotKind::Loss)->xAxis->label().startsWith("elapsed"));
    bool marker_at_time = false;
    for (int i = 0; i < panel.plot(PlotKind::Loss)->itemCount(); ++i)
      if (auto* l = qobject_cast<QCPItemStraightLine*>(panel.plot(PlotKind::Loss)->item(i)); l && l->objectName() == "marker")
        marker_at_time = qFuzzyCompare(l->point1->key(), run->elapsed_s[119]);
    QVERIFY(marker_at_time);
    // Remembered for the next window.
    PlotPanel again;
    QCOMPARE(again.x_axis(), XAxis::Time);
    again.set_x_axis(XAxis::Step);
    again.set_runs({run});
    QCOMPARE(again.graph(PlotKind::Loss, "train")->data()->at(99)->key, 100.0);
  }

  void choosePlotsAndColumns() {
    {
      PlotPanel panel;
      panel.set_runs({fake_run("r", 50)});
      QVERIFY(panel.plot_shown(PlotKind::Throughput));
      // Through the "Plots" button's menu, as a user would.
      auto* chooser = panel.findChild<QToolButton*>("plot_chooser");
      QVERIFY(chooser && chooser->menu());
      QAction* thr = chooser->menu()->findChild<QAction*>("show_throughput");
      QVERIFY(thr);
      emit chooser->menu()->aboutToShow();
      QVERIFY(thr->isChecked());
      thr->trigger();
      QVERIFY(!panel.plot_shown(PlotKind::Throughput));
      chooser->menu()->findChild<QAction*>("columns_3")->trigger();
      QCOMPARE(panel.columns(), 3);
    }
    PlotPanel panel;  // a new window: the same choice
    panel.set_runs({fake_run("r", 50)});
    QCOMPARE(panel.columns(), 3);
    QVERIFY(!panel.plot_shown(PlotKind::Throughput));
    QVERIFY(panel.plot_shown(PlotKind::Memory));
    QCOMPARE(cell_of(panel, PlotKind::Loss), QPoint(0, 0));
    QCOMPARE(cell_of(panel, PlotKind::Accuracy), QPoint(1, 0));
    QCOMPARE(cell_of(panel, PlotKind::Memory), QPoint(2, 0));
    panel.set_plot_chosen(PlotKind::Throughput, true);
    panel.set_columns(1);
    QCOMPARE(cell_of(panel, PlotKind::Memory), QPoint(0, 3));
    QCOMPARE(QSettings().value("plots/columns").toInt(), 1);
    QVERIFY(QSettings().value("plots/hidden").toStringList().isEmpty());
  }
};

QTEST_MAIN(TestPlotFeatures)
#include "test_plot_features.moc"
