// The Planner view (View > Memory planner): its fields give the same plan as trainlab-cli plan
// (gpt2's preset on 8 GPUs: the hand-worked bytes of tests/unit/test_cli_plan.cpp), the memory plot
// stacks them by category per pipeline stage under the GPU's memory line, the time plot splits the
// step, a bad field names the option and clears the plots, the search fills its table and a row
// applies its layout, and "Check on this machine" runs tiny here with the ledger's bytes beside the
// prediction (and is refused, saying why, for a layout of several GPUs).
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"
#include "planner_view.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {
QCPBars* bars(QCustomPlot* p, const QString& name) {
  for (int i = 0; i < p->plottableCount(); ++i)
    if (p->plottable(i)->name().startsWith(name)) return qobject_cast<QCPBars*>(p->plottable(i));
  return nullptr;
}
}  // namespace

class TestPlannerView : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_planner_view"); }

  void gpt2OnEightGpus() {
    PlannerView v;
    v.set_field("--model", "char-gpt-gpt2");
    v.set_field("--precision", "bf16");
    v.set_field("--batch", 8);
    v.set_field("--gpus", 8);
    v.set_field("--zero", "1");
    QVERIFY2(v.has_result(), qPrintable(v.error()));
    const PlanResult& r = v.result();
    QCOMPARE(r.per_gpu[static_cast<size_t>(MemCategory::Weights)], int64_t{171884544});
    QCOMPARE(r.per_gpu[static_cast<size_t>(MemCategory::Optimizer)], int64_t{128913408});
    QCPBars* w = bars(v.memory_plot(), "weights");
    QVERIFY(w);
    QCOMPARE(w->data()->size(), 1);
    QCOMPARE(w->data()->at(0)->value, 171884544 / 1e9);
    QVERIFY(bars(v.memory_plot(), "activations"));
    QCOMPARE(bars(v.memory_plot(), "activations")->barBelow(), bars(v.memory_plot(), "optimizer"));  // stacked
    auto* line = v.memory_plot()->findChild<QCPItemStraightLine*>("gpu_memory");
    QVERIFY(line);
    QCOMPARE(line->point1->value(), 141.0);
    // The step's parts add up to the step.
    double sum = 0;
    for (int i = 0; i < v.time_plot()->plottableCount(); ++i)
      sum += qobject_cast<QCPBars*>(v.time_plot()->plottable(i))->data()->at(0)->value;
    QVERIFY(std::fabs(sum - r.time.step_s) < 1e-12 * r.time.step_s + 1e-15);
    QVERIFY(v.summary()->text().contains("fits"));
    // Two pipeline stages: two bars, the first stage keeps two micro-batches in flight.
    v.set_field("--pp", 2);
    v.set_field("--micro-batches", 4);
    QVERIFY2(v.has_result(), qPrintable(v.error()));
    QCOMPARE(bars(v.memory_plot(), "weights")->data()->size(), 2);
    QCOMPARE(v.result().stages[0].in_flight, int64_t{2});
  }

  void badFieldNamesTheOption() {
    PlannerView v;
    v.set_field("--model", "char-gpt-gpt2");
    v.set_field("--gpus", 10);
    v.set_field("--tp", 5);
    QVERIFY(!v.has_result());
    QVERIFY2(v.error().contains("--tp 5 must divide --heads 12"), qPrintable(v.error()));
    QVERIFY(v.summary()->text().contains("--tp 5 must divide --heads 12"));
    QCOMPARE(v.memory_plot()->plottableCount(), 0);
    QVERIFY(!v.check_button()->isEnabled());
    v.set_field("--tp", 2);
    QVERIFY2(v.has_result(), qPrintable(v.error()));
  }

  void searchAndApply() {
    PlannerView v;
    v.set_field("--model", "char-gpt-gpt2");
    v.set_field("--batch", 4);
    v.set_field("--gpus", 8);
    v.set_field("--gpu-memory", 2.0);
    v.run_search();
    const SearchResult& s = v.search_result();
    QCOMPARE(s.considered, int64_t{78});
    QVERIFY(!s.fit.empty());
    QCOMPARE(v.search_table()->rowCount(), static_cast<int>(s.fit.size()));
    const int row = static_cast<int>(s.fit.size()) - 1;  // the slowest that fits
    v.apply_search_row(row);
    QVERIFY2(v.has_result(), qPrintable(v.error()));
    const Layout& want = s.fit[static_cast<size_t>(row)].layout;
    QCOMPARE(v.result().layout.tp, want.tp);
    QCOMPARE(v.result().layout.pp, want.pp);
    QCOMPARE(v.result().layout.zero, want.zero);
    QCOMPARE(v.result().layout.recompute, want.recompute);
    QCOMPARE(v.result().time.step_s, s.fit[static_cast<size_t>(row)].time.step_s);
  }

  void checkOnThisMachine() {
    PlannerView v;
    v.set_field("--model", "char-gpt-tiny");
    v.set_field("--batch", 4);
    v.set_field("--gpus", 2);
    QVERIFY(!v.check_button()->isEnabled());
    QVERIFY2(v.check_note()->text().contains("DP, TP and PP must be 1"), qPrintable(v.check_note()->text()));
    QVERIFY(!v.start_check("cpu"));
    v.set_field("--gpus", 1);
    QVERIFY(v.check_button()->isEnabled());
    QSignalSpy done(&v, &PlannerView::check_finished);
    QVERIFY(v.start_check("cpu"));
    QVERIFY(v.checking());
    QVERIFY(done.wait(120000));
    QCOMPARE(done.at(0).at(0).toBool(), true);
    QCOMPARE(v.check_table()->rowCount(), 5);
    for (int r = 0; r < 5; ++r) QCOMPARE(v.check_table()->item(r, 3)->text(), QString("100.00 %"));
    QVERIFY2(v.check_note()->text().contains("Checked on"), qPrintable(v.check_note()->text()));
  }

  void fromTheRunConfig() {
    Config c;
    c.set("model.name", "char-gpt");
    c.set("model.preset", "small");
    c.set("precision.dtype", "fp16");
    c.set("train.batch", "16");
    c.set("checkpoint.policy", "every-k");
    c.set("checkpoint.k", "3");
    PlannerView v;
    v.set_from_config(c);
    QVERIFY2(v.has_result(), qPrintable(v.error()));
    QCOMPARE(v.setup().model.transformer.layers, int64_t{6});
    QCOMPARE(v.setup().precision, std::string("fp16"));
    QCOMPARE(v.setup().micro_batch, int64_t{16});
    QCOMPARE(v.layout().recompute, Recompute::Full);
    QCOMPARE(v.layout().recompute_every, int64_t{3});
  }

  void menuOpensIt() {
    MainWindow w;
    QAction* a = w.findChild<QAction*>("action_planner");
    QVERIFY(a);
    QCOMPARE(a->shortcut(), QKeySequence("Ctrl+Shift+P"));
    a->trigger();
    auto* v = w.findChild<PlannerView*>();
    QVERIFY(v);
    QVERIFY(v->isVisible());
    QVERIFY2(v->has_result(), qPrintable(v->error()));
  }
};

QTEST_MAIN(TestPlannerView)
#include "test_planner_view.moc"
