// ctest-labels: unit slow
// Resuming an interrupted run (run.checkpoint_every, `trainlab-cli train --resume DIR`): a run
// killed with SIGKILL or stopped with SIGTERM and then resumed gives the losses of an uninterrupted
// run bit for bit (the numbers of every step of the record compared), with each step once in the
// record (steps.bin and metrics.jsonl, torn writes of both dropped); the character GPT with dropout, the digits MLP with AdamW + warm-up/cosine + fp16
// loss scaling + gradient accumulation, mid-run changes and compression state. Checkpoints are
// whole or absent (a failed write keeps the previous one), and every folder that cannot be resumed
// gives an error naming it and what is missing.
#include <signal.h>

#include <QProcess>
#include <QtTest>
#include <algorithm>
#include <filesystem>

#include "cli_support.h"
#include "test_support.h"
#include "train/run_checkpoint.h"
#include "train/step_columns.h"

using namespace trainlab;
using namespace trainlab::test;
namespace fs = std::filesystem;

namespace {

using Result = CliResult;


Result cli(const QStringList& args, int timeout_ms = 300000) { return run_cli(args, timeout_ms); }

// The step of DIR's checkpoint, 0 while it has none.
long checkpoint_step(const std::string& dir) {
  try {
    const auto c = read_run_checkpoint(dir);
    return c ? c->progress.step : 0;
  } catch (const Error&) {
    return 0;  // being written
  }
}

// The steps a reader finds in DIR's record (steps.bin's blocks and metrics.jsonl's lines).
long metrics_count(const std::string& dir) {
  try {
    return static_cast<long>(load_run(dir).steps.size());
  } catch (const Error&) {
    return 0;  // no config.json yet
  }
}

// Starts `train` with `args`, waits until metrics.jsonl holds steps past a checkpoint, then sends
// `sig`. Returns the step of the checkpoint that was in place before the signal.
long interrupt_run(const QStringList& args, const std::string& out, int sig, QProcess& p) {
  p.start(QStringLiteral(TRAINLAB_CLI_PATH), args);
  if (!p.waitForStarted(10000)) return -1;
  long ck = 0;
  for (int i = 0; i < 2400; ++i) {
    ck = checkpoint_step(out);
    if (ck > 0 && metrics_count(out) > ck + 3) break;
    QTest::qWait(25);
  }
  if (::kill(static_cast<pid_t>(p.processId()), sig) != 0) return -1;
  p.waitForFinished(120000);
  return ck;
}

// Every line of b equals a's line of the same step in the numbers the run computes, and b holds
// steps 1..n once each.
void compare_runs(const std::string& a_dir, const std::string& b_dir) {
  const std::vector<Json> a = metrics_lines(a_dir), b = metrics_lines(b_dir);
  QCOMPARE(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    QCOMPARE(b[i].at("step").get<long>(), static_cast<long>(i + 1));
    for (const char* k : {"loss", "train_accuracy", "lr", "loss_scale", "skipped_steps", "epoch", "val_loss",
                          "val_accuracy", "sparsity", "bits_per_weight"}) {
      const Json x = a[i].value(k, Json()), y = b[i].value(k, Json());
      QVERIFY2(
          x == y,
          qPrintable(QString("step %1, %2: %3 uninterrupted, %4 resumed").arg(i + 1).arg(k, q(x.dump()), q(y.dump()))));
    }
  }
  const Json sa = read_json(a_dir + "/summary.json"), sb = read_json(b_dir + "/summary.json");
  QCOMPARE(q(sb.at("status").get<std::string>()), QString("completed"));
  for (const char* k : {"steps", "final_train_loss", "test_loss", "test_accuracy", "skipped_steps"})
    QVERIFY2(sa.at(k) == sb.at(k), k);
}

// In-process runs (mid-run changes, fault injection): `at_step` is called after each step.
RunSummary run_trainer(const Config& c, const std::function<void(Trainer&, long)>& at_step = {},
                       const std::string& resume_dir = {}, std::vector<std::string>* notices = nullptr) {
  Trainer* self = nullptr;
  TrainerCallbacks cb;
  cb.on_step = [&](const StepMetrics& m) {
    if (at_step) at_step(*self, m.step);
  };
  cb.on_notice = [&](const std::string& n) {
    if (notices) notices->push_back(n);
  };
  Trainer t(c, cb, resume_dir);
  self = &t;
  return t.run();
}

}  // namespace

