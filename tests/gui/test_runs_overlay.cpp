// The runs table: run records on disk with config differences from the baseline highlighted,
// overlay of two runs on the plots, reopen, rename, delete, and runs surviving a restart.
#include <QFile>
#include <QHeaderView>
#include <QTableWidget>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"
#include "runs_panel.h"

using namespace trainlab::app;

class TestRunsOverlay : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_root, m_a, m_b;

  int row_of(MainWindow& w, const QString& dir) {
    for (int i = 0; i < w.runs()->rows().size(); ++i)
      if (w.runs()->rows()[i].dir == dir) return i;
    return -1;
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_runs_overlay");
    m_root = m_tmp.filePath("runs");
    m_a = gui_test::make_run(m_root, "20260101-000000-digits-mlp-fp32", "fp32", 60, "fp32 run");
    m_b = gui_test::make_run(m_root, "20260101-000100-digits-mlp-bf16", "bf16", 60, "bf16 run");
  }

  void tableShowsRunsAndDifferences() {
    MainWindow w(m_root);
    QCOMPARE(w.runs()->rows().size(), 2);
    w.runs()->set_baseline(m_a);
    const QStringList diffs = w.runs()->differences(m_b);
    QVERIFY2(diffs.contains("precision.dtype"), qPrintable(diffs.join(",")));
    QVERIFY(!diffs.contains("run.name"));
    const int rb = row_of(w, m_b);
    QVERIFY(rb >= 0);
    auto* t = w.runs()->table();
    // Precision column highlighted, differences listed, final metrics shown.
    QVERIFY(t->item(rb, 3)->background().style() != Qt::NoBrush);
    QVERIFY(t->item(rb, 3)->font().bold());
    QVERIFY(t->item(rb, 10)->text().contains("precision.dtype = bf16"));
    QVERIFY(t->item(rb, 6)->text().endsWith("%"));
    QCOMPARE(t->item(rb, 1)->text(), QString("completed"));
    QCOMPARE(t->item(row_of(w, m_a), 3)->background().style(), Qt::NoBrush);
  }

  // In a 1280-wide window the table is about 940 px wide: the Differences column, what a
  // comparison is read for, was pushed past the right edge with its header cut ("Differen").
  // It ends inside the table with its whole header; in a wide table every column has its width.
  void differencesFitANarrowTable() {
    RunsPanel panel;
    panel.set_root(m_root);
    panel.set_baseline(m_a);
    panel.resize(940, 300);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QApplication::processEvents();
    auto* t = panel.table();
    const QHeaderView* h = t->horizontalHeader();
    const int diff = 10, header = h->fontMetrics().horizontalAdvance("Differences from baseline");
    QCOMPARE(t->horizontalHeaderItem(diff)->text(), QString("Differences from baseline"));
    QVERIFY2(h->sectionViewportPosition(diff) + h->sectionSize(diff) <= t->viewport()->width(),
             qPrintable(QString("Differences end at %1 px of %2")
                            .arg(h->sectionViewportPosition(diff) + h->sectionSize(diff))
                            .arg(t->viewport()->width())));
    QVERIFY2(h->sectionSize(diff) >= header, qPrintable(QString("%1 < %2 px").arg(h->sectionSize(diff)).arg(header)));
    // Wide: the columns keep their contents' widths (the run's name is not elided).
    panel.resize(1800, 300);
    QApplication::processEvents();
    int row = 0;
    while (row < t->rowCount() && t->item(row, 0)->data(Qt::UserRole).toString() != m_b) ++row;
    QVERIFY(row < t->rowCount());
    QVERIFY(h->sectionSize(0) >= t->fontMetrics().horizontalAdvance(t->item(row, 0)->text()));
  }

  void overlayTwoRuns() {
    MainWindow w(m_root);
    w.runs()->set_checked({m_a, m_b});
    QCOMPARE(w.plots()->runs().size(), 2);
    w.plots()->refresh();
    QCPGraph* ga = w.plots()->graph(PlotKind::Loss, "fp32 run · train");
    QCPGraph* gb = w.plots()->graph(PlotKind::Loss, "bf16 run · train");
    QVERIFY(ga && gb);
    QCOMPARE(ga->dataCount(), 60);
    QCOMPARE(gb->dataCount(), 60);
    QVERIFY(ga->pen().color() != gb->pen().color());
    QVERIFY(w.plots()->graph(PlotKind::Accuracy, "bf16 run · validation"));
    // Unticking one leaves the other.
    w.runs()->set_checked({m_b});
    QCOMPARE(w.plots()->runs().size(), 1);
  }

  void reopenLoadsConfig() {
    MainWindow w(m_root);
    w.reopen(m_b);
    QVERIFY(w.primary_run());
    QCOMPARE(w.primary_run()->dir, m_b);
    QCOMPARE(QString::fromStdString(w.form()->value("precision.dtype").get<std::string>()), QString("bf16"));
    QCOMPARE(w.plots()->runs().size(), 1);
  }

  void renameAndDeleteSurviveRestart() {
    const QString c = gui_test::make_run(m_root, "20260101-000200-digits-mlp-fp16", "fp16", 30);
    {
      MainWindow w(m_root);
      QCOMPARE(w.runs()->rows().size(), 3);
      QVERIFY(w.runs()->rename_run(m_a, "renamed baseline"));
      QCOMPARE(w.runs()->delete_runs({c}, false), 1);
      QVERIFY(!QFile::exists(c));
    }
    MainWindow w2(m_root);  // a restart reads the folder again
    QCOMPARE(w2.runs()->rows().size(), 2);
    bool found = false;
    for (const auto& r : w2.runs()->rows()) found = found || r.name == "renamed baseline";
    QVERIFY(found);
  }
};

QTEST_MAIN(TestRunsOverlay)
#include "test_runs_overlay.moc"
