// Errors appear in the window as messages the user can act on, and never crash it: a bad data
// path, an invalid control value, a broken preset file, a diverging run (record kept).
#include <QFile>
#include <QLineEdit>
#include <QSpinBox>
#include <QComboBox>
#include <QPushButton>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"

using namespace trainlab::app;

class TestErrorPaths : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_error_paths"); }

  void badDataPathShowsMessage() {
    MainWindow w(m_tmp.filePath("runs"));
    w.show();
    qobject_cast<QSpinBox*>(w.form()->editor("train.steps"))->setValue(50);
    auto* path = qobject_cast<QLineEdit*>(w.form()->editor("data.path"));
    QVERIFY(path);
    path->setText("/no/such/digits.csv");
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);
    QCOMPARE(w.message_kind(), QString("error"));
    QVERIFY2(w.message_text().contains("/no/such/digits.csv"), qPrintable(w.message_text()));
    QVERIFY(w.message_text().contains("data.path"));  // says which control to fix
    QVERIFY(w.start_button()->isEnabled());
    // Fixing the setting makes the next run work.
    path->setText("");
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(w.live_run()->status(), QString("completed"));
  }

  void invalidControlValue() {
    MainWindow w(m_tmp.filePath("runs"));
    QComboBox* name = qobject_cast<QComboBox*>(w.form()->editor("model.name"));
    name->setCurrentText("mlp");
    auto* hidden = qobject_cast<QLineEdit*>(w.form()->editor("model.hidden"));
    hidden->setText("");
    QVERIFY(!w.start_run());
    QVERIFY(!w.running());
    QCOMPARE(w.message_kind(), QString("error"));
    QVERIFY(w.message_text().contains("model.hidden"));
  }

  void brokenPresetFile() {
    MainWindow w(m_tmp.filePath("runs"));
    const QString p = m_tmp.filePath("broken.json");
    QFile f(p);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"train\": {\"epochs\": \"many\"}}");
    f.close();
    QVERIFY(!w.load_preset(p));
    QCOMPARE(w.message_kind(), QString("error"));
    QVERIFY(w.message_text().contains("train.epochs"));
  }

  void divergenceKeepsRecord() {
    MainWindow w(m_tmp.filePath("runs-div"));
    w.form()->set_value("train.steps", 200);
    w.form()->set_value("optim.name", "sgd");
    w.form()->set_value("optim.lr", 10.0);  // the top of optim.lr's range
    w.form()->set_value("optim.momentum", 0.99);
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(w.live_run()->status(), QString("diverged"));
    QCOMPARE(w.message_kind(), QString("error"));
    QVERIFY(w.message_text().contains("diverged"));
    QVERIFY(w.message_text().contains("learning rate"));
    QVERIFY(QFile::exists(w.live_run()->dir + "/summary.json"));
    QVERIFY(QFile::exists(w.live_run()->dir + "/metrics.jsonl"));
  }
};

QTEST_MAIN(TestErrorPaths)
#include "test_error_paths.moc"
