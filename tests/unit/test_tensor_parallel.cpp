// ctest-labels: unit;dist;no-asan
// Tensor and sequence parallelism (dist.tp, dist.sequence_parallel; nn/transformer.h) on CPU ranks
// through MPI: `mpirun --allow-run-as-root --oversubscribe -np N` of this executable as a worker
// and of trainlab-cli. Skipped when mpirun is absent or the build has no MPI.
//   * the split itself (no ranks): shards of every split kind put back give the whole tensor; the
//     vocabulary's uneven split;
//   * each rank's gradient shard after one forward and backward equals the matching slice of the
//     one-rank model's gradient within 1e-5 (relative, by norm), at tp 2 with and without sequence
//     parallelism, with dropout (the unsplit run's masks), and the loss equals one rank's;
//   * trainlab-cli at tp 2, tp 2 with sequence parallelism and tp 2 x dp 2 with ZeRO-1: the first 5
//     losses within 1e-5 of one rank's, every one of 100 steps within 1e-2;
//   * the weights file of a tp 2 run is the whole model: it loads into the one-rank model and
//     evaluates to the run's own final validation loss;
//   * each rank's ledger (weights, gradients, optimizer state, activations) within 2 % of the
//     planner's prediction for its layout, recorded beside it, in fp32 and bf16, with and without
//     sequence parallelism; each rank's bytes of a step equal the planner's tensor-parallel volume
//     (tensor_parallel_step_bytes) within 1 %;
//   * a tp 2 run killed after its checkpoint and resumed at tp 2 and at tp 1 (one rank) gives the
//     uninterrupted run's losses within 1e-5, each step once;
//   * bad input: a tp that does not divide the heads, the hidden width or the ranks, sequence
//     parallelism with a context tp does not divide or without tp, tp with the digits MLP.
#include <QtTest>
#include <filesystem>
#include <random>

#include "backend/cpu_backend.h"
#include "dist/tensor_group.h"
#include "dist/world.h"
#include "nn/transformer.h"
#include "plan/step_time.h"
#include "rank_runs.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

// ||a - b|| / ||b||.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0, n = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

// One forward and backward of `m` on tokens x [B, T] with labels: the loss sum.
double forward_backward(Backend& be, CharGpt& m, const Tensor& x, const Tensor& labels) {
  Tensor logits = m.forward(be, x, true);
  Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  m.cross_entropy(be, logits, labels, &dl, 1.0f / static_cast<float>(labels.numel()), stats, false);
  m.backward(be, dl, false);
  return download_f32(be, stats)[0];
}

// The worker: the whole tiny model and this rank's tensor-parallel shard of it, one step each.
int gradients_worker(bool sequence_parallel, double dropout) {
  CpuBackend be;
  auto world = dist::make_world(dist::launch_info(), be, 60.0, "auto");
  const int r = world->rank(), t = world->size();
  dist::CommTensorGroup group(*world);
  CharGptConfig c = CharGptConfig::preset("tiny");
  c.vocab = 65;  // 33 + 32 rows over two ranks
  c.dropout = dropout;
  CharGpt whole(be, c, 7);
  CharGpt part(be, c, 7, TensorParallel{&group, sequence_parallel});
  const int64_t B = 4, T = c.context;
  std::mt19937 g(3);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), next(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(g() % 65), next[i] = static_cast<int32_t>(g() % 65);
  Tensor x = be.empty({B, T}, DType::I32, MemCategory::Workspace), y = be.empty({B * T}, DType::I32, MemCategory::Workspace);
  be.upload(x, ids.data(), DType::I32);
  be.upload(y, next.data(), DType::I32);
  const double l1 = forward_backward(be, whole, x, y), lt = forward_backward(be, part, x, y);
  if (!(std::fabs(l1 - lt) <= 1e-6 * std::fabs(l1))) return fail("loss " + std::to_string(lt) + " against " + std::to_string(l1));
  const std::vector<Parameter*> pw = whole.parameters(), pt = part.parameters();
  for (size_t i = 0; i < pw.size(); ++i) {
    const std::vector<float> want = take_shard(download_f32(be, pw[i]->grad), pw[i]->shape, pt[i]->shard, t, r);
    const std::vector<float> got = download_f32(be, pt[i]->grad);
    if (got.size() != want.size()) return fail(pt[i]->name + ": shard of " + std::to_string(got.size()) + " elements");
    const double e = relative_error(got, want);
    if (!(e <= 1e-5)) return fail(pt[i]->name + ": gradient off by " + std::to_string(e) + " (relative)");
    const double ev = relative_error(download_f32(be, pt[i]->master),
                                     take_shard(download_f32(be, pw[i]->master), pw[i]->shape, pt[i]->shard, t, r));
    if (ev != 0.0) return fail(pt[i]->name + ": initial values are not the one-rank model's");
  }
  std::printf("OK rank %d loss %.9g\n", r, lt);
  return 0;
}

