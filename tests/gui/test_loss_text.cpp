// Small losses keep their digits: a run whose final train loss is 3.21e-05 and test loss 0.000456
// shows them so in the report's summary table and in the runs table, never as "0.0000"; losses
// from 0.1 up keep 4 decimals.
#include <QFile>
#include <QTableWidget>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"
#include "report.h"
#include "runs_panel.h"

using namespace trainlab::app;

class TestLossText : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_dir;

  // The run's summary.json with these losses (as a run that fits its data almost exactly ends).
  static void set_losses(const QString& dir, double train_loss, double test_loss) {
    QFile f(dir + "/summary.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    trainlab::Json s = trainlab::Json::parse(f.readAll().toStdString());
    f.close();
    s["final_train_loss"] = train_loss;
    s["test_loss"] = test_loss;
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(QByteArray::fromStdString(s.dump()));
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_loss_text");
    QVERIFY(m_tmp.isValid());
    m_dir = gui_test::make_run(m_tmp.filePath("runs"), "small-loss", "fp32", 20, "small");
    set_losses(m_dir, 3.21e-5, 0.000456);
  }

  void formats() {
    QCOMPARE(loss_text(2.302585), QString("2.3026"));
    QCOMPARE(loss_text(0.1234), QString("0.1234"));
    QCOMPARE(loss_text(0.0123456), QString("0.0123"));
    QCOMPARE(loss_text(3.21e-5), QString("3.21e-05"));
    QCOMPARE(loss_text(0.0), QString("0.0000"));
    QCOMPARE(loss_text(std::nan("")), QString("no value"));
  }

  void reportShowsSmallLosses() {
    const QString path = m_tmp.filePath("report.html");
    Report::from_dirs({m_dir}).write(path);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(f.readAll());
    QVERIFY2(html.contains(">3.21e-05<"), "final train loss");
    QVERIFY2(html.contains(">0.000456<"), "test loss");
    QVERIFY(!html.contains(">0.0000<"));
  }

  void runsTableShowsSmallLosses() {
    MainWindow w(m_tmp.filePath("runs"));
    QTableWidget* t = w.runs()->table();
    QCOMPARE(t->rowCount(), 1);
    int col = -1;
    for (int c = 0; c < t->columnCount(); ++c)
      if (t->horizontalHeaderItem(c) && t->horizontalHeaderItem(c)->text() == "Test loss") col = c;
    QVERIFY(col >= 0);
    QCOMPARE(t->item(0, col)->text(), QString("0.000456"));
  }
};

QTEST_MAIN(TestLossText)
#include "test_loss_text.moc"
