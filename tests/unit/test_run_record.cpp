// Run records that survive faults (issue 16): a write that fails (a file size limit: EFBIG, as a
// full disk gives ENOSPC) ends the run "failed" with the path and the reason and keeps every line
// written before; one writer per run folder; a finished run or a user's files are never written
// over unless asked (--overwrite, and never for the user's files); no symbolic link in a run folder
// is written through; a diverged run records null, not 0, for what it could not compute; readers
// keep every good row and say which lines they skipped.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <QProcess>
#include <QtTest>
#include <cmath>
#include <filesystem>

#include "test_support.h"
#include "train/run_record.h"
#include "train/step_columns.h"
#include "util/safe_file.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  QString err;
};

// trainlab-cli with `args`; `blocks` > 0 runs it under `ulimit -f blocks` (512-byte blocks), with
// SIGXFSZ ignored so that a write past the limit fails with EFBIG.
Result cli(const QStringList& args, int blocks = 0) {
  QProcess p;
  if (blocks > 0) {
    QStringList a = {"-c", QString("trap '' XFSZ; ulimit -f %1; exec \"$0\" \"$@\"").arg(blocks), TRAINLAB_CLI_PATH};
    p.start("/bin/sh", a + args);
  } else {
    p.start(QStringLiteral(TRAINLAB_CLI_PATH), args);
  }
  Result r;
  if (!p.waitForStarted(10000) || !p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    r.err = "did not start or finish";
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

QString describe(const Result& r) { return QString("exit %1, stderr: %2").arg(r.code).arg(r.err); }

QStringList train_args(const QString& out, int steps) {
  return {"train",   "--model", "digits-mlp", "--device", "cpu", "--steps", QString::number(steps),
          "--quiet", "--out",   out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every step of the record, read strictly: every line of metrics.jsonl parses and steps.bin reads
// with no warning and no torn block (a failed append leaves nothing partial behind), each step once.
std::vector<Json> strict_lines(const std::string& dir) {
  const std::string text = read_text(dir + "/metrics.jsonl");
  if (!text.empty() && text.back() != '\n') throw Error("metrics.jsonl ends in a partial line");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!Json::accept(line)) throw Error("metrics.jsonl has a line that is not JSON");
  const std::string bytes = read_text(dir + "/steps.bin");
  const StepColumnsRead cols = parse_step_columns(bytes, "steps.bin");
  if (!cols.warnings.empty() || cols.end_of_whole != bytes.size()) throw Error("steps.bin has a bad or torn block");
  const std::vector<Json> out = metrics_lines(dir);
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].at("step").get<long>() <= out[i - 1].at("step").get<long>()) throw Error("a step read twice");
  return out;
}

}  // namespace

