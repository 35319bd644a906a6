// ctest-labels: unit;dist;no-asan
// Pipeline parallelism's runtime (train/pipeline_executor.h) on CPU ranks through MPI: `mpirun
// --allow-run-as-root --oversubscribe -np p` of this executable as a worker. Skipped when mpirun is
// absent or the build has no MPI. Each rank holds its stage of a small char-gpt (the balanced
// split, or a given one; under interleaved two chunks of one block each) and runs 5 optimizer steps of 4 micro-batches in the schedule's order,
// the activations and gradients going point to point; beside it, the whole one-rank model
// accumulates the same 4 micro-batches. Every step's loss (on the last stage) and every gradient
// of the stage equal the one-rank run's bit for bit (fp32), with dropout in some cases; the
// stage holds the table's peak count of micro-batches in flight, and its measured step (each action
// once, the parts within the step) adds up.
// Then trainlab-cli train at dist.pp 2 (1f1b and gpipe) against --accumulate 4 on one rank: every
// recorded loss, the test loss and every weight of the weights file (gathered from the stages) equal
// bit for bit (fp32; the helpers run one OpenBLAS thread a process); the layouts train does not run
// yet are refused naming the key.
#include <QtTest>
#include <random>

#include "backend/cpu_backend.h"
#include "dist/world.h"
#include "io/safetensors.h"
#include "rank_runs.h"
#include "test_support.h"
#include "train/pipeline_executor.h"
#include "train/pipeline_record.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

// w -= 0.05 g on the host for every parameter (the same arithmetic on each element in both runs).
void sgd(Backend& be, const std::vector<Parameter*>& params) {
  for (Parameter* p : params) {
    std::vector<float> w = download_f32(be, p->master);
    const std::vector<float> g = download_f32(be, p->grad);
    for (size_t j = 0; j < w.size(); ++j) w[j] -= 0.05f * g[j];
    be.upload(p->master, w.data(), DType::F32);
  }
}

size_t exec_actions(dist::PipelineSchedule kind, int p, int m, int v, int s) {
  return dist::build_schedule(kind, p, m, v).actions[static_cast<size_t>(s)].size();
}

