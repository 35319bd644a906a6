// ctest-labels: unit;dist;no-asan
// Several ranks for real: `mpirun --allow-run-as-root --oversubscribe -np 2` of trainlab-cli (and
// of this executable as a communicator worker), on the CPU through MPI. Skipped when mpirun is
// absent or the build has no MPI.
//   * the MPI communicator: sums (fp32, bf16), uneven reduce-scatter and all-gather (in place too),
//     broadcast, host values, sub-communicators, the bytes counted;
//   * DDP on 2 ranks gives the one-rank losses of the same global batch within 1e-6 (fp32), with
//     and without accumulation, for the digits MLP and the tiny char-gpt, and the same bits twice;
//   * ZeRO 1, 2 and 3 give DDP's losses and weights, and each rank's ledger holds half the one-rank
//     optimizer state (and gradients from stage 2, weights at stage 3);
//   * each ZeRO rank's ledger of weights, gradients and optimizer state is the planner's
//     predict_rank_memory for that rank within 2% (the same shards, dist/shard.h) in fp32, bf16
//     and fp16 (16-bit: the fp32 masters sharded with the optimizer state), and the run records
//     that prediction beside the rank's ledger;
//   * summary.json's dist_times: each rank's mean time split and bytes over steps 2.., and the
//     scaling-efficiency estimate as docs/DISTRIBUTED.md defines it; bench --case scaling;
//   * gradient clipping by the global norm clips alike on every rank, as one rank would;
//   * bad input ends every rank with one clear error, never a hang: a batch the ranks cannot split,
//     a ZeRO stage on one rank, ranks with different configs, dist.ranks against the launcher, a
//     rank that dies, a rank that hangs (the watchdog's timeout); dist.transport nccl on CPU ranks
//     (an error from every rank that finds it).
#include <signal.h>

#include <QProcess>
#include <QStandardPaths>
#include <QtTest>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "backend/cpu_backend.h"
#include "dist/world.h"
#include "io/safetensors.h"
#include "plan/memory_model.h"
#include "rank_runs.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

// --- the communicator worker (this executable under mpirun) ----------------------------------

