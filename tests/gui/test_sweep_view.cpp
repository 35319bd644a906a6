// The compression sweep view (issue 5): the committed CPU table of the digits MLP loads into three
// plots (accuracy against bits per weight, sparsity and model bytes) with the fp32 baseline as a
// dashed line on each and the rows in a table; a missing or garbled file is reported, not drawn.
#include <QAction>
#include <QDir>
#include <QFile>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"
#include "sweep_view.h"

using namespace trainlab::app;

namespace {
QCPGraph* baseline(QCustomPlot* p) {
  for (int i = 0; i < p->graphCount(); ++i)
    if (p->graph(i)->property("baseline").toBool()) return p->graph(i);
  return nullptr;
}
}  // namespace

class TestSweepView : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString csv_path() const {
    return QDir(qEnvironmentVariable("TRAINLAB_DATA_DIR")).absoluteFilePath("../docs/compression/digits-mlp-cpu.csv");
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_sweep_view");
    QVERIFY(m_tmp.isValid());
    QVERIFY2(QFile::exists(csv_path()), qPrintable(csv_path()));
  }

  void loadsTheCpuTable() {
    SweepView v;
    v.resize(1200, 800);
    QVERIFY2(v.load(csv_path()), qPrintable(v.error()));
    QCOMPARE(v.rows().size(), 56);
    QCOMPARE(v.table()->rowCount(), 56);
    // bits: rtn tensor/channel/group32 (method ptq, 7 each, bits 2..8), ptq-w8a8, qat (3), ft+ptq (3) + baseline
    QCustomPlot* bits = v.plot(SweepView::Bits);
    QCOMPARE(bits->graphCount(), 7);
    QCOMPARE(v.graph(SweepView::Bits, "rtn tensor")->dataCount(), 7);
    QCOMPARE(v.graph(SweepView::Bits, "rtn group32")->dataCount(), 7);
    QCOMPARE(v.graph(SweepView::Bits, "ptq-w8a8")->dataCount(), 1);
    QCOMPARE(v.graph(SweepView::Bits, "qat")->dataCount(), 3);
    QCOMPARE(v.graph(SweepView::Bits, "ft+ptq")->dataCount(), 3);
    QCPGraph* t = v.graph(SweepView::Bits, "rtn tensor");
    QCOMPARE(t->data()->at(0)->key, 2.0006);  // sorted by x
    QCOMPARE(t->data()->at(0)->value, 18.61);
    // sparsity: one series per pruning method
    QCPGraph* gradual = v.graph(SweepView::Sparsity, "prune-gradual");
    QVERIFY(gradual);
    QCOMPARE(gradual->dataCount(), 5);
    QVERIFY(v.graph(SweepView::Sparsity, "prune-oneshot+ft (global)"));
    QVERIFY(v.graph(SweepView::Sparsity, "lottery-ticket"));
    // model bytes: every row but the baseline, log axis
    QCustomPlot* bytes = v.plot(SweepView::Bytes);
    QCOMPARE(bytes->xAxis->scaleType(), QCPAxis::stLogarithmic);
    int points = 0;
    for (int i = 0; i < bytes->graphCount(); ++i)
      if (!bytes->graph(i)->property("baseline").toBool()) points += bytes->graph(i)->dataCount();
    QCOMPARE(points, 55);
    for (QCustomPlot* p : {bits, v.plot(SweepView::Sparsity), bytes}) {
      QCPGraph* b = baseline(p);
      QVERIFY(b);
      QCOMPARE(b->pen().style(), Qt::DashLine);
      QCOMPARE(b->data()->at(0)->value, 97.78);
      QVERIFY(p->legend->visible());
    }
  }

  // A sweep with GPTQ and AWQ rows: rtn, gptq and awq are series of their own, per granularity.
  void methodsAsSeries() {
    const QString path = m_tmp.filePath("methods.csv");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Text));
    f.write("method,granularity,bits,sparsity,test_accuracy,model_bytes,bits_per_weight,note\n"
            "fp32,-,32,0,0.9778,340008,32,\n"
            "ptq,channel,3,0,0.9722,33000,3.1,\n"
            "ptq,channel,4,0,0.9750,43000,4.1,\n"
            "ptq-gptq,channel,3,0,0.9750,33000,3.1,calibration: 16 batches\n"
            "ptq-gptq,channel,4,0,0.9778,43000,4.1,calibration: 16 batches\n"
            "ptq-awq,group32,3,0,0.9722,37000,3.5,calibration: 16 batches\n");
    f.close();
    SweepView v;
    QVERIFY2(v.load(path), qPrintable(v.error()));
    QCOMPARE(v.graph(SweepView::Bits, "rtn channel")->dataCount(), 2);
    QCOMPARE(v.graph(SweepView::Bits, "gptq channel")->dataCount(), 2);
    QCOMPARE(v.graph(SweepView::Bits, "awq group32")->dataCount(), 1);
    QCOMPARE(v.graph(SweepView::Bits, "gptq channel")->data()->at(0)->value, 97.50);
  }

  // The accuracies sit near 97 %: each legend, drawn in the top corner, covered them; it goes to
  // a corner that the points leave free.
  void legendsLeaveThePoints() {
    SweepView v;
    v.resize(1280, 800);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    QVERIFY2(v.load(csv_path()), qPrintable(v.error()));
    for (auto k : {SweepView::Bits, SweepView::Sparsity, SweepView::Bytes}) {
      QCustomPlot* p = v.plot(k);
      for (int i = 0; i < 3; ++i) p->replot(QCustomPlot::rpImmediateRefresh);
      const QRect legend = p->legend->outerRect();
      int covered = 0;
      for (int g = 0; g < p->graphCount(); ++g)
        for (auto it = p->graph(g)->data()->constBegin(); it != p->graph(g)->data()->constEnd(); ++it)
          covered += !p->graph(g)->property("baseline").toBool() &&
                     legend.contains(QPoint(qRound(p->xAxis->coordToPixel(it->key)), qRound(p->yAxis->coordToPixel(it->value))));
      QVERIFY2(covered <= 1, qPrintable(QString("plot %1: the legend covers %2 points").arg(int(k)).arg(covered)));
    }
  }

  void reportsGarbledFiles() {
    SweepView v;
    QVERIFY(!v.load(m_tmp.filePath("missing.csv")));
    QVERIFY(v.error().contains("missing.csv"));

    const QString bad = m_tmp.filePath("bad.csv");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("method,granularity,bits,sparsity,test_accuracy,model_bytes,bits_per_weight\n"
            "fp32,-,32,0,0.97,340008,32\n"
            "ptq,tensor,\x1b[31mSECRET,0,0.9,1000,4\n");
    f.close();
    QVERIFY(!v.load(bad));
    QVERIFY2(v.error().contains("line 3: column \"bits\" is not a number (expected a finite number)"),
             qPrintable(v.error()));
    QVERIFY2(!v.error().contains("SECRET") && !v.error().contains("\x1b"), qPrintable(v.error()));  // never the cell
    // A device or a folder is refused before it is read.
    for (const QString& p : {QString("/dev/zero"), m_tmp.path()}) {
      QVERIFY(!v.load(p));
      QVERIFY2(v.error().contains(p + ": not a sweep table (expected a regular file"), qPrintable(v.error()));
    }
    QVERIFY(v.rows().isEmpty());

    const QString nocol = m_tmp.filePath("nocol.csv");
    QFile g(nocol);
    QVERIFY(g.open(QIODevice::WriteOnly));
    g.write("a,b,c\n1,2,3\n");
    g.close();
    QVERIFY(!v.load(nocol));
    QVERIFY2(v.error().contains("missing column"), qPrintable(v.error()));
    // a good file after bad ones still loads
    QVERIFY(v.load(csv_path()));
  }

  void menuHasTheAction() {
    MainWindow w;
    QAction* a = w.findChild<QAction*>("action_compression_sweep");
    QVERIFY(a);
    QCOMPARE(a->shortcut(), QKeySequence("Ctrl+Shift+S"));
  }
};

QTEST_MAIN(TestSweepView)
#include "test_sweep_view.moc"
