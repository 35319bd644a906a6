// The runs table's tags, notes and filter (issue 21): tags and notes are written into the run's
// folder (notes.json), shown in the table and in the report (`trainlab report`); the filter box
// keeps the rows whose name, tags, notes or config values match. Also View > Dark palette, which
// is remembered for the next window.
#include <QAction>
#include <QApplication>
#include <QFile>
#include <QLineEdit>
#include <QTableWidget>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"
#include "palette.h"
#include "report.h"
#include "train/run_notes.h"
#include "util/error.h"

using namespace trainlab::app;

class TestRunTags : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_root, m_a, m_b;

  static QStringList visible_dirs(MainWindow& w) {
    QStringList out;
    for (int i = 0; i < w.runs()->rows().size(); ++i)
      if (!w.runs()->table()->isRowHidden(i)) out << w.runs()->rows()[i].dir;
    return out;
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_run_tags");
    m_root = m_tmp.filePath("runs");
    m_a = gui_test::make_run(m_root, "20260101-000000-digits-mlp-fp32", "fp32", 20, "first try");
    m_b = gui_test::make_run(m_root, "20260101-000100-digits-mlp-bf16", "bf16", 20, "second try");
  }

  void tagsAndNotesAreKeptInTheRunFolder() {
    MainWindow w(m_root);
    QCOMPARE(w.runs()->set_run_notes(m_b, "baseline,  lr-sweep, baseline, ", "bf16 beats fp32 here\nkeep it"), QString());
    std::vector<std::string> warnings;
    const trainlab::RunNotes n = trainlab::read_run_notes(m_b.toStdString(), warnings);
    QVERIFY(warnings.empty());
    QCOMPARE(n.tags, (std::vector<std::string>{"baseline", "lr-sweep"}));
    QCOMPARE(n.notes, std::string("bf16 beats fp32 here\nkeep it"));
    // The table shows them after a reload, and so does a new window.
    MainWindow again(m_root);
    const auto& rows = again.runs()->rows();
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const RunRow& r) { return r.dir == m_b; });
    QVERIFY(it != rows.end());
    QCOMPARE(it->tags, QStringList({"baseline", "lr-sweep"}));
    bool shown = false;
    for (int c = 0; c < again.runs()->table()->columnCount(); ++c)
      for (int r = 0; r < again.runs()->table()->rowCount(); ++r)
        if (auto* item = again.runs()->table()->item(r, c); item && item->text() == "baseline, lr-sweep") shown = true;
    QVERIFY(shown);
    // The report (what `trainlab report` writes) carries them.
    const QString html = Report::from_dirs({m_a, m_b}).summary_html(false);
    QVERIFY2(html.contains("tags: baseline, lr-sweep"), qPrintable(html.left(3000)));
    QVERIFY(html.contains("bf16 beats fp32 here<br>keep it"));
    // A tag too long is refused with the reason, and the notes stay as they were.
    QVERIFY_EXCEPTION_THROWN(trainlab::parse_tags(std::string(100, 'x')), trainlab::Error);
    const QString error = w.runs()->set_run_notes(m_b, QString(100, 'x'), "lost");
    QVERIFY2(error.contains("at most 64"), qPrintable(error));
    QCOMPARE(trainlab::read_run_notes(m_b.toStdString(), warnings).notes, std::string("bf16 beats fp32 here\nkeep it"));
  }

  void filterByNameTagAndConfigValue() {
    MainWindow w(m_root);
    QCOMPARE(w.runs()->set_run_notes(m_b, "baseline", ""), QString());
    QCOMPARE(visible_dirs(w).size(), 2);
    w.runs()->filter_box()->setText("first");  // typed in the box
    QCOMPARE(visible_dirs(w), QStringList({m_a}));
    w.runs()->set_filter("baseline");
    QCOMPARE(visible_dirs(w), QStringList({m_b}));
    w.runs()->set_filter("dtype=fp32");
    QCOMPARE(visible_dirs(w), QStringList({m_a}));
    w.runs()->set_filter("bf16 try");  // every word must match
    QCOMPARE(visible_dirs(w), QStringList({m_b}));
    w.runs()->set_filter("nothing-like-this");
    QVERIFY(visible_dirs(w).isEmpty());
    w.runs()->set_filter("");
    QCOMPARE(visible_dirs(w).size(), 2);
  }

  // The overlay choices come back with the window: the ticked runs and the baseline.
  void overlayChoicesRestored() {
    {
      MainWindow w(m_root);
      w.runs()->set_checked({m_a, m_b});
      w.runs()->set_baseline(m_b);
    }
    MainWindow w(m_root);
    QCOMPARE(w.runs()->checked_dirs().size(), 2);
    QCOMPARE(w.runs()->baseline(), m_b);
    w.runs()->set_checked({});
  }

  void darkPaletteIsAViewToggleRemembered() {
    const QColor light = QApplication::palette().color(QPalette::Window);
    {
      MainWindow w(m_root);
      auto* dark = w.findChild<QAction*>("action_dark_palette");
      QVERIFY(dark && dark->isCheckable() && !dark->isChecked());
      dark->trigger();
      QVERIFY(dark_palette_in_use());
      QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
    }
    use_dark_palette(false);  // as a fresh start would be
    QCOMPARE(QApplication::palette().color(QPalette::Window), light);
    {
      MainWindow w(m_root);  // remembered
      QVERIFY(dark_palette_in_use());
      QVERIFY(w.findChild<QAction*>("action_dark_palette")->isChecked());
      w.findChild<QAction*>("action_dark_palette")->trigger();
      QVERIFY(!dark_palette_in_use());
      QCOMPARE(QApplication::palette().color(QPalette::Window), light);
    }
    MainWindow w(m_root);
    QVERIFY(!dark_palette_in_use());
  }
};

QTEST_MAIN(TestRunTags)
#include "test_run_tags.moc"