class TestRunRecord : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const std::string& name) const { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  // The record hits the file size limit mid-run (steps.bin first: it grows by about 20 bytes a
  // step, metrics.jsonl by a line an epoch): exit 1, status "failed" naming the file and the
  // reason, and every block and line written before intact (was: exit 0, "completed", truncated
  // lines). The steps of the block that could not be written (at most StepColumnsWriter::kBlockRows)
  // are what the record lacks.
  void failedMetricsWriteEndsTheRun() {
    const std::string out = path("efbig");
    const Result r = cli(train_args(q(out), 1500) << "--set"
                                                  << "run.save_weights=false",
                         40);  // 20 KiB a file
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("error: " + q(out) + "/steps.bin: cannot write (File too large)"),
             qPrintable(describe(r)));
    const Json sum = read_json(out + "/summary.json");
    QCOMPARE(sum.at("status").get<std::string>(), std::string("failed"));
    QVERIFY2(has(sum.at("message").get<std::string>(), out + "/steps.bin: cannot write (File too large)"),
             sum.dump().c_str());
    const std::vector<Json> lines = strict_lines(out);
    const long steps = sum.at("steps").get<long>();
    // steps.bin's whole blocks hold 1, 2, 3...; lines of steps in the block that failed may follow.
    const StepColumnsRead cols = parse_step_columns(read_text(out + "/steps.bin"), "steps.bin");
    for (size_t i = 0; i < cols.rows.size(); ++i) QCOMPARE(cols.rows[i].step, static_cast<long>(i + 1));
    QVERIFY2(cols.rows.size() > 5 && static_cast<long>(lines.size()) <= steps &&
                 static_cast<long>(cols.rows.size() + StepColumnsWriter::kBlockRows) >= steps,
             qPrintable(QString("%1 steps read, summary %2").arg(lines.size()).arg(steps)));
    QVERIFY(sum.at("test_accuracy").is_null());  // not evaluated: no value
  }

  // The weights cannot be written: status "failed" naming model.safetensors, nothing half-written
  // left in the folder (was: an error with no summary at all).
  void failedWeightsWriteEndsTheRun() {
    const std::string out = path("efbig-weights");
    const Result r = cli(train_args(q(out), 3), 40);  // the weights are 340 KB
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(q(out) + "/model.safetensors: cannot write (File too large)"), qPrintable(describe(r)));
    const Json sum = read_json(out + "/summary.json");
    QCOMPARE(sum.at("status").get<std::string>(), std::string("failed"));
    QCOMPARE(strict_lines(out).size(), size_t(3));
    QVERIFY(!fs::exists(out + "/model.safetensors"));
    QVERIFY(!fs::exists(out + "/model.safetensors.part"));
  }

  // Nothing can be written any more (the limit below even a summary's size): the failure says
  // that the summary could not be written either, and the lines before stay whole.
  void failedSummaryIsReported() {
    const std::string out = path("no-summary");
    Config c = digits_config(out, 50);
    c.set("run.save_weights", "false");
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ignore, &old);
    rlimit saved{};
    getrlimit(RLIMIT_FSIZE, &saved);
    TrainerCallbacks cb;
    cb.on_step = [&](const StepMetrics& m) {
      if (m.step != 5) return;
      rlimit low = saved;
      low.rlim_cur = 100;  // bytes: the record's files are past it already, and a summary is larger
      setrlimit(RLIMIT_FSIZE, &low);
    };
    RunSummary s;
    {
      Trainer t(c, cb);
      s = t.run();
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    sigaction(SIGXFSZ, &old, nullptr);
    QCOMPARE(s.status, std::string("failed"));
    // The first write after the limit fails: steps.bin's next block (every second) or the next line.
    QVERIFY2(has(s.message, out + "/steps.bin: cannot write (File too large)") ||
                 has(s.message, out + "/metrics.jsonl: cannot write (File too large)"),
             s.message.c_str());
    QVERIFY2(has(s.message,
                 "summary.json could not be written either: " + out + "/summary.json: cannot write (File too large)"),
             s.message.c_str());
    QVERIFY(!fs::exists(out + "/summary.json"));
    QVERIFY(!fs::exists(out + "/summary.json.part"));
    QVERIFY(strict_lines(out).size() <= 6);  // the block that failed held the steps from its first
  }

  // Two writers of one folder: the second is refused while the first runs, and the first's record
  // goes on unmixed (was: the second truncated metrics.jsonl and both appended to it).
  void secondWriterIsRefused() {
    const std::string out = path("busy");
    QProcess first;
    first.start(QStringLiteral(TRAINLAB_CLI_PATH), train_args(q(out), 1000000));
    QVERIFY(first.waitForStarted(10000));
    for (int i = 0; i < 600 && read_text(out + "/metrics.jsonl").size() < 2000; ++i) QTest::qWait(50);
    QVERIFY2(read_text(out + "/metrics.jsonl").size() >= 2000, "the first run wrote no steps");
    const Result second = cli(train_args(q(out), 3) << "--overwrite");
    QVERIFY2(second.code == 1 && second.err.contains("run folder '" + q(out) + "' is in use by another run"),
             qPrintable(describe(second)));
    QCOMPARE(::kill(static_cast<pid_t>(first.processId()), SIGTERM), 0);
    QVERIFY(first.waitForFinished(60000));
    QCOMPARE(first.exitCode(), 130);
    const std::vector<Json> lines = strict_lines(out);
    for (size_t i = 0; i < lines.size(); ++i) QCOMPARE(lines[i].at("step").get<long>(), static_cast<long>(i + 1));
    QCOMPARE(static_cast<long>(lines.size()), read_json(out + "/summary.json").at("steps").get<long>());
    // In one process too: the lock belongs to the open record, not to the process.
    RunRecord a(path("one-process"), digits_config("", 1));
    const std::string e =
        error_of([&] { RunRecord b(path("one-process"), digits_config("", 1), RunOpenMode::Overwrite); });
    QVERIFY2(has(e, "is in use by another run"), e.c_str());
  }

  // A folder that holds a finished run is refused unless --overwrite (was: silently replaced).
  void finishedRunNeedsOverwrite() {
    const std::string out = path("finished");
    Result r = cli(train_args(q(out), 3));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const std::string before = read_text(out + "/metrics.jsonl");
    r = cli(train_args(q(out), 5));
    QVERIFY2(r.code == 1 && r.err.contains("run folder '" + q(out) + "' already holds a run (status completed)") &&
                 r.err.contains("--overwrite"),
             qPrintable(describe(r)));
    QCOMPARE(read_text(out + "/metrics.jsonl"), before);
    r = cli(train_args(q(out), 5) << "--overwrite");
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(strict_lines(out).size(), size_t(5));
    QCOMPARE(read_json(out + "/summary.json").at("steps").get<long>(), 5L);
    // A killed run (no summary) is a run too.
    fs::remove(out + "/summary.json");
    r = cli(train_args(q(out), 2));
    QVERIFY2(r.code == 1 && r.err.contains("already holds a run (unfinished: no summary.json)"),
             qPrintable(describe(r)));
  }

  // Files the user wrote are never written over, --overwrite or not (was: `--config mydir/config.json
  // --out mydir` replaced the user's config.json).
  void userFilesAreNeverOverwritten() {
    const std::string dir = path("mydir");
    fs::create_directories(dir);
    const std::string mine = R"({"train": {"steps": 2}, "device": {"name": "cpu"}})";
    write_text(dir + "/config.json", mine);
    for (const bool overwrite : {false, true}) {
      QStringList args = {"train", "--config", q(dir + "/config.json"), "--quiet", "--out", q(dir)};
      if (overwrite) args << "--overwrite";
      const Result r = cli(args);
      QVERIFY2(r.code == 1 &&
                   r.err.contains("run folder '" + q(dir) + "' holds config.json, which is not a file a run wrote"),
               qPrintable(describe(r)));
      QCOMPARE(read_text(dir + "/config.json"), mine);
      QVERIFY(!fs::exists(dir + "/metrics.jsonl"));
    }
    // Beside a finished run, a file of the user's blocks --overwrite too, and stays.
    const std::string run = path("run-with-notes");
    QCOMPARE(cli(train_args(q(run), 2)).code, 0);
    write_text(run + "/notes.txt", "mine");
    const Result r = cli(train_args(q(run), 2) << "--overwrite");
    QVERIFY2(r.code == 1 && r.err.contains("holds notes.txt"), qPrintable(describe(r)));
    QCOMPARE(read_text(run + "/notes.txt"), std::string("mine"));
  }

  // A symbolic link in a run folder is refused, naming it, and its target is untouched (was: the
  // run truncated and wrote the link's target).
  void symlinksAreNotFollowed() {
    const std::string out = path("links");
    QCOMPARE(cli(train_args(q(out), 2)).code, 0);
    const std::string target = path("precious.txt");
    write_text(target, "precious");
    fs::remove(out + "/metrics.jsonl");
    fs::create_symlink(target, out + "/metrics.jsonl");
    const Result r = cli(train_args(q(out), 2) << "--overwrite");
    QVERIFY2(r.code == 1 && r.err.contains(q(out) + "/metrics.jsonl is a symbolic link"), qPrintable(describe(r)));
    QCOMPARE(read_text(target), std::string("precious"));
    // Below the folder rules: the writers themselves do not follow links.
    const std::string e = error_of([&] { AppendFile f(out + "/metrics.jsonl", true); });
    QVERIFY2(has(e, "metrics.jsonl is a symbolic link"), e.c_str());
    fs::create_symlink(target, path("summary.json.part"));
    write_file_atomic(path("summary.json"), "{}\n");
    QCOMPARE(read_text(target), std::string("precious"));
    QVERIFY(fs::is_regular_file(fs::symlink_status(path("summary.json"))));
  }

  // A diverged run: null (no value) for its test metrics and for the diverged step's loss and
  // accuracy, read back as no value; the CLI prints "no value" (was: 0 in the summary and output).
  void divergedRunRecordsNoValue() {
    const std::string out = path("diverged");
    const Result r = cli(train_args(q(out), 300) << "--optimizer"
                                                 << "sgd"
                                                 << "--lr"
                                                 << "10"  // the top of optim.lr's range: diverges with
                                                 << "--set"  // AdamW's weight decay (SGD's own only stalls)
                                                 << "optim.weight_decay=0.01");
    QVERIFY2(r.code == 3, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("test accuracy no value, test loss no value"), qPrintable(describe(r)));
    const Json sum = read_json(out + "/summary.json");
    QVERIFY2(sum.at("test_accuracy").is_null() && sum.at("test_loss").is_null(), sum.dump().c_str());
    const Json last = strict_lines(out).back();
    QVERIFY2(last.at("loss").is_null() && last.at("train_accuracy").is_null(), last.dump().c_str());
    const LoadedRun run = load_run(out);
    QVERIFY(std::isnan(run.steps.back().loss) && std::isnan(run.steps.back().train_accuracy));
    QVERIFY(run.summary.at("test_accuracy").is_null());
    QVERIFY(run.warnings.empty());
  }

  // A bad line in the middle of metrics.jsonl is skipped with its line number, and every other row
  // is kept; a torn last line is skipped silently (was: every row after the bad one dropped).
  void readerKeepsRowsAfterABadLine() {
    const std::string out = path("bad-line");
    QCOMPARE(cli(train_args(q(out), 8)).code, 0);
    std::vector<std::string> lines;
    for (const Json& j : strict_lines(out)) lines.push_back(j.dump());
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i == 3) text += "{\"step\": 4, \"loss\": garbage\n";  // line 4
      if (i == 5) text += "{\"step\": \"six\"}\n";              // line 7: a wrong type
      text += lines[i] + "\n";
    }
    text += lines[0].substr(0, lines[0].size() / 2);  // torn last line (line 11)
    write_text(out + "/metrics.jsonl", text);
    const LoadedRun run = load_run(out);
    QCOMPARE(run.steps.size(), size_t(8));
    for (size_t i = 0; i < run.steps.size(); ++i) QCOMPARE(run.steps[i].step, static_cast<long>(i + 1));
    QCOMPARE(run.warnings.size(), size_t(2));
    QCOMPARE(run.warnings[0], out + "/metrics.jsonl line 4: not valid JSON; skipped");
    QVERIFY2(has(run.warnings[1], out + "/metrics.jsonl line 7: not a metrics line (field 'step'"),
             run.warnings[1].c_str());
    QVERIFY2(!has(run.warnings[0] + run.warnings[1], "garbage") && !has(run.warnings[1], "six"),
             "echoes the file's bytes");
    // summary.json left empty by a full disk: a warning, and the run reads as unfinished.
    write_text(out + "/summary.json", "");
    const LoadedRun empty = load_run(out);
    QVERIFY(empty.summary.is_null());
    QCOMPARE(empty.warnings.back(), out + "/summary.json: not valid JSON; ignored (the run shows as unfinished)");
  }
};

QTEST_GUILESS_MAIN(TestRunRecord)
#include "test_run_record.moc"
