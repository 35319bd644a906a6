// The Ranks dock and the report of a run over several ranks (issue 17): a run started in the
// window with dist.ranks 2 (trainlab-cli through mpirun) shows, while it runs, each rank's memory
// stacked by category beside core/plan's prediction for that rank, and each rank's step split into
// compute, exposed communication and waiting; the report (HTML and PDF) has the per-rank table and
// the same two plots. A one-rank run gets a sentence, not empty plots. A tensor-parallel run (4
// ranks, dist.tp 2) stands its ranks in their groups, names each rank's group and the layout in the
// dock and in the report. The runs are skipped without mpirun or without MPI in the build.
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QProcess>
#include <QSpinBox>
#include <QStandardPaths>
#include <QtTest>
#include <cmath>
#include <qcustomplot.h>

#include "dist/world.h"
#include "gui_support.h"
#include "main_window.h"
#include "rank_launch.h"
#include "ranks_panel.h"
#include "report.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {

// The sum of a stacked bar chart's values at `key` (every QCPBars of the plot).
double stacked_at(QCustomPlot* p, double key) {
  double sum = 0;
  for (int i = 0; i < p->plottableCount(); ++i)
    if (auto* b = qobject_cast<QCPBars*>(p->plottable(i)))
      for (auto it = b->data()->constBegin(); it != b->data()->constEnd(); ++it)
        if (std::abs(it->key - key) < 1e-9) sum += it->value;
  return sum;
}

}  // namespace