int collectives_worker() {
  using namespace trainlab::dist;
  CpuBackend be;
  auto w = make_world(launch_info(), be, 20.0, "auto");
  const int r = w->rank(), n = w->size();
  if (w->kind() != "mpi") return fail("world kind " + w->kind());
  // fp32 sum, in place.
  Tensor t = upload_f32(be, {float(r + 1), 2.0f, -1.0f}, {3});
  w->all_reduce(t)->wait();
  const float s = static_cast<float>(n * (n + 1) / 2);
  if (download_f32(be, t) != std::vector<float>{s, 2.0f * n, -1.0f * n}) return fail("fp32 all-reduce");
  if (w->bytes_sent() != static_cast<int64_t>(2.0 * (n - 1) / n * 12)) return fail("bytes of the all-reduce");
  // bf16 sum: rounded to bf16 after the addition.
  Tensor h = be.empty({2}, DType::BF16, MemCategory::Communication);
  const float hv[2] = {1.0f + float(r) / 256.0f, 3.0f};
  be.upload(h, hv, DType::F32);
  w->all_reduce(h)->wait();
  float expect0 = 0.0f;
  for (int i = 0; i < n; ++i) expect0 = round_to(DType::BF16, expect0 + round_to(DType::BF16, 1.0f + float(i) / 256.0f));
  const auto hs = download_f32(be, h);
  if (n == 2 && (hs[0] != expect0 || hs[1] != 6.0f)) return fail("bf16 all-reduce");
  // Uneven reduce-scatter: 5 elements, rank 0 gets 3 and rank 1 2 (or nothing, with a zero count).
  std::vector<float> in5{1, 2, 3, 4, 5};
  for (auto& x : in5) x *= float(r + 1);
  Tensor a = upload_f32(be, in5, {5});
  std::vector<int64_t> counts{3, 2};
  Tensor mine = be.empty({counts[static_cast<size_t>(r)]}, DType::F32, MemCategory::Communication);
  w->reduce_scatter(a, mine, counts)->wait();
  const std::vector<float> rs0{3, 6, 9}, rs1{12, 15};
  if (download_f32(be, mine) != (r == 0 ? rs0 : rs1)) return fail("uneven reduce-scatter");
  std::vector<int64_t> lopsided{5, 0};
  Tensor all_or_none = be.empty({lopsided[static_cast<size_t>(r)]}, DType::F32, MemCategory::Communication);
  w->reduce_scatter(a, all_or_none, lopsided)->wait();
  if (r == 0 && download_f32(be, all_or_none) != std::vector<float>{3, 6, 9, 12, 15}) return fail("reduce-scatter to one");
  // Uneven all-gather in place (this rank's part of `out` is its input) and from a buffer of its own.
  Tensor out = be.empty({5}, DType::F32, MemCategory::Communication);
  be.fill(out, -1.0f);
  Tensor part = element_range(out, r == 0 ? 0 : 3, r == 0 ? 3 : 5);
  be.fill(part, float(10 * (r + 1)));
  w->all_gather(part, out, counts)->wait();
  if (download_f32(be, out) != std::vector<float>{10, 10, 10, 20, 20}) return fail("all-gather in place");
  Tensor own = upload_f32(be, std::vector<float>(static_cast<size_t>(counts[static_cast<size_t>(r)]), float(r + 7)),
                          {counts[static_cast<size_t>(r)]});
  w->all_gather(own, out, counts)->wait();
  if (download_f32(be, out) != std::vector<float>{7, 7, 7, 8, 8}) return fail("all-gather");
  // Broadcast from rank 1; host values.
  Tensor b = upload_f32(be, {float(r), float(r)}, {2});
  w->broadcast(b, 1)->wait();
  if (download_f32(be, b) != std::vector<float>{1, 1}) return fail("broadcast");
  double v[2] = {double(r), -double(r)};
  w->all_reduce_host(v, HostReduce::Max);
  if (v[0] != n - 1 || v[1] != 0.0) return fail("host max");
  if (w->all_gather_host(uint64_t(100 + r)) != std::vector<uint64_t>{100, 101}) return fail("host all-gather");
  std::vector<uint8_t> bytes;
  if (r == 0) bytes = {1, 2, 3};
  w->broadcast_host(bytes, 0);
  if (bytes != std::vector<uint8_t>{1, 2, 3}) return fail("host broadcast");
  // Sub-communicators: each rank alone (colour = rank).
  auto alone = w->split(r, 0);
  if (alone->size() != 1 || alone->rank() != 0) return fail("split");
  Tensor one = upload_f32(be, {5.0f}, {1});
  alone->all_reduce(one)->wait();
  if (download_f32(be, one) != std::vector<float>{5.0f}) return fail("all-reduce over a group of one");
  w->barrier();
  std::printf("OK rank %d\n", r);
  return 0;
}

}  // namespace

