// The Planner view (View > Memory planner): its fields give the same plan as trainlab-cli plan
// (gpt2's preset on 8 GPUs: the hand-worked bytes of tests/unit/test_cli_plan.cpp), the memory plot
// stacks them by category per pipeline stage under the GPU's memory line, the time plot splits the
// step, a bad field names the option and clears the plots, the search fills its table and a row
// applies its layout, and "Check on this machine" runs tiny here with the ledger's bytes beside the
// prediction (and is refused, saying why, for a layout of several GPUs).
// Also the pipeline schedule in the Planner view (app/pipeline_chart.h): with P > 1 the view draws its
// layout's schedule, one block per action at the simulated times (dist/pipeline_schedule.h), and
// its title gives the idle fraction beside the textbook's formula: 4 stages and 8 micro-batches
// idle 3/11 under 1F1B and GPipe, interleaved with 2 chunks (p-1)/(v m+p-1), zero-bubble below
// 1F1B with weight-gradient blocks of its own. One stage draws nothing and says why; a layout the
// schedule does not suit (interleaved with M not a multiple of P) names the options. With
// TRAINLAB_SHOT_DIR set, the 1F1B view is saved there as planner-pipeline.png.
#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"
#include "pipeline_chart.h"
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

  // Every drawn block is the simulation's action at the simulation's time, and each block is a
  // rectangle item of the plot.
  static void blocks_match(const PipelineChart& c, const dist::PipelineTiming& want) {
    size_t n = 0;
    for (const auto& stage : want.stages) n += stage.size();
    QCOMPARE(c.blocks().size(), n);
    size_t i = 0;
    for (const auto& stage : want.stages)
      for (const dist::TimedAction& a : stage) {
        const PipelineChart::Block& b = c.blocks()[i++];
        QCOMPARE(b.stage, a.action.stage);
        QCOMPARE(b.micro_batch, a.action.micro_batch);
        QCOMPARE(b.chunk, a.action.chunk);
        QCOMPARE(b.op, a.action.op);
        QCOMPARE(b.start, a.start);
        QCOMPARE(b.end, a.end);
      }
    int rects = 0;
    for (int k = 0; k < c.plot()->itemCount(); ++k) rects += qobject_cast<QCPItemRect*>(c.plot()->item(k)) != nullptr;
    QCOMPARE(rects, static_cast<int>(n) + static_cast<int>(want.stages.size()));  // + a background a row
  }


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

  void plannerDrawsItsSchedule() {
    PlannerView v;
    v.set_field("--model", "char-gpt-gpt2");
    v.set_field("--gpus", 4);
    v.set_field("--pp", 1);
    PipelineChart* c = v.pipeline_chart();
    QVERIFY(c->blocks().empty());
    QVERIFY2(c->note().contains("Set Pipeline stages P above 1"), qPrintable(c->note()));
    v.set_field("--pp", 4);
    v.set_field("--micro-batches", 8);
    v.set_field("--schedule", "1f1b");
    QVERIFY2(v.has_result(), qPrintable(v.error()));
    blocks_match(*c, dist::simulate(dist::build_schedule(dist::PipelineSchedule::OneFOneB, 4, 8)));
    QVERIFY2(c->title().contains("1f1b, 4 stages, 8 micro-batches: idle 27.3 % (formula (p-1)/(m+p-1) = 27.3 %)"),
             qPrintable(c->title()));
    QCOMPARE(v.result().time.bubble_fraction, 3.0 / 11.0);  // the planner's own bubble is the drawn one
    QVERIFY2(c->note().contains("stage 0 on: 4, 3, 2, 1"), qPrintable(c->note()));
    // TRAINLAB_SHOT_DIR set (tools/screenshots.sh): the view as a user sees it, for docs/screenshots.
    if (const QString shots = qEnvironmentVariable("TRAINLAB_SHOT_DIR"); !shots.isEmpty()) {
      v.resize(1600, 1000);
      v.show();
      QTest::qWait(200);
      QVERIFY(v.grab().save(shots + "/planner-pipeline.png"));
    }
    v.set_field("--schedule", "gpipe");
    blocks_match(*c, dist::simulate(dist::build_schedule(dist::PipelineSchedule::GPipe, 4, 8)));
    QVERIFY2(c->note().contains("stage 0 on: 8, 8, 8, 8"), qPrintable(c->note()));
    v.set_field("--schedule", "interleaved");
    v.set_field("--virtual-stages", 2);
    blocks_match(*c, dist::simulate(dist::build_schedule(dist::PipelineSchedule::Interleaved, 4, 8, 2),
                                    dist::chunk_costs({}, 2)));
    QVERIFY2(c->title().contains("(formula (p-1)/(v m+p-1) = 15.8 %)"), qPrintable(c->title()));
    v.set_field("--virtual-stages", 1);
    v.set_field("--schedule", "zb-h1");
    const dist::PipelineTiming zb = dist::simulate(dist::build_schedule(dist::PipelineSchedule::ZbH1, 4, 8));
    blocks_match(*c, zb);
    QVERIFY(zb.idle_fraction < 3.0 / 11.0);
    bool weights = false;
    for (const auto& b : c->blocks()) weights = weights || b.op == dist::PipeOp::BackwardWeight;
    QVERIFY(weights);
  }

  void unsuitedPipelineSaysWhy() {
    PipelineChart c;
    c.show_schedule(dist::PipelineSchedule::Interleaved, 4, 6, 2);
    QVERIFY(c.blocks().empty());
    QVERIFY2(c.note().contains("6") && c.note().contains("4"), qPrintable(c.note()));
  }
};

QTEST_MAIN(TestPlannerView)
#include "test_planner_view.moc"