int pipeline_worker(const std::string& schedule, double dropout, const std::vector<int64_t>& layers_given) {
  CpuBackend be;
  auto world = dist::make_world(dist::launch_info(), be, 60.0, "auto");
  const int s = world->rank(), p = world->size(), m = 4;
  CharGptConfig c;
  c.vocab = 65;
  c.layers = 4, c.heads = 2, c.dim = 32, c.context = 16;
  c.dropout = dropout;
  const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(schedule, "schedule");
  const int v = kind == dist::PipelineSchedule::Interleaved ? 2 : 1, V = p * v;
  const std::vector<int64_t> cut = dist::stage_layer_split(kind, c.layers, p, v, layers_given);
  CharGpt whole(be, c, 7);
  // Chunk j of this rank: virtual stage k = j p + s, its blocks [first, last).
  std::vector<std::unique_ptr<CharGpt>> chunks;
  std::vector<CharGpt*> views;
  std::vector<Parameter*> held;
  std::string blocks;
  for (int j = 0; j < v; ++j) {
    const int k = j * p + s;
    int64_t first = 0;
    for (int q = 0; q < k; ++q) first += cut[static_cast<size_t>(q)];
    const int64_t last = first + cut[static_cast<size_t>(k)];
    chunks.push_back(std::make_unique<CharGpt>(be, c, 7, TensorParallel{}, PipelineSlice{first, last, k == 0, k == V - 1}));
    views.push_back(chunks.back().get());
    for (Parameter* q : chunks.back()->parameters()) held.push_back(q);
    blocks += " [" + std::to_string(first) + ", " + std::to_string(last) + ")";
  }
  PipelineExecutor exec(views, *world, dist::build_schedule(kind, p, m, v));
  std::map<std::string, Parameter*> by_name;
  for (Parameter* q : whole.parameters()) by_name[q->name] = q;
  const int64_t B = 2, T = c.context;
  const float mult = 1.0f / static_cast<float>(m * B * T);
  std::mt19937 g(11);
  for (int step = 0; step < 5; ++step) {
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < m; ++i) {
      std::vector<int32_t> x(static_cast<size_t>(B * T)), y(x.size());
      for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<int32_t>(g() % 65), y[j] = static_cast<int32_t>(g() % 65);
      xs.push_back(be.empty({B, T}, DType::I32, MemCategory::Workspace));
      ys.push_back(be.empty({B * T}, DType::I32, MemCategory::Workspace));
      be.upload(xs.back(), x.data(), DType::I32);
      be.upload(ys.back(), y.data(), DType::I32);
    }
    Tensor want = be.empty({2}, DType::F32, MemCategory::Workspace), got = be.empty({2}, DType::F32, MemCategory::Workspace);
    for (int i = 0; i < m; ++i) {
      Tensor logits = whole.forward(be, xs[static_cast<size_t>(i)], true);
      Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
      whole.cross_entropy(be, logits, ys[static_cast<size_t>(i)], &dl, mult, want, i > 0);
      whole.backward(be, dl, i > 0);
    }
    exec.step(be, xs, ys, mult, got);
    if (s == p - 1 && download_f32(be, got) != download_f32(be, want))
      return fail("step " + std::to_string(step) + ": loss sum " + std::to_string(download_f32(be, got)[0]) +
                  " against one rank's " + std::to_string(download_f32(be, want)[0]));
    for (Parameter* q : held)
      if (download_f32(be, q->grad) != download_f32(be, by_name.at(q->name)->grad))
        return fail("step " + std::to_string(step) + ": " + q->name + "'s gradient is not one rank's");
    // The step's events: every action of the list once, in order, within the step.
    const PipelineStepTimes times = exec.times();
    if (exec.events().size() != exec_actions(kind, p, m, v, s) || !(times.forward_s > 0 && times.backward_s > 0) ||
        !(times.other_s() >= -1e-9) || !(times.bubble() >= 0.0 && times.bubble() < 1.0))
      return fail("step " + std::to_string(step) + ": " + std::to_string(exec.events().size()) + " events, forward " +
                  std::to_string(times.forward_s) + " s, backward " + std::to_string(times.backward_s) + " s of " +
                  std::to_string(times.step_s) + " s");
    sgd(be, whole.parameters());
    sgd(be, held);
  }
  const int64_t peak = dist::simulate(dist::build_schedule(kind, p, m, v)).peak_in_flight[static_cast<size_t>(s)];
  if (exec.peak_in_flight() != peak)
    return fail("held " + std::to_string(exec.peak_in_flight()) + " micro-batches at once, the table " +
                std::to_string(peak));
  std::printf("OK rank %d blocks%s peak %d, last step %.2f ms, measured bubble %.3f\n", s, blocks.c_str(),
              exec.peak_in_flight(), 1e3 * exec.times().step_s, exec.times().bubble());
  return 0;
}

// Short char-gpt runs on the tiny preset (2 blocks): `steps` steps of 4 micro-batches of 8 windows.
QStringList gpt(const QString& out, int steps, const QStringList& more = {}) {
  return QStringList{"--model", "char-gpt", "--steps", QString::number(steps), "--batch", "8", "--seed", "3",
                     "--accumulate", "4", "--set", "train.eval_windows=16", "--set", "train.eval_every=3",
                     "--set", "model.dropout=0.1", "--out", out} + more;
}