// Short char-gpt runs on the tiny preset: `steps` steps of a global batch of 8.
QStringList gpt(const QString& out, int steps, const QStringList& more = {}) {
  return QStringList{"--model", "char-gpt", "--steps", QString::number(steps), "--batch", "8", "--seed", "3",
                     "--set", "train.eval_windows=16", "--set", "train.eval_every=" + QString::number(steps),
                     "--out", out} + more;
}

}  // namespace

class TestTensorParallel : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString dir(const QString& name) { return m_tmp.path() + "/" + name; }
  bool no_mpi() { return mpirun_path().isEmpty() || !dist::built_with_mpi(); }
  std::vector<double> m_one;  // one rank's 100 losses (oneRank)

 private slots:
  // The split of nn/tensor_split.h, without ranks: every kind's shards put back give the whole.
  void shardsPutBackGiveTheWhole_data() {
    QTest::addColumn<int>("axis");
    QTest::addColumn<int>("blocks");
    QTest::addColumn<int>("ranks");
    QTest::newRow("rows") << 0 << 1 << 2;
    QTest::newRow("qkv rows") << 0 << 3 << 2;
    QTest::newRow("columns") << 1 << 1 << 4;
    QTest::newRow("uneven rows") << 0 << 1 << 3;
  }
  void shardsPutBackGiveTheWhole() {
    QFETCH(int, axis);
    QFETCH(int, blocks);
    QFETCH(int, ranks);
    const Shape shape{axis == 0 && blocks == 1 && ranks == 3 ? 65 : 24, 8};
    const ShardSpec s{axis, blocks};
    std::vector<float> whole(static_cast<size_t>(shape_numel(shape)));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
    std::vector<float> back(whole.size(), -1.0f);
    int64_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<float> part = take_shard(whole, shape, s, ranks, r);
      QCOMPARE(static_cast<int64_t>(part.size()), shape_numel(shard_shape(shape, s, ranks, r)));
      total += static_cast<int64_t>(part.size());
      put_shard(part, shape, s, ranks, r, back);
    }
    QCOMPARE(total, shape_numel(shape));
    QVERIFY(back == whole);
    // qkv: rank 0's rows are q, k and v of its half of the heads, in that order.
    if (blocks == 3) {
      const std::vector<float> part = take_shard(whole, shape, s, 2, 0);
      QCOMPARE(part[0], 0.0f);
      QCOMPARE(part[4 * 8], 8.0f * 8);   // k's first row (row 8 of 24)
      QCOMPARE(part[8 * 8], 16.0f * 8);  // v's first row
    }
    if (ranks == 3) QCOMPARE(shard_shape(shape, s, 3, 2), (Shape{21, 8}));  // 22 + 22 + 21
  }

  void gradientShardsMatchOneRank_data() {
    QTest::addColumn<QString>("sp");
    QTest::addColumn<QString>("dropout");
    QTest::newRow("tp 2") << "0" << "0";
    QTest::newRow("tp 2, sequence parallel") << "1" << "0";
    QTest::newRow("tp 2, dropout") << "0" << "0.1";
    QTest::newRow("tp 2, sequence parallel, dropout") << "1" << "0.1";
  }
  void gradientShardsMatchOneRank() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(QString, sp);
    QFETCH(QString, dropout);
    const Result r = run(mpirun_path(), mpirun_args(2) + QStringList{QCoreApplication::applicationFilePath(),
                                                                   "--gradients-worker", sp, dropout});
    QVERIFY2(r.code == 0 && r.out.count("OK rank") == 2, qPrintable(describe(r)));
  }

  void oneRank() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    const Result r = cli(0, gpt(dir("one"), 100));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    m_one = losses(dir("one"));
    QCOMPARE(m_one.size(), size_t(100));
  }

  // The same global batch: the first 5 losses within 1e-5, all 100 within 1e-2 (the partial sums
  // of the split products are added in another order, and fp32 training drifts apart from there).
  void lossesMatchOneRank_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QStringList>("sets");
    QTest::newRow("tp 2") << 2 << QStringList{"--set", "dist.tp=2"};
    QTest::newRow("tp 2, sequence parallel")
        << 2 << QStringList{"--set", "dist.tp=2", "--set", "dist.sequence_parallel=true"};
    QTest::newRow("tp 2 x dp 2, zero1") << 4 << QStringList{"--set", "dist.tp=2", "--set", "dist.strategy=zero1"};
  }
  void lossesMatchOneRank() {
    if (no_mpi() || m_one.empty()) QSKIP("mpirun or MPI is absent, or the one-rank run failed");
    QFETCH(int, ranks);
    QFETCH(QStringList, sets);
    const QString out = dir(QString("tp-%1-%2").arg(ranks).arg(sets.size()));
    const Result r = cli(ranks, gpt(out, 100, sets));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::vector<double> mine = losses(out);
    QCOMPARE(mine.size(), m_one.size());
    const QString first = compare(std::vector<double>(m_one.begin(), m_one.begin() + 5),
                                  std::vector<double>(mine.begin(), mine.begin() + 5), 1e-5);
    QVERIFY2(first.isEmpty(), qPrintable(first));
    const QString all = compare(m_one, mine, 1e-2);
    QVERIFY2(all.isEmpty(), qPrintable(all));
    const Json sum = read_json((out + "/summary.json").toStdString());
    QCOMPARE(sum.at("ranks").get<int>(), ranks);
    // The weights file is the whole model: the one-rank model evaluates it to the run's own loss.
    const Result e = run(TRAINLAB_CLI_PATH, {"eval", "--weights", out + "/model.safetensors", "--device", "cpu"});
    QVERIFY2(e.code == 0, qPrintable(describe(e)));
    const Json ev = Json::parse(e.out.trimmed().split('\n').last().toStdString());
    const double vl = sum.at("test_loss").get<double>();
    QVERIFY2(std::fabs(ev.at("val_loss").get<double>() - vl) <= 1e-5 * vl,
             qPrintable(QString("eval %1 against the run's %2\n").arg(ev.dump().c_str()).arg(vl) + describe(e)));
  }

  void ledgerAndBytesMatchPlanner_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<bool>("sp");
    QTest::newRow("fp32") << "fp32" << false;
    QTest::newRow("fp32, sequence parallel") << "fp32" << true;
    QTest::newRow("bf16") << "bf16" << false;
    QTest::newRow("bf16, sequence parallel") << "bf16" << true;
  }
  void ledgerAndBytesMatchPlanner() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(QString, precision);
    QFETCH(bool, sp);
    const QString out = dir("ledger-" + precision + (sp ? "-sp" : ""));
    QStringList more{"--precision", precision, "--set", "dist.tp=2", "--set", "run.save_weights=false"};
    if (sp) more += QStringList{"--set", "dist.sequence_parallel=true"};
    const Result r = cli(2, gpt(out, 3, more));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::vector<Json> lines = metrics_lines(out.toStdString());
    QCOMPARE(lines.size(), size_t(3));
    const Json& step2 = lines[1];  // no evaluation in it: the training step's traffic alone
    QCOMPARE(step2.at("ranks").size(), size_t(2));
    const int64_t eb = precision == "bf16" ? 2 : 4;
    TensorParallelTraffic t;
    t.layers = 2;
    t.tp = 2;
    t.activation_bytes = static_cast<double>(8 * 64 * 128 * eb);
    t.layernorm_bytes = static_cast<double>(128 * eb);
    t.sequence_parallel = sp;
    const double want_bytes = tensor_parallel_step_bytes(t);
    for (const Json& rank : step2.at("ranks")) {
      const double bytes = rank.at("bytes_sent").get<double>();
      QVERIFY2(std::fabs(bytes - want_bytes) <= 0.01 * want_bytes,
               qPrintable(QString("rank sent %1 bytes, the planner says %2").arg(bytes).arg(want_bytes)));
      for (const char* cat : {"weights", "gradients", "optimizer", "activations"}) {
        const double got = static_cast<double>(mem_of(rank.at("mem"), cat));
        const double want = static_cast<double>(mem_of(rank.at("mem_predicted"), cat));
        QVERIFY2(want > 0 && std::fabs(got - want) <= 0.02 * want,
                 qPrintable(QString("rank %1 %2: ledger %3, planner %4").arg(rank.at("rank").get<int>()).arg(cat)
                                .arg(got).arg(want)));
      }
    }
  }

  void resumesAtOtherDegrees() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    const QString whole = dir("resume-whole");
    const QStringList more{"--set", "dist.tp=2", "--set", "run.checkpoint_every=5", "--set", "run.save_weights=false",
                           "--set", "train.eval_every=5"};
    Result r = cli(2, gpt(whole, 10, more));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::vector<double> want = losses(whole);
    QCOMPARE(want.size(), size_t(10));
    for (const QStringList& at : {QStringList{"--ranks", "2"}, QStringList{"--ranks", "1", "--tp", "1"}}) {
      // What a kill after the last step leaves: the checkpoint of step 5, no summary.
      const QString killed = dir(QString("resume-at-%1").arg(at[1]));
      std::filesystem::copy(whole.toStdString(), killed.toStdString(), std::filesystem::copy_options::recursive);
      std::filesystem::remove(killed.toStdString() + "/summary.json");
      r = run(TRAINLAB_CLI_PATH, QStringList{"train", "--quiet", "--resume", killed} + at);
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      const std::vector<double> got = losses(killed);
      const QString diff = compare(want, got, 1e-5);
      QVERIFY2(diff.isEmpty(), qPrintable(diff + "\n" + describe(r)));
      QCOMPARE(read_json((killed + "/summary.json").toStdString()).at("status").get<std::string>(), std::string("completed"));
    }
  }

  void badInput_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    const QStringList gpt_args{"--model", "char-gpt", "--steps", "1", "--batch", "8"};
    QTest::newRow("heads") << 3 << gpt_args + QStringList{"--set", "dist.tp=3", "--set", "model.heads=4"}
                           << "dist.tp 3 does not divide model.heads 4";
    QTest::newRow("width") << 2 << gpt_args + QStringList{"--set", "dist.tp=2", "--set", "model.heads=1", "--set",
                                                          "model.dim=33"}
                           << "dist.tp 2 does not divide model.heads 1 nor the hidden width model.dim 33";
    QTest::newRow("ranks") << 3 << gpt_args + QStringList{"--set", "dist.tp=2"} << "dist.tp 2 does not divide the 3 ranks";
    QTest::newRow("context") << 2 << gpt_args + QStringList{"--set", "dist.tp=2", "--set", "dist.sequence_parallel=true",
                                                            "--set", "model.context=63"}
                             << "the context must be a multiple of dist.tp";
    QTest::newRow("sp without tp") << 2 << gpt_args + QStringList{"--set", "dist.sequence_parallel=true"}
                                   << "dist.sequence_parallel splits the tokens over the tensor-parallel ranks, but dist.tp is 1";
    QTest::newRow("digits") << 2 << QStringList{"--model", "digits-mlp", "--steps", "1", "--set", "dist.tp=2"}
                            << "dist.tp 2 splits a transformer's blocks over ranks; model.name digits-mlp has none";
  }
  void badInput() {
    if (no_mpi()) QSKIP("mpirun or MPI is absent");
    QFETCH(int, ranks);
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const Result r = cli(ranks, args + QStringList{"--out", dir("bad")});
    QVERIFY2(r.code != 0, qPrintable(describe(r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(errors.size() == 1 && errors[0].contains(message), qPrintable(describe(r)));
  }
};

int main(int argc, char** argv) {
  if (argc > 3 && std::string(argv[1]) == "--gradients-worker") {
    try {
      return gradients_worker(std::string(argv[2]) == "1", std::stod(argv[3]));
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  QCoreApplication app(argc, argv);
  TestTensorParallel t;
  return QTest::qExec(&t, argc, argv);
}

#include "test_tensor_parallel.moc"
