// The text panel generates with a trained char-gpt run (a few training steps suffice to exercise
// loading, the vocabulary and KV-cache sampling); a digits run gives a message, not a crash.
#include <QFile>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"
#include "text_panel.h"

using namespace trainlab::app;

class TestTextPanel : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_text_panel"); }

  void generatesWithCharGpt() {
    trainlab::Config c;
    c.set("model.name", "char-gpt");
    c.set("train.steps", "3");
    c.set("train.batch", "8");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("runs/cg");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    QVERIFY(QFile::exists(dir + "/model.safetensors"));

    MainWindow w(m_tmp.filePath("runs"));
    w.reopen(dir);  // a char-gpt run opens the text panel with its weights
    QVERIFY(w.text_panel()->weights().endsWith("model.safetensors"));
    QSignalSpy spy(w.text_panel(), &TextPanel::generated);
    QVERIFY(w.text_panel()->generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    QVERIFY(w.text_panel()->output().startsWith("ROMEO:"));
    QVERIFY(w.text_panel()->output().size() > 100);
    QVERIFY(w.text_panel()->tokens_per_s() > 0);
  }

  void digitsWeightsGiveMessage() {
    trainlab::Config c;
    c.set("train.steps", "2");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("runs/digits");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    TextPanel p;
    p.set_weights(dir);
    QSignalSpy spy(&p, &TextPanel::generated);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY(!spy.at(0).at(0).toBool());
    QVERIFY(p.output().contains("char-gpt"));
  }
};

QTEST_MAIN(TestTextPanel)
#include "test_text_panel.moc"
