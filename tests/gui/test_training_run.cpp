// Starts digits runs from the window's controls: metrics reach the plot data; a mid-run precision
// change (fp32 -> bf16) leaves a marker on every plot and shows in the metrics; pause, resume, stop.
#include <QComboBox>
#include <QFile>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"

using namespace trainlab::app;

class TestTrainingRun : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

  void set_spin(MainWindow& w, const char* key, int v) {
    auto* s = qobject_cast<QSpinBox*>(w.form()->editor(key));
    QVERIFY(s);
    s->setValue(v);
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_training_run");
    QVERIFY(m_tmp.isValid());
  }

  void startRunShowsMetrics() {
    MainWindow w(m_tmp.filePath("runs1"));
    w.show();
    set_spin(w, "train.steps", 120);
    set_spin(w, "train.eval_every", 40);
    auto* dev = qobject_cast<QComboBox*>(w.form()->editor("device.name"));
    QVERIFY(dev);
    dev->setCurrentText("cpu");
    QTest::mouseClick(w.start_button(), Qt::LeftButton);
    QVERIFY(w.running());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    auto run = w.live_run();
    QVERIFY(run);
    QCOMPARE(run->size(), 120);
    QCOMPARE(run->val_step.size(), 3);
    w.plots()->refresh();
    QCPGraph* loss = w.plots()->graph(PlotKind::Loss, "train");
    QVERIFY(loss);
    QCOMPARE(loss->dataCount(), 120);
    QCOMPARE(w.plots()->graph(PlotKind::Loss, "validation")->dataCount(), 3);
    QCOMPARE(w.plots()->graph(PlotKind::Accuracy, "train")->dataCount(), 120);
    QVERIFY(w.plots()->graph(PlotKind::Memory, "predicted"));
    QVERIFY(w.plots()->graph(PlotKind::Memory, "weights"));
    QVERIFY(w.plots()->graph(PlotKind::Throughput, "samples/s")->dataCount() == 120);
    // The loss fell and the run record is complete.
    QVERIFY(run->loss.back() < run->loss.front());
    QVERIFY(QFile::exists(run->dir + "/summary.json"));
    QCOMPARE(run->status(), QString("completed"));
    QVERIFY(run->summary.value("test_accuracy", 0.0) > 0.5);
    QCOMPARE(w.runs()->table()->rowCount(), 1);
    QVERIFY(w.message_kind() != "error");
    QVERIFY(w.start_button()->isEnabled());
  }

  void midRunPrecisionChangeLeavesMarker() {
    MainWindow w(m_tmp.filePath("runs2"));
    w.show();
    set_spin(w, "train.steps", 20000);
    set_spin(w, "train.eval_every", 100);
    QVERIFY(w.form()->editor("precision.dtype"));
    QVERIFY(!w.form()->editor("train.steps")->isEnabled() || !w.running());
    w.activateWindow();
    if (QTest::qWaitForWindowActive(&w)) {
      QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier);  // Ctrl+R starts
    } else {
      QTest::mouseClick(w.start_button(), Qt::LeftButton);
    }
    QVERIFY(w.running());
    // Only live keys stay editable while training.
    QVERIFY(w.form()->editor("precision.dtype")->isEnabled());
    QVERIFY(w.form()->editor("optim.lr")->isEnabled());
    QVERIFY(!w.form()->editor("train.batch")->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() >= 5, 30000);
    QCOMPARE(w.live_run()->precision, QString("fp32"));

    QTest::mouseClick(w.pause_button(), Qt::LeftButton);
    QVERIFY(w.session()->paused());
    QCOMPARE(w.pause_button()->text(), QString("Resume"));
    // Paused: the step count settles.
    QTest::qWait(300);
    const int paused_at = w.live_run()->size();
    QTest::qWait(300);
    QCOMPARE(w.live_run()->size(), paused_at);

    auto* combo = qobject_cast<QComboBox*>(w.form()->editor("precision.dtype"));
    QVERIFY(combo);
    combo->setCurrentText("bf16");  // as the user picks it
    QTest::mouseClick(w.pause_button(), Qt::LeftButton);  // resume
    QVERIFY(!w.session()->paused());
    QTRY_VERIFY_WITH_TIMEOUT(!w.live_run()->events.isEmpty(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() > paused_at + 5, 30000);
    const auto& ev = w.live_run()->events.front();
    QVERIFY2(ev.label.contains("bf16"), qPrintable(ev.label));
    QCOMPARE(static_cast<int>(ev.step), paused_at + 1);
    QCOMPARE(w.live_run()->precision, QString("bf16"));
    w.plots()->refresh();
    for (int k = 0; k < kPlotCount; ++k) QCOMPARE(w.plots()->marker_count(static_cast<PlotKind>(k)), 1);
    // bf16 halves the bytes of activations: the measured memory drops at the marker.
    auto run = w.live_run();
    const int i = static_cast<int>(ev.step) - 1;
    const double act_before = run->mem[static_cast<size_t>(trainlab::MemCategory::Activations)][i - 1];
    const double act_after = run->mem[static_cast<size_t>(trainlab::MemCategory::Activations)][run->size() - 1];
    QVERIFY2(act_after < act_before, qPrintable(QString("%1 -> %2").arg(act_before).arg(act_after)));
    // And the total drops: weights and gradients halve while the fp32 master joins the optimizer
    // state (16 bytes a parameter either way), the activations halve, and the CPU backend's
    // conversion panels stay smaller than what the activations give back.
    const double total_before = run->mem_total[i - 1], total_after = run->mem_total[run->size() - 1];
    QVERIFY2(total_after < total_before, qPrintable(QString("total %1 -> %2").arg(total_before).arg(total_after)));
    qInfo("memory at the switch: total %.0f -> %.0f bytes", total_before, total_after);
    using trainlab::MemCategory;
    auto cat = [&](MemCategory c, int at) { return run->mem[static_cast<size_t>(c)][at]; };
    QCOMPARE(cat(MemCategory::Weights, run->size() - 1), cat(MemCategory::Weights, i - 1) / 2);
    QCOMPARE(cat(MemCategory::Gradients, run->size() - 1), cat(MemCategory::Gradients, i - 1) / 2);
    // The conversion workspace is a few 16 KiB panels whatever the batch: at most 6 of them.
    const double ws_growth = cat(MemCategory::Workspace, run->size() - 1) - cat(MemCategory::Workspace, i - 1);
    QVERIFY2(ws_growth > 0 && ws_growth <= 6 * 16384 + 4096, qPrintable(QString::number(ws_growth)));
    QVERIFY(w.plots()->graph(PlotKind::Memory, "activations predicted"));

    QTest::mouseClick(w.stop_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);
    QCOMPARE(run->status(), QString("stopped"));
    QVERIFY(run->size() < 20000);
    QVERIFY(QFile::exists(run->dir + "/metrics.jsonl"));
    // The marker is in the record too.
    QFile f(run->dir + "/metrics.jsonl");
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll().contains("\"event\""));
    // The runs table says where the precision ended.
    QCOMPARE(w.runs()->table()->rowCount(), 1);
    QCOMPARE(w.runs()->table()->item(0, 3)->text(), QString::fromUtf8("fp32 \u2192 bf16"));
    QVERIFY(w.form()->editor("train.batch")->isEnabled());
  }
};

QTEST_MAIN(TestTrainingRun)
#include "test_training_run.moc"
