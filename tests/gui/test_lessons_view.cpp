// The Lessons view (Help > Lessons): every lesson of the registry gets its controls and its table
// and plot with no code of its own; changing an input recomputes the table with the core's figures
// (the hand-worked values of tests/unit/test_lessons.cpp); inputs that do not fit each other say
// so; each lesson keeps its inputs; and an exported report's appendix lists each lesson's figures
// at the view's current inputs (or the defaults). Legends never sit on a curve.
#include <QAction>
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "lessons_view.h"
#include "main_window.h"
#include "report.h"

using namespace trainlab;
using namespace trainlab::app;

class TestLessonsView : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_lessons_view"); }

  // accumulate at its defaults: fp16 stalls at 0.25, bf16 at 0.03125 (test_lessons.cpp works them out).
  void defaultsShowTheCoreFigures() {
    LessonsView v;
    QCOMPARE(v.current_lesson(), QString("accumulate"));
    QCOMPARE(v.figure_text("fp16.stalled_at"), QString("0.25"));
    QCOMPARE(v.figure_text("bf16.stalled_at"), QString("0.03125"));
    QCOMPARE(v.figure_text("fp32.stalled_at"), QString("none"));
    const LessonResult r = run_lesson(find_lesson("accumulate"), {});
    QCOMPARE(v.table()->rowCount(), static_cast<int>(r.figures.size()));
    QCOMPARE(v.plot()->graphCount(), static_cast<int>(r.plot.series.size()));
    QCOMPARE(v.plot()->graph(2)->name(), QString("fp16"));
    QCOMPARE(v.plot()->graph(2)->data()->at(v.plot()->graph(2)->dataCount() - 1)->value, 0.25);
    QCOMPARE(v.plot()->graph(5)->name(), QString("exact"));  // the reference line, dashed
    QCOMPARE(v.plot()->graph(5)->pen().style(), Qt::DashLine);
    QCOMPARE(v.plot()->graph(0)->pen().style(), Qt::SolidLine);
  }

  // 1000 x 2^-10 in fp16 adds exactly: 0.9765625, and it never stalls.
  void changingAnInputChangesTheTable() {
    LessonsView v;
    QSignalSpy spy(&v, &LessonsView::recomputed);
    QVERIFY(v.input("n") && v.input("value"));
    v.input("n")->setValue(1000);
    v.input("value")->setValue(0.0009765625);
    QCOMPARE(spy.count(), 2);
    QCOMPARE(v.figure_text("fp16.sum"), QString("0.9765625"));
    QCOMPARE(v.figure_text("fp16.stall_step"), QString("0"));
    QCOMPARE(v.figure_text("exact"), QString("0.9765625"));
    // Typed text reads back as the number (1e-08 would be 0 in a 2-decimal spin box); 1e-8 is
    // below half fp16's smallest subnormal (2^-25), so fp16 adds zeros.
    LessonSpinBox* value = v.input("value");
    value->selectAll();
    QTest::keyClicks(value, "1e-08");
    QTest::keyClick(value, Qt::Key_Return);
    QCOMPARE(value->value(), 1e-8);
    QCOMPARE(value->text(), QString("1e-08"));
    QCOMPARE(v.figure_text("fp16.sum"), QString("0"));
    // Defaults puts them back.
    v.findChild<QPushButton*>("lesson_defaults")->click();
    QCOMPARE(v.input("n")->value(), 10000.0);
    QCOMPARE(v.figure_text("fp16.sum"), QString("0.25"));
  }

  // Every lesson from the list: one control an input (in its range), a row a figure, no error.
  void everyLessonBuildsItsControls() {
    LessonsView v;
    auto* list = v.findChild<QListWidget*>("lesson_list");
    QCOMPARE(list->count(), static_cast<int>(lesson_registry().size()));
    for (int i = 0; i < list->count(); ++i) {
      list->setCurrentRow(i);
      const Lesson& l = lesson_registry()[static_cast<size_t>(i)];
      QCOMPARE(v.current_lesson(), QString::fromStdString(l.name));
      QVERIFY2(v.error().isEmpty(), qPrintable(v.error()));
      for (const LessonInput& in : l.inputs) {
        LessonSpinBox* s = v.input(QString::fromStdString(in.key));
        QVERIFY2(s, in.key.c_str());
        QCOMPARE(s->minimum(), in.lo);
        QCOMPARE(s->maximum(), in.hi);
        QCOMPARE(s->value(), in.def);
      }
      QCOMPARE(v.table()->rowCount(), static_cast<int>(run_lesson(l, {}).figures.size()));
      QVERIFY(v.plot()->graphCount() > 0);
    }
  }

  // checkpointing with 3 blocks, d = 4, batch 2: 992 and 128 bytes kept (test_lessons.cpp).
  void checkpointingSmall() {
    LessonsView v;
    QVERIFY(v.select_lesson("checkpointing"));
    v.input("blocks")->setValue(3);
    v.input("d")->setValue(4);
    v.input("batch")->setValue(2);
    QCOMPARE(v.figure_text("full.kept_bytes"), QString("992"));
    QCOMPARE(v.figure_text("ckpt.kept_bytes"), QString("128"));
    QCOMPARE(v.figure_text("grad_max_abs_diff"), QString("0"));
  }

  // An outlier row past the rows: the error names the input and range; fixing it clears it.
  // Every lesson's legend sits outside its axes, so that no curve is hidden under it (the
  // quant-outlier lesson's legend covered its error curve).
  void legendsLeaveTheCurvesFree() {
    LessonsView v;
    v.resize(1100, 700);
    v.show();
    for (const Lesson& l : lesson_registry()) {
      QVERIFY(v.select_lesson(QString::fromStdString(l.name)));
      v.plot()->replot();
      const QRect legend = v.plot()->legend->outerRect(), axes = v.plot()->axisRect()->rect();
      QVERIFY2(legend.isValid() && !legend.intersects(axes), l.name.c_str());
    }
  }

  void inputsThatDoNotFitSaySo() {
    LessonsView v;
    QVERIFY(v.select_lesson("quant-outlier"));
    v.input("rows")->setValue(4);
    QVERIFY2(v.error().contains("input 'outlier_row' (outlier row): expected an integer in [0, rows - 1] = [0, 3]"),
             qPrintable(v.error()));
    v.input("outlier_row")->setValue(2);
    QVERIFY(v.error().isEmpty());
    QCOMPARE(v.figure_text("bytes.int8_row"), QString::number(4 * 512 + 4 * 4));
  }

  void eachLessonKeepsItsInputs() {
    LessonsView v;
    v.input("n")->setValue(500);
    QVERIFY(v.select_lesson("group-quant"));
    v.input("group")->setValue(8);
    QVERIFY(v.select_lesson("accumulate"));
    QCOMPARE(v.input("n")->value(), 500.0);
    const auto values = v.values();
    QCOMPARE(values.at("accumulate").at("n"), 500.0);
    QCOMPARE(values.at("group-quant").at("group"), 8.0);
    QCOMPARE(values.at("distillation").at("t_high"), 4.0);  // never shown: its defaults
    QVERIFY(!v.select_lesson("nope"));
  }

  void helpMenuOpensTheView() {
    MainWindow w(m_tmp.filePath("runs-menu"));
    auto* a = w.findChild<QAction*>("action_lessons");
    QVERIFY(a);
    a->trigger();
    auto* v = w.findChild<LessonsView*>();
    QVERIFY(v && v->isVisible());
    QCOMPARE(v->figure_text("fp16.stalled_at"), QString("0.25"));
  }

  // The exported HTML's appendix: every lesson's title, inputs and figures, at the defaults, and
  // at the Lessons view's inputs when the window exports with it open.
  void reportAppendix() {
    const QString root = m_tmp.filePath("runs");
    const QString run = gui_test::make_run(root, "r1", "fp32", 20);
    const QString plain = m_tmp.filePath("plain.html");
    Report::from_dirs({run}).write(plain);
    QFile f(plain);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(f.readAll());
    QVERIFY(html.contains("Appendix: lessons"));
    for (const Lesson& l : lesson_registry()) {
      QVERIFY2(html.contains(QString::fromStdString(l.title).toHtmlEscaped()), l.name.c_str());
      for (const LessonFigure& fig : run_lesson(l, {}).figures) {
        const QString cell = "<td>" + QString::fromStdString(fig.label).toHtmlEscaped() + "</td><td class='num'>" +
                             format_lesson_number(fig.value) + "</td>";
        QVERIFY2(html.contains(cell), qPrintable(cell));
      }
    }
    QVERIFY(html.contains("n = 10000"));

    MainWindow w(root);
    w.findChild<QAction*>("action_lessons")->trigger();
    auto* v = w.findChild<LessonsView*>();
    v->input("n")->setValue(1000);
    v->input("value")->setValue(0.0009765625);
    const QString current = m_tmp.filePath("current.html");
    QVERIFY(w.export_report({run}, current));
    QFile g(current);
    QVERIFY(g.open(QIODevice::ReadOnly));
    const QString html2 = QString::fromUtf8(g.readAll());
    QVERIFY(html2.contains("n = 1000, value = 0.0009765625"));
    QVERIFY(html2.contains("<td>fp16: the sum after N additions</td><td class='num'>0.9765625</td>"));
  }
};

QTEST_MAIN(TestLessonsView)
#include "test_lessons_view.moc"
