// The pipeline schedule in the Planner view (app/pipeline_chart.h): with P > 1 the view draws its
// layout's schedule, one block per action at the simulated times (dist/pipeline_schedule.h), and
// its title gives the idle fraction beside the textbook's formula: 4 stages and 8 micro-batches
// idle 3/11 under 1F1B and GPipe, interleaved with 2 chunks (p-1)/(v m+p-1), zero-bubble below
// 1F1B with weight-gradient blocks of its own. One stage draws nothing and says why; a layout the
// schedule does not suit (interleaved with M not a multiple of P) names the options. With
// TRAINLAB_SHOT_DIR set, the 1F1B view is saved there as planner-pipeline.png.
#include <QLabel>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "pipeline_chart.h"
#include "planner_view.h"

using namespace trainlab;
using namespace trainlab::app;

class TestPipelineChart : public QObject {
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
  void initTestCase() { gui_test::isolate_settings("test_pipeline_chart"); }

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

  void unsuitedLayoutSaysWhy() {
    PipelineChart c;
    c.show_schedule(dist::PipelineSchedule::Interleaved, 4, 6, 2);
    QVERIFY(c.blocks().empty());
    QVERIFY2(c.note().contains("6") && c.note().contains("4"), qPrintable(c.note()));
  }
};

QTEST_MAIN(TestPipelineChart)
#include "test_pipeline_chart.moc"
