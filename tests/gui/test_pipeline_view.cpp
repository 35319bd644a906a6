// The Pipeline view (issue 39): a pipelined run (char-gpt tiny, dist.pp 2, 1f1b, 4 micro-batches,
// trainlab-cli under mpirun on 2 CPU ranks) opened in View > Pipeline schedule draws, for each
// recorded step, one block per action of pipeline.jsonl at its measured times, stage by stage, and
// beside it the ideal schedule of the same p and m; a run without a pipeline is refused with a
// message naming the folder. Skipped without mpirun or MPI in the build.
#include <QAction>
#include <QProcess>
#include <QSlider>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "dist/world.h"
#include "main_window.h"
#include "pipeline_chart.h"
#include "pipeline_view.h"
#include "rank_launch.h"

using namespace trainlab;
using namespace trainlab::app;

class TestPipelineView : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString m_run;

  static bool have_mpi() { return !QStandardPaths::findExecutable("mpirun").isEmpty() && dist::built_with_mpi(); }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    if (!have_mpi()) return;
    m_run = m_tmp.filePath("pp2");
    const QString cli = find_trainlab_cli();
    QVERIFY(!cli.isEmpty());
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OPENBLAS_NUM_THREADS", "1");
    p.setProcessEnvironment(env);
    p.start(QStandardPaths::findExecutable("mpirun"),
            {"--allow-run-as-root", "--oversubscribe", "-np", "2", cli, "train", "--device", "cpu", "--quiet",
             "--model", "char-gpt", "--steps", "3", "--batch", "4", "--accumulate", "4", "--seed", "3", "--set",
             "dist.pp=2", "--set", "dist.schedule=1f1b", "--set", "train.eval_windows=8", "--set",
             "run.save_weights=false", "--out", m_run});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
  }

  void blocksFollowTheTimeline() {
    if (!have_mpi()) QSKIP("mpirun or MPI is absent: several ranks are not tested");
    PipelineView v;
    QVERIFY2(v.load(m_run), qPrintable(v.error()));
    QCOMPARE(static_cast<int>(v.records().size()), 3);
    QCOMPARE(v.slider()->maximum(), 2);
    for (int i = 0; i < 3; ++i) {
      v.slider()->setValue(i);
      const PipelineStepRecord& r = v.records()[static_cast<size_t>(i)];
      QCOMPARE(r.p, 2);
      QCOMPARE(r.m, 4);
      // Every recorded action is one block, on its stage, as long as it took, in list order.
      const auto& blocks = v.measured()->blocks();
      size_t k = 0, actions = 0;
      for (const auto& stage : r.timing.stages) {
        actions += stage.size();
        double first = INFINITY;
        for (const auto& st : r.timing.stages)
          for (const auto& a : st) first = std::min(first, a.start);
        for (const dist::TimedAction& a : stage) {
          QVERIFY(k < blocks.size());
          const PipelineChart::Block& b = blocks[k++];
          QCOMPARE(b.stage, a.action.stage);
          QCOMPARE(b.micro_batch, a.action.micro_batch);
          QCOMPARE(static_cast<int>(b.op), static_cast<int>(a.action.op));
          QVERIFY(std::fabs((b.end - b.start) - (a.end - a.start)) < 1e-9);
          QVERIFY(std::fabs(b.start - (a.start - first)) < 1e-9);
        }
      }
      QCOMPARE(blocks.size(), actions);
      QCOMPARE(actions, size_t{2 * 2 * 4});  // 2 stages x (forward + backward) x 4 micro-batches
      QVERIFY2(v.measured()->title().contains("measured: idle"), qPrintable(v.measured()->title()));
      // The ideal schedule of the same layout: 1f1b at p 2, m 4 idles (p-1)/(m+p-1) = 20 %.
      QVERIFY2(v.ideal()->title().contains("idle 20.0 %"), qPrintable(v.ideal()->title()));
      QCOMPARE(v.table()->rowCount(), 3);  // two stages and the prediction
    }
  }

  void theMenuOpensTheShownRun() {
    if (!have_mpi()) QSKIP("mpirun or MPI is absent: several ranks are not tested");
    MainWindow w;
    w.reopen(m_run);
    PipelineView* v = w.show_pipeline_view();
    QVERIFY(v);
    QVERIFY(v->isVisible());
    QCOMPARE(static_cast<int>(v->records().size()), 3);
  }

  void aRunWithoutAPipelineIsRefused() {
    PipelineView v;
    QVERIFY(!v.load(m_tmp.path()));
    QVERIFY2(v.error().contains("pipeline.jsonl") && v.error().contains(QDir::toNativeSeparators(m_tmp.path())),
             qPrintable(v.error()));
  }
};

QTEST_MAIN(TestPipelineView)
#include "test_pipeline_view.moc"