class TestRanksPanel : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_ranked_dir;  // the two-rank run of the window test

  static bool have_mpi() { return !QStandardPaths::findExecutable("mpirun").isEmpty() && dist::built_with_mpi(); }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_ranks_panel");
    QVERIFY(m_tmp.isValid());
    qputenv("OPENBLAS_NUM_THREADS", "1");
  }

  void oneRankSaysWhy() {
    const QString dir = gui_test::make_run(m_tmp.path(), "one", "fp32", 3);
    RanksPanel panel;
    panel.set_run(std::make_shared<RunSeries>(RunSeries::load(dir)));
    QVERIFY2(panel.message().contains("trained on one rank"), qPrintable(panel.message()));
  }

  // In a 1280-wide window the dock is about 420 px wide and each plot about 300 px tall: the
  // memory legend's six categories in one column covered rank 0's bars. (No MPI needed: the
  // ranks' figures are given.)
  void memoryLegendLeavesTheBars() {
    auto run = std::make_shared<RunSeries>();
    run->name = "two ranks";
    for (int r = 0; r < 2; ++r) {
      RankStepMetrics m;
      m.rank = r;
      m.step_ms = 7, m.compute_ms = 1, m.comm_ms = 5, m.wait_ms = 1;
      for (size_t c = 0; c < kMemCategoryCount; ++c) {
        m.mem_current.by_category[c] = static_cast<int64_t>(300000 * (c + 1));
        m.mem_predicted.by_category[c] = static_cast<int64_t>(200000 * (c + 1));
      }
      m.mem_peak = m.mem_current;
      run->last_ranks.push_back(m);
    }
    RanksPanel panel;
    panel.resize(420, 640);
    panel.set_run(run);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.refresh();
    QCustomPlot* mem = panel.plot(RanksPanel::Plot::Memory);
    mem->replot(QCustomPlot::rpImmediateRefresh);
    const QRect legend = mem->legend->outerRect();
    QVERIFY(!legend.isEmpty());
    for (double key : {1.0 - 0.18, 1.0 + 0.18, 2.0 - 0.18, 2.0 + 0.18}) {
      const double x = mem->xAxis->coordToPixel(key), top = mem->yAxis->coordToPixel(stacked_at(mem, key));
      const QRectF bar(QPointF(x - 10, top), QPointF(x + 10, mem->yAxis->coordToPixel(0)));
      QVERIFY2(!legend.intersects(bar.toRect()),
               qPrintable(QString("the legend (%1 px tall) covers the bar at %2").arg(legend.height()).arg(key)));
    }
  }

  void windowFollowsTheRanks() {
    if (!have_mpi()) QSKIP("mpirun or MPI is absent: several ranks are not tested");
    MainWindow w(m_tmp.filePath("runs"));
    w.show();
    QVERIFY(!w.ranks_dock()->isVisible());
    qobject_cast<QSpinBox*>(w.form()->editor("train.steps"))->setValue(100000);
    qobject_cast<QComboBox*>(w.form()->editor("device.name"))->setCurrentText("cpu");
    auto* ranks = qobject_cast<QSpinBox*>(w.form()->editor("dist.ranks"));
    QVERIFY(ranks);
    ranks->setValue(2);
    auto* strategy = qobject_cast<QComboBox*>(w.form()->editor("dist.strategy"));
    QVERIFY(strategy);
    strategy->setCurrentText("zero2");
    QVERIFY(w.start_run());
    // Live: the dock shows itself with the first steps, while the ranks still train.
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run() && w.live_run()->size() >= 5, 60000);
    QVERIFY(w.running());
    QVERIFY(w.ranks_dock()->isVisible());
    // Closed by the user, it stays closed while the run goes on; reopened, it follows again.
    w.ranks_dock()->hide();
    const int64_t seen = w.live_run()->size();
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() > seen + 1, 30000);
    QVERIFY(!w.ranks_dock()->isVisible());
    w.ranks_dock()->show();
    RanksPanel* panel = w.ranks_panel();
    panel->refresh();
    QVERIFY2(panel->message().isEmpty(), qPrintable(panel->message()));
    const RunSeries& run = *w.live_run();
    QCOMPARE(run.last_ranks.size(), size_t(2));
    QCustomPlot* mem = panel->plot(RanksPanel::Plot::Memory);
    for (const RankStepMetrics& r : run.last_ranks) {
      // Each rank's bar is its ledger; the bar beside it is the planner's prediction for it.
      QCOMPARE(stacked_at(mem, r.rank + 1.0 - 0.18), static_cast<double>(r.mem_current.total()));
      QCOMPARE(stacked_at(mem, r.rank + 1.0 + 0.18), static_cast<double>(r.mem_predicted.total()));
      QVERIFY(r.mem_predicted.total() > 0);
    }
    QVERIFY(mem->legend->itemWithPlottable(mem->plottable(0)));  // the categories are named
    QCustomPlot* time = panel->plot(RanksPanel::Plot::Time);
    QCOMPARE(time->plottableCount(), 3);  // compute, exposed communication, waiting
    QCOMPARE(time->plottable(0)->name(), QString("compute"));
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->dist_times.steps() >= 3, 30000);
    panel->refresh();
    for (int r = 0; r < 2; ++r) QVERIFY(stacked_at(time, r + 1.0) > 0);
    QVERIFY2(panel->plot_title(RanksPanel::Plot::Time).contains("scaling efficiency estimate"),
             qPrintable(panel->plot_title(RanksPanel::Plot::Time)));
    w.stop_run();
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    m_ranked_dir = w.live_run()->dir;
    QVERIFY(QFile::exists(m_ranked_dir + "/summary.json"));
    // summary.json: the run's time split per rank, rank 0 holding every rank's figures.
    const Json times = RunSeries::load(m_ranked_dir).summary.at("dist_times");
    QCOMPARE(times.at("ranks").size(), size_t(2));
    QVERIFY(times.at("efficiency_estimate").get<double>() > 0 && times.at("efficiency_estimate").get<double>() <= 1);
    // Reopened in a window that has no live run (that crashed it: the dock read the live run's
    // folder), the finished run's ranks show as they did live.
    MainWindow again(m_tmp.filePath("runs"));
    again.show();
    again.reopen(m_ranked_dir);
    QVERIFY(again.ranks_dock()->isVisible());
    again.ranks_panel()->refresh();
    QVERIFY2(again.ranks_panel()->message().isEmpty(), qPrintable(again.ranks_panel()->message()));
  }

  void tensorParallelGroups() {
    if (!have_mpi()) QSKIP("mpirun or MPI is absent: several ranks are not tested");
    const QString cli = find_trainlab_cli(), out = m_tmp.filePath("tp2x2");
    QVERIFY(!cli.isEmpty());
    QProcess p;
    p.start(QStandardPaths::findExecutable("mpirun"),
            {"--allow-run-as-root", "--oversubscribe", "-np", "4", cli, "train", "--device", "cpu", "--quiet",
             "--model", "char-gpt", "--steps", "3", "--batch", "8", "--set", "dist.tp=2", "--set",
             "dist.sequence_parallel=true", "--set", "train.eval_windows=8", "--set", "run.save_weights=false",
             "--out", out});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    auto run = std::make_shared<RunSeries>(RunSeries::load(out));
    QCOMPARE(tensor_parallel_degree(*run), 2);
    RanksPanel panel;
    panel.set_run(run);
    QCustomPlot* mem = panel.plot(RanksPanel::Plot::Memory);
    // Ranks 0 and 1 (group 0) at 1 and 2, ranks 2 and 3 (group 1) at 3.5 and 4.5.
    const double keys[] = {1.0, 2.0, 3.5, 4.5};
    for (const RankStepMetrics& r : run->last_ranks)
      QCOMPARE(stacked_at(mem, keys[r.rank] - 0.18), static_cast<double>(r.mem_current.total()));
    auto* ticks = dynamic_cast<QCPAxisTickerText*>(mem->xAxis->ticker().data());
    QVERIFY(ticks && ticks->ticks().value(4.5).startsWith("rank 3\ngroup 1"));
    const QString layout = panel.layout_line();
    QVERIFY2(layout.contains("4 ranks: tensor-parallel groups of 2 (sequence parallel) x 2 data-parallel replicas, ddp"),
             qPrintable(layout));
    const QString html = Report::from_dirs({out}).summary_html(false);
    QVERIFY(html.contains("tensor-parallel groups of 2 (sequence parallel)"));
    QVERIFY(html.contains("<th>tensor-parallel group</th>"));
    QVERIFY(html.contains("<td>1 (tp rank 1)</td>"));
  }

  void reportHasTheRanks() {
    if (m_ranked_dir.isEmpty()) QSKIP("no run over several ranks (windowFollowsTheRanks skipped)");
    const QString one = gui_test::make_run(m_tmp.path(), "one-more", "fp32", 3);
    const Report rep = Report::from_dirs({m_ranked_dir, one});
    const QString html = rep.summary_html(false);
    QVERIFY(html.contains("<h2>Ranks</h2>"));
    QVERIFY(html.contains("scaling efficiency estimate"));
    QCOMPARE(html.count("<tr><td>0</td>") + html.count("<tr><td>1</td>"), 2);  // one row per rank, one run
    const QString path = m_tmp.filePath("report.html");
    rep.write_html(path);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(f.readAll());
    QVERIFY(text.contains("alt='Memory per rank"));
    QVERIFY(text.contains("alt='Time per rank"));
    rep.write_pdf(m_tmp.filePath("report.pdf"));
    QVERIFY(QFileInfo(m_tmp.filePath("report.pdf")).size() > 0);
  }
};

QTEST_MAIN(TestRanksPanel)
#include "test_ranks_panel.moc"