class TestResume : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string dir(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

 private slots:
  // The character GPT with dropout (its masks come from a per-forward counter) and random training
  // windows, killed with SIGKILL after a checkpoint; the record is also left with a torn last line.
  void killedCharGptResumesBitIdentical() {
    const QStringList args = {"train",    "--model",
                              "char-gpt", "--device",
                              "cpu",      "--steps",
                              "600",      "--batch",
                              "8",        "--seed",
                              "5",        "--quiet",
                              "--set",    "model.layers=2",
                              "--set",    "model.dim=32",
                              "--set",    "model.heads=2",
                              "--set",    "model.context=32",
                              "--set",    "model.dropout=0.1",
                              "--set",    "train.eval_windows=16",
                              "--set",    "train.eval_every=50",
                              "--set",    "run.checkpoint_every=20"};
    const std::string full = dir("gpt-full"), part = dir("gpt-part");
    Result r = cli(args + QStringList{"--out", q(full)});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));

    QProcess p;
    const long ck = interrupt_run(args + QStringList{"--out", q(part)}, part, SIGKILL, p);
    QVERIFY2(p.exitStatus() == QProcess::CrashExit, "the run ended before it was killed");
    QVERIFY2(ck > 0, "no checkpoint before the kill");
    QVERIFY(!fs::exists(part + "/summary.json"));
    const long written = metrics_count(part);
    QVERIFY2(written > ck, qPrintable(QString("%1 lines, checkpoint at %2").arg(written).arg(ck)));
    // Writes the kill interrupted: a last line without its newline, a block of steps.bin cut short
    // (a whole block's header and half its payload). Readers drop both silently.
    std::ofstream(part + "/metrics.jsonl", std::ios::app) << "{\"step\": " << written + 1 << ", \"loss\": 2.5";
    StepMetrics extra;
    extra.step = written + 1;
    const std::string block = encode_step_block({StepRow::of(extra)});
    std::ofstream(part + "/steps.bin", std::ios::app | std::ios::binary) << block.substr(0, 16 + (block.size() - 16) / 2);
    const LoadedRun torn = load_run(part);
    QVERIFY(torn.warnings.empty());
    QCOMPARE(static_cast<long>(torn.steps.size()), written);

    r = cli({"train", "--resume", q(part), "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("resuming"), qPrintable(describe(r)));
    // The steps after the checkpoint and the torn writes were cut before the run went on.
    const std::string text = read_text(part + "/metrics.jsonl");
    QCOMPARE(metrics_count(part), 600L);
    QVERIFY(!text.empty() && text.back() == '\n');
    const StepColumnsRead cols = parse_step_columns(read_text(part + "/steps.bin"), "steps.bin");
    QVERIFY(cols.warnings.empty());
    QCOMPARE(cols.end_of_whole, read_text(part + "/steps.bin").size());
    QCOMPARE(static_cast<long>(cols.rows.size()), 600L);
    compare_runs(full, part);
    QVERIFY(!QTest::currentTestFailed());
    QCOMPARE(read_text(full + "/model.safetensors").size(), read_text(part + "/model.safetensors").size());
  }

  // The digits MLP with AdamW, a warm-up + cosine schedule, fp16 with dynamic loss scaling (a short
  // growth interval, so that the scale grows until gradients overflow, again and again: steps are
  // skipped all along the run) and gradient accumulation, stopped with SIGTERM: the stop writes a checkpoint at its own
  // step.
  void stoppedMixedPrecisionResumesBitIdentical() {
    const QStringList args = {"train", "--device",
                              "cpu",   "--steps",
                              "400",   "--optimizer",
                              "adamw", "--precision",
                              "fp16",  "--accumulate",
                              "2",     "--batch",
                              "16",    "--quiet",
                              "--set", "schedule.name=warmup-cosine",
                              "--set", "schedule.warmup_steps=30",
                              "--set", "precision.loss_scale.init=1048576",
                              "--set", "precision.loss_scale.growth_interval=7",
                              "--set", "train.eval_every=50",
                              "--set", "run.checkpoint_every=25"};
    const std::string full = dir("fp16-full"), part = dir("fp16-part");
    Result r = cli(args + QStringList{"--out", q(full)});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY(metrics_lines(full).back().at("skipped_steps").get<long>() > 10);

    QProcess p;
    QVERIFY(interrupt_run(args + QStringList{"--out", q(part)}, part, SIGTERM, p) > 0);
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 130);
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(err.contains("--resume"), qPrintable(err));
    const Json stopped = read_json(part + "/summary.json");
    QCOMPARE(q(stopped.at("status").get<std::string>()), QString("stopped"));
    // The stop loses no step: the checkpoint is at the step the run stopped at.
    QCOMPARE(checkpoint_step(part), stopped.at("steps").get<long>());

    r = cli({"train", "--resume", q(part), "--quiet", "--set", "run.name=continued"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    compare_runs(full, part);
    QVERIFY(!QTest::currentTestFailed());
    // Resuming it again: the run is complete.
    r = cli({"train", "--resume", q(part)});
    QVERIFY2(r.code != 0 && r.code != -2 && r.err.contains("completed") && r.err.contains(q(part)),
             qPrintable(describe(r)));
  }

  // Mid-run changes (precision fp32 -> bf16, learning rate, accumulation) are part of the
  // checkpoint: the resumed run continues with the values they had, as the uninterrupted one did,
  // and with the step count the run began with (3 epochs of batches of 32, whatever the
  // accumulation became).
  void midRunChangesResume() {
    Config c = digits_config(dir("mid-full"), 0, 3);
    c.set("train.batch", "32");
    c.set("schedule.name", "warmup-cosine");
    c.set("run.checkpoint_every", "10");
    const auto changes = [](Trainer& t, long step) {
      if (step == 5) t.set("precision.dtype", Json("bf16"));
      if (step == 12) t.set("optim.lr", Json(0.004));
      if (step == 18) t.set("train.accumulate", Json(2));
    };
    QCOMPARE(q(run_trainer(c, changes).status), QString("completed"));
    c.set("run.out", dir("mid-part"));
    const auto stop_at_37 = [&](Trainer& t, long step) {
      changes(t, step);
      if (step == 37) t.stop();
    };
    QCOMPARE(q(run_trainer(c, stop_at_37).status), QString("stopped"));
    QCOMPARE(checkpoint_step(dir("mid-part")), 37L);
    const Config resumed = resume_config(dir("mid-part"));
    QCOMPARE(q(resumed.get_string("precision.dtype")), QString("bf16"));
    QCOMPARE(resumed.get_int("train.accumulate"), int64_t(2));
    QCOMPARE(q(run_trainer(resumed, {}, dir("mid-part")).status), QString("completed"));
    compare_runs(dir("mid-full"), dir("mid-part"));
    QCOMPARE(metrics_count(dir("mid-part")), 3L * (1437 / 32));
  }

  // Pruning masks, QAT and SGD momentum: gradual pruning and fake quantization continue as they were.
  void compressionStateResumes() {
    Config c = digits_config(dir("prune-full"), 60);
    c.set("optim.name", "sgd");
    c.set("optim.lr", "0.05");
    c.set("prune.method", "gradual");
    c.set("prune.start_step", "5");
    c.set("prune.interval", "5");
    c.set("prune.n_steps", "6");
    c.set("quant.mode", "qat");
    c.set("run.checkpoint_every", "10");
    QCOMPARE(q(run_trainer(c).status), QString("completed"));
    c.set("run.out", dir("prune-part"));
    QCOMPARE(q(run_trainer(c,
                           [](Trainer& t, long step) {
                             if (step == 22) t.stop();
                           })
                   .status),
             QString("stopped"));
    QCOMPARE(q(run_trainer(resume_config(dir("prune-part")), {}, dir("prune-part")).status), QString("completed"));
    compare_runs(dir("prune-full"), dir("prune-part"));
  }

  // A checkpoint that cannot be written (here: its temporary file's name is taken by a folder)
  // leaves the previous one whole and in use; the run goes on and says so.
  void failedCheckpointKeepsThePreviousOne() {
    Config c = digits_config(dir("fault-full"), 80);
    c.set("run.checkpoint_every", "10");
    QCOMPARE(q(run_trainer(c).status), QString("completed"));
    const std::string part = dir("fault-part");
    c.set("run.out", part);
    std::vector<std::string> notices;
    const auto block_then_stop = [&](Trainer& t, long step) {
      if (step == 15) fs::create_directory(part + "/checkpoint.json.part");
      if (step == 33) t.stop();
    };
    QCOMPARE(q(run_trainer(c, block_then_stop, {}, &notices).status), QString("stopped"));
    QVERIFY(!notices.empty());
    QVERIFY2(notices.front().find("checkpoint after step 20 not written") != std::string::npos,
             notices.front().c_str());
    QCOMPARE(checkpoint_step(part), 10L);
    fs::remove(part + "/checkpoint.json.part");
    QCOMPARE(metrics_count(part), 33L);
    QCOMPARE(q(run_trainer(resume_config(part), {}, part).status), QString("completed"));
    compare_runs(dir("fault-full"), part);
    QVERIFY(!QTest::currentTestFailed());
    // Older tensors files went when newer checkpoints were in place.
    int tensors = 0;
    for (const auto& e : fs::directory_iterator(part))
      tensors += e.path().filename().string().rfind("checkpoint-", 0) == 0;
    QCOMPARE(tensors, 1);
  }

  // metrics.jsonl is cut after the checkpoint's line: later lines and a torn last line go, earlier
  // bytes stay as they were (a damaged middle line is kept for the readers to report).
  void truncateMetrics() {
    const std::string path = dir("metrics.jsonl");
    const std::string head =
        "{\"step\":1,\"loss\":1.5}\n{\"step\":2,\"loss\":1.25}\nnot json\n{\"step\":3,\"loss\":1}\n";
    write_text(path, head + "{\"step\":4,\"loss\":0.5}\n{\"step\":5,\"loss\":0.25}\n{\"step\":6,\"lo");
    QCOMPARE(truncate_metrics(path, 3), 3L);
    QCOMPARE(q(read_text(path)), q(head));
    write_text(path, head + "{\"step\":4,\"lo");
    QCOMPARE(truncate_metrics(path, 9), 3L);
    QCOMPARE(q(read_text(path)), q(head));
    QCOMPARE(truncate_metrics(dir("absent.jsonl"), 4), 0L);
    QVERIFY(fs::exists(dir("absent.jsonl")));
  }

  // Folders that cannot be resumed, and flags that would change a resumed run: a non-zero exit and
  // an error naming the folder (or flag, or key) and what is missing.
  void refusedResumes() {
    const std::string plain = dir("no-checkpoints");  // an unfinished run without checkpoints
    QProcess p;
    p.start(QStringLiteral(TRAINLAB_CLI_PATH),
            {"train", "--device", "cpu", "--steps", "1000000", "--quiet", "--out", q(plain)});
    QVERIFY(p.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(metrics_count(plain) > 5, 60000);
    p.kill();
    p.waitForFinished();
    Result r = cli({"train", "--resume", q(plain)});
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(q(plain) + " has no checkpoint: the run was started with run.checkpoint_every = 0"),
             qPrintable(describe(r)));

    r = cli({"train", "--resume", q(dir("nowhere"))});
    QVERIFY2(r.code != 0 && r.err.contains("no such run folder"), qPrintable(describe(r)));
    fs::create_directory(dir("empty"));
    r = cli({"train", "--resume", q(dir("empty"))});
    QVERIFY2(r.code != 0 && r.err.contains("no config.json"), qPrintable(describe(r)));

    const std::string run = dir("stopped");
    Config c = digits_config(run, 50);
    c.set("run.checkpoint_every", "10");
    run_trainer(c, [](Trainer& t, long step) {
      if (step == 25) t.stop();
    });
    r = cli({"train", "--resume", q(run), "--steps", "80"});
    QVERIFY2(r.code != 0 && r.err.contains("--steps cannot be given with --resume"), qPrintable(describe(r)));
    r = cli({"train", "--resume", q(run), "--config", q(run + "/config.json")});
    QVERIFY2(r.code != 0 && r.err.contains("--config cannot be given with --resume"), qPrintable(describe(r)));
    r = cli({"train", "--resume", q(run), "--set", "optim.lr=0.1"});
    QVERIFY2(r.code != 0 && r.err.contains("--set optim.lr cannot be given with --resume") &&
                 r.err.contains("run.checkpoint_every"),
             qPrintable(describe(r)));
    r = cli({"train", "--help"});
    QVERIFY2(r.out.contains("--resume") && r.out.contains("run.checkpoint_every"), qPrintable(describe(r)));
    QCOMPARE(metrics_count(run), 25L);  // the refused resumes left the record alone
  }

  // A damaged checkpoint is an error naming the file, never a silent restart or a crash.
  void damagedCheckpoints() {
    const std::string run = dir("damaged");
    Config c = digits_config(run, 50);
    c.set("run.checkpoint_every", "10");
    run_trainer(c, [](Trainer& t, long step) {
      if (step == 25) t.stop();
    });
    const std::string json = read_text(run + "/checkpoint.json");
    const auto info = read_run_checkpoint(run);
    QVERIFY(info);
    const std::string tensors = run + "/" + info->tensors_file;
    const std::string bytes = read_text(tensors);

    std::string flipped = bytes;
    flipped[flipped.size() - 3] = static_cast<char>(flipped[flipped.size() - 3] ^ 0x10);
    write_text(tensors, flipped);
    Result r = cli({"train", "--resume", q(run)});
    QVERIFY2(r.code != 0 && r.code != -2 && r.err.contains(q(tensors)) && r.err.contains("CRC-32"),
             qPrintable(describe(r)));
    write_text(tensors, bytes);

    write_text(run + "/checkpoint.json", json.substr(0, json.size() / 2));
    r = cli({"train", "--resume", q(run)});
    QVERIFY2(r.code != 0 && r.code != -2 && r.err.contains(q(run + "/checkpoint.json") + ": not valid JSON at line"),
             qPrintable(describe(r)));

    Json j = Json::parse(json);
    j["tensors"]["file"] = "../../elsewhere.safetensors";
    write_text(run + "/checkpoint.json", j.dump());
    r = cli({"train", "--resume", q(run)});
    QVERIFY2(r.code != 0 && r.err.contains("field 'file'") && !r.err.contains("elsewhere"), qPrintable(describe(r)));

    j = Json::parse(json);
    j["config"]["model"]["hidden"] = {32};
    write_text(run + "/checkpoint.json", j.dump());
    r = cli({"train", "--resume", q(run)});
    QVERIFY2(r.code != 0 && r.err.contains("does not belong to") && r.err.contains("model.hidden"),
             qPrintable(describe(r)));

    j = Json::parse(json);
    j["data"]["cursor"] = 1e9;
    write_text(run + "/checkpoint.json", j.dump());
    r = cli({"train", "--resume", q(run)});
    QVERIFY2(r.code != 0 && r.code != -2 && r.err.contains("cursor"), qPrintable(describe(r)));

    write_text(run + "/checkpoint.json", json);
    QCOMPARE(metrics_count(run), 25L);  // nothing was cut while the checkpoint could not be used
    r = cli({"train", "--resume", q(run), "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(metrics_count(run), 50L);
  }
};

QTEST_GUILESS_MAIN(TestResume)
#include "test_resume.moc"
