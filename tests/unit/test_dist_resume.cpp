// ctest-labels: unit;dist
// Checkpoints of a run over several ranks (train/run_shards.h), on the CPU through MPI (`trainlab-cli
// train --ranks N`, which starts mpirun). Skipped when mpirun is absent or the build has no MPI.
//   * a ZeRO-2 run on 2 ranks writes each rank's shard of the masters and optimizer state with the
//     layout in checkpoint.json; killed after its checkpoint and resumed on 2 ranks, on 1 rank
//     (dist.strategy ddp) and on 2 ranks as ZeRO-3, it gives the losses of the uninterrupted run
//     within 1e-6 relative, each step once in metrics.jsonl;
//   * a DDP run on 2 ranks resumed on 1 rank, and a one-rank run resumed on 2 ZeRO-1 ranks, alike;
//   * a damaged shard file is an error naming it;
//   * --gpus N with --resume of a CPU run says that the run keeps its device (--ranks N).
// A "kill" here is the folder of a finished run with its summary removed: exactly what a kill -9
// after the last step leaves, so the resume restarts from the checkpoint at step 3 of 6, with
// no race against a signal.
#include <QStandardPaths>
#include <QtTest>
#include <cmath>
#include <filesystem>

#include "cli_support.h"
#include "dist/world.h"
#include "test_support.h"
#include "train/run_checkpoint.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {


CliResult cli(const QStringList& args) {
  return run_cli(QStringList{"train", "--device", "cpu", "--quiet"} + args, 300000);
}

// train --resume DIR (the run keeps its own device and settings).
CliResult resume(const QString& dir, const QStringList& args) {
  return run_cli(QStringList{"train", "--quiet", "--resume", dir} + args, 300000);
}

std::vector<double> values(const QString& dir, const char* key = "loss") {
  std::vector<double> out;
  for (const Json& j : metrics_lines(dir.toStdString()))
    if (j.contains(key) && j.at(key).is_number()) out.push_back(j.at(key).get<double>());
  return out;
}

std::vector<long> steps(const QString& dir) {
  std::vector<long> out;
  for (const Json& j : metrics_lines(dir.toStdString())) out.push_back(j.at("step").get<long>());
  return out;
}

// Every value of b within `rel` (relative) of a's; a message naming the first that is not.
QString compare(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  if (a.size() != b.size() || a.empty()) return QString("%1 values against %2").arg(a.size()).arg(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= rel * std::fabs(a[i])))
      return QString("value %1: %2 against %3").arg(i).arg(a[i], 0, 'g', 17).arg(b[i], 0, 'g', 17);
  return {};
}

// A copy of a finished run's folder as a kill after its last step leaves it: no summary.json.
QString killed_copy(const QString& from, const QString& to) {
  fs::copy(from.toStdString(), to.toStdString(), fs::copy_options::recursive);
  fs::remove(to.toStdString() + "/summary.json");
  return to;
}

}  // namespace

