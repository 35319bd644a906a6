// The plot legends follow the runs: a renamed run's entries take its new name at once, and a run
// that failed to start (no step trained) leaves no entries behind next to the overlaid runs.
#include <QLineEdit>
#include <QSpinBox>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"

using namespace trainlab::app;

class TestLegendNames : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_root, m_a, m_b;

  // Every legend entry of every plot.
  static QStringList legend_names(MainWindow& w) {
    w.plots()->refresh();
    QStringList names;
    for (QCustomPlot* p : w.plots()->plots())
      for (int i = 0; i < p->legend->itemCount(); ++i)
        if (auto* item = qobject_cast<QCPPlottableLegendItem*>(p->legend->item(i)))
          names << item->plottable()->name();
    return names;
  }
  static int starting_with(const QStringList& names, const QString& prefix) {
    int n = 0;
    for (const auto& s : names) n += s.startsWith(prefix) ? 1 : 0;
    return n;
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_legend_names");
    QVERIFY(m_tmp.isValid());
    m_root = m_tmp.filePath("runs");
    m_a = gui_test::make_run(m_root, "a-fp32", "fp32", 30, "first");
    m_b = gui_test::make_run(m_root, "b-bf16", "bf16", 30, "second");
  }

  void renamedRunTakesItsNewNameInTheLegends() {
    MainWindow w(m_root);
    w.runs()->set_checked({m_a, m_b});
    const int before = starting_with(legend_names(w), "first · ");
    QVERIFY2(before > 0, qPrintable(legend_names(w).join(" | ")));
    QVERIFY(w.runs()->rename_run(m_a, "renamed"));
    const QStringList after = legend_names(w);
    QCOMPARE(starting_with(after, "first · "), 0);
    QCOMPARE(starting_with(after, "renamed · "), before);
    // The reopened (primary) run too, and a rename back to no label shows the folder's name.
    w.reopen(m_a);
    QVERIFY(w.runs()->rename_run(m_a, ""));
    QCOMPARE(starting_with(legend_names(w), "renamed · "), 0);
    QVERIFY(starting_with(legend_names(w), "a-fp32 · ") > 0);
  }

  void failedStartLeavesNoLegendEntries() {
    MainWindow w(m_root);
    w.show();
    w.runs()->set_checked({m_a, m_b});
    QVERIFY(!legend_names(w).isEmpty());
    qobject_cast<QSpinBox*>(w.form()->editor("train.steps"))->setValue(50);
    qobject_cast<QLineEdit*>(w.form()->editor("data.path"))->setText("/no/such/digits.csv");
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);
    QCOMPARE(w.message_kind(), QString("error"));
    // Only the two overlaid runs' entries (their order, which picks the one whose memory stack is
    // drawn, may change when the table reloads).
    const QStringList after = legend_names(w);
    QVERIFY(!after.isEmpty());
    QCOMPARE(starting_with(after, "a-fp32 · ") + starting_with(after, "second · "), after.size());
  }
};

QTEST_MAIN(TestLegendNames)
#include "test_legend_names.moc"