// pipeline.jsonl: every step (the first 8 are), each stage's actions in the table's order within
// its step, the predictions the schedule's; each rank's metrics carry its stage's parts.
void check_timeline(const QString& dir, const QString& schedule) {
  const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(schedule.toStdString(), "schedule");
  const dist::PipelineTable table = dist::build_schedule(kind, 2, 4);
  const std::vector<PipelineStepRecord> steps = read_pipeline_timeline(dir.toStdString());
  QCOMPARE(steps.size(), size_t(6));
  for (size_t n = 0; n < steps.size(); ++n) {
    const PipelineStepRecord& r = steps[n];
    QVERIFY(r.step == static_cast<long>(n + 1) && r.schedule == schedule.toStdString() && r.p == 2 && r.m == 4 && r.v == 1);
    QCOMPARE(r.simulated_bubble, dist::simulate(table).idle_fraction);
    QCOMPARE(r.formula_bubble, dist::pipeline_bubble(kind, 2, 4, 1).fraction());
    for (int s = 0; s < 2; ++s) {
      const auto& acts = r.timing.stages[static_cast<size_t>(s)];
      QCOMPARE(acts.size(), table.actions[static_cast<size_t>(s)].size());
      double at = 0;
      for (size_t i = 0; i < acts.size(); ++i) {
        QVERIFY(acts[i].action == table.actions[static_cast<size_t>(s)][i]);
        QVERIFY(acts[i].start >= at && acts[i].end >= acts[i].start);
        at = acts[i].end;
      }
      const PipelineStageTimes& t = r.stages[static_cast<size_t>(s)];
      QVERIFY(t.rank == s && at <= t.step_ms && t.forward_ms > 0 && t.backward_ms > 0 && t.bubble >= 0 && t.bubble < 1);
    }
  }
  const Json ranks = last_metrics(dir).at("ranks");
  QCOMPARE(ranks.size(), size_t(2));
  for (int r = 0; r < 2; ++r) {
    const RankPipelineMetrics pm = RankStepMetrics::from_json(ranks[static_cast<size_t>(r)]).pipeline.value();
    QVERIFY(pm.stage == r && pm.forward_ms > 0 && pm.backward_ms > 0 && pm.bubble >= 0 && pm.bubble < 1);
    QCOMPARE(pm.simulated_bubble, steps[0].simulated_bubble);
  }
}

}  // namespace

class TestPipelineParallel : public QObject {
  Q_OBJECT
  bool no_mpi() { return mpirun_path().isEmpty() || !dist::built_with_mpi(); }

