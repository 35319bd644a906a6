// The controls after a run with mid-run changes: the live keys switched while it trained (precision
// fp32 -> bf16, the learning rate) go back to the run's start values, as its record keeps them, so
// the form never shows a switched value as if the run had started with it; the status bar says so.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QStatusBar>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"

using namespace trainlab::app;

class TestFormAfterRun : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_form_after_run");
    QVERIFY(m_tmp.isValid());
  }

  void liveChangesGoBackToTheStartValues() {
    MainWindow w(m_tmp.filePath("runs"));
    w.show();
    trainlab::Config c = w.form()->config();
    c.set_json("train.steps", static_cast<int64_t>(1000000));
    c.set_json("train.eval_every", static_cast<int64_t>(100));
    c.set_json("device.name", std::string("cpu"));
    c.set_json("precision.dtype", std::string("fp32"));
    c.set_json("optim.lr", 0.001);
    w.form()->set_config(c);
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run() && w.live_run()->size() >= 5, 30000);

    auto* dtype = qobject_cast<QComboBox*>(w.form()->editor("precision.dtype"));
    auto* lr = qobject_cast<QDoubleSpinBox*>(w.form()->editor("optim.lr"));
    QVERIFY(dtype && lr);
    dtype->setCurrentText("bf16");  // as the user picks them while it trains
    lr->setValue(0.002);
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->precision == "bf16", 30000);
    w.stop_run();
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);

    QCOMPARE(dtype->currentText(), QString("fp32"));
    QCOMPARE(lr->value(), 0.001);
    QCOMPARE(QString::fromStdString(w.form()->config().get_string("precision.dtype")), QString("fp32"));
    const QString msg = w.statusBar()->currentMessage();
    QVERIFY2(msg.contains("precision.dtype: bf16 -> fp32"), qPrintable(msg));
    QVERIFY2(msg.contains("optim.lr: 0.002 -> 0.001"), qPrintable(msg));
  }

  void aRunWithoutChangesLeavesTheControls() {
    MainWindow w(m_tmp.filePath("runs2"));
    w.show();
    trainlab::Config c = w.form()->config();
    c.set_json("train.steps", static_cast<int64_t>(30));
    c.set_json("train.eval_every", static_cast<int64_t>(10));
    c.set_json("device.name", std::string("cpu"));
    c.set_json("precision.dtype", std::string("bf16"));
    w.form()->set_config(c);
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(qobject_cast<QComboBox*>(w.form()->editor("precision.dtype"))->currentText(), QString("bf16"));
    QVERIFY(!w.statusBar()->currentMessage().contains("start settings"));
  }
};

QTEST_MAIN(TestFormAfterRun)
#include "test_form_after_run.moc"