class TestDistRanks : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString dir(const QString& name) { return m_tmp.path() + "/" + name; }

  bool skip_without_mpi() {
    return mpirun_path().isEmpty() || !dist::built_with_mpi();
  }

  // A short digits run: 6 steps of a global batch of 64, evaluated every 3 steps.
  QStringList digits(const QString& out, const QStringList& more = {}) {
    return QStringList{"--model", "digits-mlp", "--steps", "6", "--batch", "64", "--seed", "5", "--out", out,
                       "--set", "train.eval_every=3", "--set", "run.save_weights=false"} + more;
  }

 private slots:
  void initTestCase() {
    if (skip_without_mpi()) QSKIP("mpirun or MPI is absent: several ranks are not tested");
  }

  void mpiCollectives() {
    const Result r = run(mpirun_path(), mpirun_args(2) + QStringList{QCoreApplication::applicationFilePath(),
                                                                   "--collectives-worker"});
    QVERIFY2(r.code == 0 && r.out.count("OK rank") == 2, qPrintable(describe(r)));
  }

  // The same global batch on one rank and on two: the same losses within 1e-6 (the two halves'
  // gradients are summed in another order), and bit for bit the same on a second run.
  void ddpMatchesOneRank_data() {
    QTest::addColumn<QStringList>("extra");
    QTest::newRow("digits") << QStringList{};
    QTest::newRow("digits, accumulate 2") << QStringList{"--accumulate", "2", "--set", "train.batch=32"};
    QTest::newRow("digits, sgd, small buckets") << QStringList{"--optimizer", "sgd", "--set", "dist.bucket_mb=0.01"};
  }
  void ddpMatchesOneRank() {
    QFETCH(QStringList, extra);
    const QString tag = QString(QTest::currentDataTag()).replace(' ', '_').replace(',', '_');
    const QString one = dir("one-" + tag), two = dir("two-" + tag), again = dir("again-" + tag);
    Result r = cli(0, digits(one, extra));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    r = cli(2, digits(two, extra));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    r = cli(2, digits(again, extra));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(losses(two).size(), size_t(6));
    const QString diff = compare(losses(one), losses(two), 1e-6);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    const QString vdiff = compare(losses(one, "val_loss"), losses(two, "val_loss"), 1e-6);
    QVERIFY2(vdiff.isEmpty(), qPrintable(vdiff));
    QVERIFY(losses(two) == losses(again));
    const Json sum = read_json((two + "/summary.json").toStdString());
    QCOMPARE(sum.at("ranks").get<int>(), 2);
    const Json m = last_metrics(two);
    QCOMPARE(m.at("ranks").size(), size_t(2));
    QVERIFY(m.at("ranks")[1].at("bytes_sent").get<int64_t>() > 0);
    // summary.json's dist_times: every rank's means over steps 2.., and the efficiency estimate
    // as docs/DISTRIBUTED.md defines it (every rank's compute over every rank's step time).
    const Json times = sum.at("dist_times");
    QCOMPARE(times.at("steps").get<long>(), 5L);
    QCOMPARE(times.at("ranks").size(), size_t(2));
    double compute = 0, step = 0, bytes1 = 0;
    for (const Json& line : metrics_lines(two.toStdString()))
      if (line.at("step").get<long>() > 1)
        for (const Json& r : line.at("ranks")) {
          compute += r.at("compute_ms").get<double>();
          step += r.at("step_ms").get<double>();
          if (r.at("rank").get<int>() == 1) bytes1 += r.at("bytes_sent").get<double>();
        }
    QVERIFY(std::fabs(times.at("efficiency_estimate").get<double>() - compute / step) <= 1e-9);
    QVERIFY(std::fabs(times.at("ranks")[1].at("bytes_sent").get<double>() - bytes1 / 5) <= 1e-6 * bytes1);
  }

  // bench --case scaling: the same global batch at 1 rank and at 2, from the two run records.
  void scalingBenchmark() {
    const Result r = run(TRAINLAB_CLI_PATH, {"bench", "--case", "scaling", "--ranks", "2", "--device", "cpu", "--steps",
                                             "4", "--modes", "ddp,zero2"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const QStringList lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    for (const QString& l : lines) {
      const Json j = Json::parse(l.toStdString());
      QCOMPARE(j.at("ranks").get<int>(), 2);
      const double t1 = j.at("ms_per_step_1").get<double>(), tn = j.at("ms_per_step_n").get<double>();
      QVERIFY2(t1 > 0 && tn > 0, qPrintable(l));
      QVERIFY(std::fabs(j.at("scaling_efficiency").get<double>() - t1 / (2 * tn)) <= 1e-9 * t1 / tn);
      const double e = j.at("efficiency_estimate").get<double>();
      QVERIFY2(e > 0 && e <= 1, qPrintable(l));
    }
    const Result bad = run(TRAINLAB_CLI_PATH, {"bench", "--case", "scaling", "--ranks", "3", "--device", "cpu"});
    QVERIFY2(bad.code != 0 && bad.out.contains("does not divide the global batch of 256"), qPrintable(describe(bad)));
  }

  void charGptMatchesOneRank() {
    const QStringList args{"--model", "char-gpt", "--steps", "4", "--batch", "8", "--set", "train.eval_windows=16",
                           "--set", "train.eval_every=2", "--set", "run.save_weights=false"};
    const QString one = dir("gpt-one"), two = dir("gpt-two");
    Result r = cli(0, args + QStringList{"--out", one});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    r = cli(2, args + QStringList{"--out", two, "--set", "checkpoint.policy=every-block"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const QString diff = compare(losses(one), losses(two), 1e-6);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    const QString vdiff = compare(losses(one, "val_loss"), losses(two, "val_loss"), 1e-6);
    QVERIFY2(vdiff.isEmpty(), qPrintable(vdiff));
  }

  // ZeRO: DDP's losses and, after the run, DDP's weights file (ZeRO-3 gathers the parameters, a
  // 16-bit run its fp32 masters); each rank's ledger holds half of the one-rank figure of what the
  // stage shards (85,002 parameters: the halves are exact), in 16-bit runs the fp32 masters with
  // the optimizer state from stage 1 on.
  void zeroMatchesDdp_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("precision");
    QTest::newRow("zero1") << "zero1" << "fp32";
    QTest::newRow("zero2") << "zero2" << "fp32";
    QTest::newRow("zero3") << "zero3" << "fp32";
    QTest::newRow("zero1 bf16") << "zero1" << "bf16";
    QTest::newRow("zero2 bf16") << "zero2" << "bf16";
    QTest::newRow("zero3 bf16") << "zero3" << "bf16";
    QTest::newRow("zero1 fp16") << "zero1" << "fp16";
  }
  void zeroMatchesDdp() {
    QFETCH(QString, strategy);
    QFETCH(QString, precision);
    const QStringList keep{"--precision", precision, "--set", "run.save_weights=true"};
    const QString one = dir("z-one-" + precision), ddp = dir("z-ddp-" + precision),
                  zero = dir("z-" + strategy + "-" + precision);
    if (!QFileInfo::exists(ddp + "/summary.json")) {
      Result r = cli(0, digits(one, keep));
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      r = cli(2, digits(ddp, keep));
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
    }
    const Result r =
        cli(2, digits(zero, keep + QStringList{"--set", "dist.strategy=" + strategy, "--set", "dist.bucket_mb=0.1"}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const QString diff = compare(losses(ddp), losses(zero), 1e-6);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    const QString vdiff = compare(losses(ddp, "val_loss"), losses(zero, "val_loss"), 1e-6);
    QVERIFY2(vdiff.isEmpty(), qPrintable(vdiff));
    const SafeTensorsFile a = read_safetensors((ddp + "/model.safetensors").toStdString());
    const SafeTensorsFile b = read_safetensors((zero + "/model.safetensors").toStdString());
    QCOMPARE(a.tensors.size(), b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i)
      QVERIFY2(a.tensors[i].bytes == b.tensors[i].bytes, a.tensors[i].name.c_str());
    const Json single = last_metrics(one).at("mem");
    const int stage = strategy.back().digitValue();
    const Json last = last_metrics(zero);
    QCOMPARE(last.at("ranks").size(), size_t(2));
    for (const Json& rank : last.at("ranks")) {
      const Json& mem = rank.at("mem");
      const QString who = QString("rank %1: %2").arg(rank.at("rank").get<int>()).arg(QString::fromStdString(mem.dump()));
      QVERIFY2(2 * mem_of(mem, "optimizer") == mem_of(single, "optimizer"), qPrintable(who));
      QCOMPARE(2 * mem_of(mem, "gradients") == mem_of(single, "gradients"), stage >= 2);
      QCOMPARE(2 * mem_of(mem, "weights") == mem_of(single, "weights"), stage == 3);
      // Communication buffers are their own category: the gradient shard's receive buffer (stage
      // 1), the units' gathered parameters while they run (stage 3).
      if (stage == 1) QVERIFY2(mem_of(mem, "communication") > 0, qPrintable(who));
      if (stage == 3) QVERIFY2(mem_of(rank.at("mem_peak"), "communication") > 0, qPrintable(who));
    }
  }

  // ZeRO's shards are the planner's: each rank's ledger of weights, gradients and optimizer state
  // within 2% of predict_rank_memory for its stage and rank (fp32 AdamW: 4 + 4 + 8 bytes a
  // parameter; 16-bit: 2 + 2 + (4 master + 8) bytes; each divided by 2 where the stage shards it),
  // and the prediction the run records for the rank is that one.
  void ledgerMatchesPlanner_data() {
    QTest::addColumn<int>("stage");
    QTest::addColumn<QString>("precision");
    for (const QString& precision : {QString("fp32"), QString("bf16"), QString("fp16")})
      for (int stage = 1; stage <= 3; ++stage)
        QTest::newRow(qPrintable(QString("zero%1 %2").arg(stage).arg(precision))) << stage << precision;
  }
  void ledgerMatchesPlanner() {
    QFETCH(int, stage);
    QFETCH(QString, precision);
    const QString out = dir(QString("planner-zero%1-%2").arg(stage).arg(precision));
    const Result r =
        cli(2, digits(out, {"--precision", precision, "--set", QString("dist.strategy=zero%1").arg(stage)}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    TrainingMemoryInputs in;
    in.params = read_json((out + "/summary.json").toStdString()).at("params").get<int64_t>();
    in.element_bytes = precision == "fp32" ? 4 : 2;
    in.optimizer_state_bytes = 8;
    const Json last = last_metrics(out);
    QCOMPARE(last.at("ranks").size(), size_t(2));
    for (const Json& rank : last.at("ranks")) {
      const int who = rank.at("rank").get<int>();
      const MemoryByCategory want = predict_rank_memory(in, {stage, 2, who});
      for (MemCategory c : {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer}) {
        const char* name = mem_category_name(c);
        const double predicted = static_cast<double>(want[static_cast<size_t>(c)]);
        const double ledger = static_cast<double>(mem_of(rank.at("mem"), name));
        QVERIFY2(std::fabs(ledger - predicted) <= 0.02 * predicted,
                 qPrintable(QString("rank %1 %2: ledger %3, predicted %4").arg(who).arg(name).arg(ledger).arg(predicted)));
        QCOMPARE(mem_of(rank.at("mem_predicted"), name), want[static_cast<size_t>(c)]);
      }
    }
  }

  // Gradient clipping by the global norm: the norm of the whole reduced gradient (DDP: every
  // rank's sum; ZeRO: the shards' sums added), so the ranks clip alike, as one rank would.
  void clippingAgreesAcrossRanks() {
    const QStringList clip{"--set", "optim.clip_norm=0.05"};
    const QString one = dir("clip-one"), ddp = dir("clip-ddp"), zero = dir("clip-zero2");
    Result r = cli(0, digits(one, clip));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    r = cli(2, digits(ddp, clip));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    r = cli(2, digits(zero, clip + QStringList{"--set", "dist.strategy=zero2"}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::vector<double> norms = losses(one, "grad_norm");
    QCOMPARE(norms.size(), size_t(6));
    QVERIFY2(norms[0] > 0.05, qPrintable(QString::number(norms[0])));  // the clip acts
    for (const QString& d : {ddp, zero}) {
      QString diff = compare(norms, losses(d, "grad_norm"), 1e-6);
      QVERIFY2(diff.isEmpty(), qPrintable(d + ": " + diff));
      diff = compare(losses(one), losses(d), 1e-6);
      QVERIFY2(diff.isEmpty(), qPrintable(d + ": " + diff));
    }
  }

  // --ranks N starts the ranks itself (mpirun with the same command line).
  void ranksFlagLaunches() {
    const QString out = dir("flag");
    const Result r = cli(0, digits(out, {"--ranks", "2"}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(read_json((out + "/summary.json").toStdString()).at("ranks").get<int>(), 2);
    QCOMPARE(read_json((out + "/config.json").toStdString()).at("dist").at("ranks").get<int>(), 2);
  }

  // Bad input: every rank ends, one error line (rank 0's) names what is wrong.
  void badInput_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("batch not divisible") << 2 << QStringList{"--batch", "63"}
                                         << "train.batch 63 does not split over the 2 ranks";
    QTest::newRow("zero on one rank") << 0 << QStringList{"--set", "dist.strategy=zero2"}
                                      << "dist.strategy zero2 shards the model over the ranks and needs at least 2";
    QTest::newRow("ranks against launcher") << 2 << QStringList{"--ranks", "3"}
                                            << "dist.ranks is 3 but mpirun started 2 ranks";
    QTest::newRow("zero with pruning") << 2 << QStringList{"--set", "dist.strategy=zero1", "--set", "prune.method=magnitude"}
                                       << "use dist.strategy ddp, not zero1";
  }
  void badInput() {
    QFETCH(int, ranks);
    QFETCH(QStringList, args);
    QFETCH(QString, mentions);
    const Result r = cli(ranks, QStringList{"--steps", "2", "--out", dir("bad")} + args);
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(errors.size() == 1 && errors[0].contains(mentions), qPrintable(describe(r)));
  }

  // dist.transport nccl on CPU ranks: every rank ends at once with the error naming the key, the
  // device and the fix (a plain Error, not a CollectiveError: on machines with other devices only
  // some ranks may find it, and their message must not be lost).
  void ncclOnCpuRanks() {
    const Result r = cli(2, {"--steps", "2", "--out", dir("nccl-cpu"), "--set", "dist.transport=nccl"});
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(!errors.isEmpty(), qPrintable(describe(r)));
    for (const QString& e : errors)
      QVERIFY2(e.contains("dist.transport nccl moves GPU tensors, but this rank runs on the CPU (device cpu): use "
                          "dist.transport=auto or mpi"),
               qPrintable(describe(r)));
  }

  // Each rank gets another seed: the config hash gathered at the start tells them apart.
  void ranksWithDifferentConfigs() {
    const QString script = R"(exec "$0" train --device cpu --quiet --steps 2 --out "$1" --seed $((3 + OMPI_COMM_WORLD_RANK)))";
    const Result r = run(mpirun_path(), mpirun_args(2) + QStringList{"sh", "-c", script, TRAINLAB_CLI_PATH, dir("differ")});
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(errors.size() == 1 && errors[0].contains("ranks were started with different configs: rank 1 differs from rank 0"),
             qPrintable(describe(r)));
  }

  // Rank 1 is killed (SIGKILL) or stopped (SIGSTOP: alive, never answering) once training runs:
  // the job ends with an error in seconds, never a hang. A stopped rank is found by rank 0's
  // watchdog (dist.timeout_s 3), which ends the job.
  void rankDiesOrHangs_data() {
    QTest::addColumn<QString>("signal");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("killed") << "KILL" << "";
    QTest::newRow("hangs") << "STOP" << "did not complete within 3 s (dist.timeout_s): another rank stopped";
  }
  void rankDiesOrHangs() {
    QFETCH(QString, signal);
    QFETCH(QString, mentions);
    const QString out = dir("dies-" + signal);
    // Rank 1 runs trainlab-cli in the background, waits for rank 0's first metrics line, then
    // signals it; its pid is left in a file so that the test can clean up a stopped process.
    const QString script = QString(R"(cli="$0"; out="$1"; shift
if [ "$OMPI_COMM_WORLD_RANK" != 1 ]; then exec "$cli" "$@"; fi
"$cli" "$@" & pid=$!
echo $pid > "$out.rank1.pid"
trap 'kill -KILL $pid 2>/dev/null' TERM INT HUP
i=0; while [ ! -s "$out/metrics.jsonl" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
kill -%1 $pid
wait $pid; exit $?)").arg(signal);
    const QStringList train{"train", "--device", "cpu", "--quiet", "--model", "char-gpt", "--steps", "100000",
                            "--batch", "8", "--out", out, "--set", "dist.timeout_s=3", "--set", "train.eval_windows=8"};
    const Result r = run(mpirun_path(), mpirun_args(2) + QStringList{"sh", "-c", script, TRAINLAB_CLI_PATH, out} + train,
                         90000);
    bool ok = false;
    const long pid = QString::fromStdString(read_text((out + ".rank1.pid").toStdString())).trimmed().toLong(&ok);
    if (ok && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);  // a stopped rank left behind
    QVERIFY2(r.code != 0 && r.code != -1, qPrintable(describe(r)));
    QVERIFY2(r.seconds < 60.0, qPrintable(describe(r)));
    QVERIFY2(metrics_lines(out.toStdString()).size() >= 1, qPrintable(describe(r)));
    if (!mentions.isEmpty()) {
      const QStringList errors = error_lines(r);
      QVERIFY2(!errors.isEmpty() && errors[0].contains("rank 0 of 2: all-reduce") && errors[0].contains(mentions),
               qPrintable(describe(r)));
    }
  }
};

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--collectives-worker") {
    try {
      return collectives_worker();
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  QCoreApplication app(argc, argv);
  TestDistRanks t;
  return QTest::qExec(&t, argc, argv);
}

#include "test_dist_ranks.moc"