 private slots:
  void lossesAndGradientsMatchOneRank_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<QString>("dropout");
    QTest::addColumn<QString>("layers");
    QTest::newRow("pp 2, gpipe") << 2 << "gpipe" << "0" << "-";
    QTest::newRow("pp 2, 1f1b") << 2 << "1f1b" << "0" << "-";
    QTest::newRow("pp 2, 1f1b, dropout, blocks 3 + 1") << 2 << "1f1b" << "0.1" << "3,1";
    QTest::newRow("pp 4, 1f1b, dropout") << 4 << "1f1b" << "0.1" << "-";
    QTest::newRow("pp 2, interleaved, 2 chunks") << 2 << "interleaved" << "0" << "-";
    QTest::newRow("pp 2, interleaved, 2 chunks, dropout") << 2 << "interleaved" << "0.1" << "-";
  }
  void lossesAndGradientsMatchOneRank() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(int, ranks);
    QFETCH(QString, schedule);
    QFETCH(QString, dropout);
    QFETCH(QString, layers);
    const Result r = run(mpirun_path(), mpirun_args(ranks) + QStringList{QCoreApplication::applicationFilePath(),
                                                                       "--pipeline-worker", schedule, dropout, layers});
    QVERIFY2(r.code == 0 && r.out.count("OK rank") == ranks, qPrintable(describe(r)));
  }

  void trainerMatchesAccumulation_data() {
    QTest::addColumn<QString>("schedule");
    QTest::newRow("1f1b") << "1f1b";
    QTest::newRow("gpipe") << "gpipe";
  }
  void trainerMatchesAccumulation() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(QString, schedule);
    const QString one = m_tmp.path() + "/one", pp = m_tmp.path() + "/pp-" + schedule;
    if (!QFileInfo::exists(one + "/summary.json")) {  // one one-rank run for both schedules
      const Result r1 = cli(0, gpt(one, 6));
      QVERIFY2(r1.code == 0, qPrintable(describe(r1)));
    }
    const Result r2 = cli(2, gpt(pp, 6, {"--pp", "2", "--schedule", schedule}));
    QVERIFY2(r2.code == 0, qPrintable(describe(r2)));
    QCOMPARE(losses(pp), losses(one));
    QCOMPARE(losses(pp).size(), size_t(6));
    QCOMPARE(losses(pp, "val_loss"), losses(one, "val_loss"));
    const Json a = read_json((one + "/summary.json").toStdString()), b = read_json((pp + "/summary.json").toStdString());
    QCOMPARE(b.at("test_loss").get<double>(), a.at("test_loss").get<double>());
    QCOMPARE(b.at("ranks").get<int>(), 2);
    const SafeTensorsFile wa = read_safetensors((one + "/model.safetensors").toStdString());
    const SafeTensorsFile wb = read_safetensors((pp + "/model.safetensors").toStdString());
    QCOMPARE(wb.tensors.size(), wa.tensors.size());
    for (const SafeTensor& t : wa.tensors) {
      const SafeTensor* u = wb.find(t.name);
      QVERIFY2(u && u->shape == t.shape && u->bytes == t.bytes, qPrintable(QString::fromStdString(t.name)));
    }
    check_timeline(pp, schedule);
  }

  void timelineReaderNamesTheFault_data() {
    QTest::addColumn<QString>("line");
    QTest::addColumn<QString>("expected");
    const QString stage = R"({"stage":0,"rank":0,"step_ms":2,"forward_ms":1,"backward_ms":1,"recv_wait_ms":0,"bubble":0,"actions":%1})";
    const QString head = R"({"step":1,"schedule":"1f1b","p":1,"m":1,"v":1,"simulated_bubble":0,"formula_bubble":0,"stages":[%1]})";
    QTest::newRow("no stages") << R"({"step":1,"schedule":"1f1b","p":1,"m":1,"v":1,"simulated_bubble":0,"formula_bubble":0})"
                               << "line 1: field 'stages' is missing";
    QTest::newRow("bad op") << head.arg(stage.arg(R"([["X",0,0,0,1]])")) << "op 'X'";
    QTest::newRow("micro-batch past m") << head.arg(stage.arg(R"([["F",1,0,0,1]])")) << "outside m, v";
    QTest::newRow("schedule") << R"({"step":1,"schedule":"2f2b","p":1})" << "field 'schedule'";
  }
  void timelineReaderNamesTheFault() {
    QFETCH(QString, line);
    QFETCH(QString, expected);
    const QString dir = m_tmp.path() + "/bad-timeline";
    QDir().mkpath(dir);
    QFile f(dir + "/pipeline.jsonl");
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(line.toUtf8() + "\n");
    f.close();
    try {
      read_pipeline_timeline(dir.toStdString());
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains(expected) && QString(e.what()).contains("pipeline.jsonl"), e.what());
    }
    QVERIFY(read_pipeline_timeline((m_tmp.path() + "/none").toStdString()).empty());
  }

  void trainerRefusesWhatItDoesNotRun_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    QTest::newRow("interleaved") << QStringList{"--schedule", "interleaved", "--set", "dist.virtual_stages=2",
                                                "--set", "model.layers=4"}
                                 << "trainlab-cli train runs the schedules gpipe and 1f1b";
    QTest::newRow("checkpoints") << QStringList{"--set", "run.checkpoint_every=2"}
                                 << "set run.checkpoint_every 0";
  }
  void trainerRefusesWhatItDoesNotRun() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    const Result r = cli(2, gpt(m_tmp.path() + "/refused", 2, QStringList{"--pp", "2"} + args));
    QVERIFY2(r.code != 0 && error_lines(r).size() == 1 && error_lines(r)[0].contains(expected), qPrintable(describe(r)));
  }

 private:
  QTemporaryDir m_tmp;
};

int main(int argc, char** argv) {
  if (argc > 4 && std::string(argv[1]) == "--pipeline-worker") {
    try {
      std::vector<int64_t> layers;
      for (const QString& x : QString(argv[4]).remove(QChar(0x2d)).split(',', Qt::SkipEmptyParts)) layers.push_back(x.toLongLong());
      return pipeline_worker(argv[2], std::stod(argv[3]), layers);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  QCoreApplication app(argc, argv);
  TestPipelineParallel t;
  return QTest::qExec(&t, argc, argv);
}

#include "test_pipeline_parallel.moc"