class TestDistResume : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString dir(const QString& name) { return m_tmp.path() + "/" + name; }

  // 6 steps of a global batch of 64 with AdamW, warm-up and cosine decay, a checkpoint at step 3.
  QStringList digits(const QString& out, const QStringList& more) {
    return QStringList{"--model", "digits-mlp", "--steps", "6",   "--batch", "64", "--seed", "5", "--out", out,
                       "--set",   "train.eval_every=3", "--set", "run.save_weights=false", "--set",
                       "run.checkpoint_every=3", "--set", "schedule.name=warmup-cosine", "--set", "schedule.warmup_steps=2"} +
           more;
  }

  // Resumes `killed` with `args`; its losses against the uninterrupted run's, each step once.
  void check_resumed(const QString& whole, const QString& killed, const QStringList& args) {
    const CliResult r = resume(killed, args);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(steps(killed), (std::vector<long>{1, 2, 3, 4, 5, 6}));
    QString diff = compare(values(whole), values(killed), 1e-6);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    diff = compare(values(whole, "val_loss"), values(killed, "val_loss"), 1e-6);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    const Json sum = read_json((killed + "/summary.json").toStdString());
    QCOMPARE(QString::fromStdString(sum.at("status").get<std::string>()), QString("completed"));
  }

 private slots:
  void initTestCase() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty() || !dist::built_with_mpi())
      QSKIP("mpirun or MPI is absent: several ranks are not tested");
    qputenv("OPENBLAS_NUM_THREADS", "1");
  }

  void zero2ResumesAtOtherRankCounts() {
    const QString whole = dir("zero2");
    const CliResult r = cli(digits(whole, {"--ranks", "2", "--set", "dist.strategy=zero2", "--set", "dist.bucket_mb=0.1"}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const auto ck = read_run_checkpoint(whole.toStdString());
    QVERIFY(ck && ck->progress.step == 3);
    QVERIFY2(ck->shards.has_value(), "checkpoint.json has no shard layout");
    QCOMPARE(ck->shards->world_size, 2);
    QCOMPARE(QString::fromStdString(ck->shards->strategy), QString("zero2"));
    const int64_t n = ck->shards->elements;
    QCOMPARE(ck->shards->files.size(), size_t(2));
    QCOMPARE(ck->shards->files[0].end, (n + 1) / 2);
    QCOMPARE(ck->shards->files[1].end, n);
    for (const ShardFile& f : ck->shards->files)
      QVERIFY2(fs::file_size(whole.toStdString() + "/" + f.file) == f.bytes, f.file.c_str());

    check_resumed(whole, killed_copy(whole, dir("zero2-on-2")), {});
    check_resumed(whole, killed_copy(whole, dir("zero2-on-1")), {"--ranks", "1", "--set", "dist.strategy=ddp"});
    check_resumed(whole, killed_copy(whole, dir("zero2-as-zero3")), {"--set", "dist.strategy=zero3"});
  }

  void ddpAndOneRankReshard() {
    const QString ddp = dir("ddp");
    CliResult r = cli(digits(ddp, {"--ranks", "2"}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const auto ck = read_run_checkpoint(ddp.toStdString());
    QVERIFY(ck && !ck->shards);  // DDP: rank 0 writes the whole state
    check_resumed(ddp, killed_copy(ddp, dir("ddp-on-1")), {"--ranks", "1"});

    const QString one = dir("one");
    r = cli(digits(one, {}));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    check_resumed(one, killed_copy(one, dir("one-on-2-zero1")), {"--ranks", "2", "--set", "dist.strategy=zero1"});
    // --gpus N resumes a GPU run on N GPUs; a CPU run keeps its device, and is told to use --ranks.
    r = resume(killed_copy(one, dir("one-gpus")), {"--gpus", "2"});
    QVERIFY2(r.code != 0 && r.err.contains("trained on device 'cpu', and a resumed run keeps its device (use --ranks 2)"),
             qPrintable(describe(r)));
  }

  void damagedShardIsNamed() {
    const QString whole = dir("zero2");  // zero2ResumesAtOtherRankCounts's run
    const auto ck = read_run_checkpoint(whole.toStdString());
    QVERIFY(ck && ck->shards);
    const QString bad = killed_copy(whole, dir("zero2-damaged"));
    const std::string shard = bad.toStdString() + "/" + ck->shards->files[1].file;
    fs::resize_file(shard, fs::file_size(shard) - 4);
    const CliResult r = resume(bad, {"--ranks", "1", "--set", "dist.strategy=ddp"});
    QVERIFY2(r.code != 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(QString::fromStdString(ck->shards->files[1].file)) &&
                 r.err.contains("does not have the size checkpoint.json gives"),
             qPrintable(describe(r)));
  }
};

QTEST_GUILESS_MAIN(TestDistResume)
#include "test_dist_resume.moc"
