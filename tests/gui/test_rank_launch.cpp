// The window's runs over several ranks (app/rank_launch.h): a config with dist.ranks 2 runs as
// processes through trainlab-cli and mpirun, and the window gets every step from the run record
// that rank 0 writes, then its status; a stop request ends it with status stopped. Skipped without
// mpirun or without MPI in the build.
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <thread>

#include "dist/world.h"
#include "rank_launch.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {
Config two_ranks(const QString& out, long steps) {
  Config c;
  c.set("device.name", "cpu");
  c.set("model.name", "digits-mlp");
  c.set("train.steps", std::to_string(steps));
  c.set("dist.ranks", "2");
  c.set("run.out", out.toStdString());
  return c;
}
}  // namespace

class TestRankLaunch : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty() || !dist::built_with_mpi())
      QSKIP("mpirun or MPI is absent: several ranks are not tested");
    QVERIFY2(!find_trainlab_cli().isEmpty(), "trainlab-cli not found beside the test");
    qputenv("OPENBLAS_NUM_THREADS", "1");
  }

  void followsTheRecord() {
    QTemporaryDir tmp;
    std::vector<StepMetrics> steps;
    std::atomic<bool> stop{false};
    const LaunchedRun r = run_through_launcher(two_ranks(tmp.path() + "/run", 5),
                                               [&](const StepMetrics& m) { steps.push_back(m); }, stop);
    QVERIFY2(r.status == "completed", qPrintable(r.status + ": " + r.message));
    QCOMPARE(steps.size(), size_t(5));
    QCOMPARE(steps.back().step, 5L);
    QCOMPARE(steps.back().ranks.size(), size_t(2));
  }

  void stopEndsTheRanks() {
    QTemporaryDir tmp;
    std::atomic<bool> stop{false};
    size_t seen = 0;
    const LaunchedRun r = run_through_launcher(two_ranks(tmp.path() + "/run", 1000000),
                                               [&](const StepMetrics&) {
                                                 if (++seen == 3) stop = true;
                                               },
                                               stop);
    QVERIFY2(r.status == "stopped", qPrintable(r.status + ": " + r.message));
  }

  void errorsAreTheLaunchers() {
    QTemporaryDir tmp;
    Config c = two_ranks(tmp.path() + "/run", 2);
    c.set("train.batch", "63");
    std::atomic<bool> stop{false};
    const LaunchedRun r = run_through_launcher(c, [](const StepMetrics&) {}, stop);
    QCOMPARE(r.status, QString("failed"));
    QVERIFY2(r.message.contains("train.batch 63 does not split over the 2 ranks"), qPrintable(r.message));
  }
};

QTEST_GUILESS_MAIN(TestRankLaunch)
#include "test_rank_launch.moc"
