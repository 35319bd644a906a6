// trainlab-cli as a user runs it (QProcess on the built binary): exit code 0 only on success,
// one "error:" line naming the file/key on bad input, 3 for a diverged run, --help on every verb,
// and `eval` of a run's weights giving the figures in its summary (a char-gpt run's too).
#include <signal.h>

#include <QProcess>
#include <QtTest>
#include <cmath>
#include <filesystem>

#include "io/safetensors.h"
#include "cli_support.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

using Result = CliResult;

Result cli(const QStringList& args, int timeout_ms = 120000) { return run_cli(args, timeout_ms); }

// The lines of stderr that start with "error:".
QStringList error_lines(const Result& r) {
  QStringList out;
  for (const QString& l : r.err.split('\n'))
    if (l.startsWith("error:")) out << l;
  return out;
}


}  // namespace

class TestCli : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString dir(const QString& name) { return m_tmp.path() + "/" + name; }

 private slots:
  void versionAndHelp() {
    Result r = cli({"--version"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY(r.out.contains("trainlab-cli "));
    for (const char* verb : {"train", "eval", "bench"}) {
      r = cli({verb, "--help"});
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      QVERIFY2(r.out.contains("--"), qPrintable(describe(r)));
    }
    r = cli({"train", "--help"});
    for (const char* opt : {"--config", "--model", "--epochs", "--steps", "--batch", "--lr", "--optimizer", "--precision",
                            "--accumulate", "--seed", "--device", "--set", "--out"})
      QVERIFY2(r.out.contains(opt), opt);
  }

  // Usage errors: non-zero exit (no crash) and a message on stderr that names the option, verb or
  // value at fault.
  void usageErrors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QStringList>("mentions");
    QTest::newRow("no verb") << QStringList{} << QStringList{"A subcommand is required"};
    QTest::newRow("unknown verb") << QStringList{"frobnicate"} << QStringList{"unknown verb 'frobnicate'", "train"};
    QTest::newRow("not a number") << QStringList{"train", "--epochs", "three"} << QStringList{"--epochs", "three"};
    QTest::newRow("eval without weights") << QStringList{"eval"} << QStringList{"--weights is required"};
    QTest::newRow("sweep without out") << QStringList{"sweep"} << QStringList{"--out is required"};
    QTest::newRow("bits out of range") << QStringList{"quantize", "--weights", "w.safetensors", "--bits", "12"}
                                       << QStringList{"--bits", "12"};
    QTest::newRow("unknown option") << QStringList{"prune", "--weights", "w.safetensors", "--sparsty", "0.5"}
                                    << QStringList{"--sparsty", "not expected"};
  }
  void usageErrors() {
    QFETCH(QStringList, args);
    QFETCH(QStringList, mentions);
    const Result r = cli(args);
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    for (const QString& m : mentions) QVERIFY2(r.err.contains(m), qPrintable(m + " not in: " + describe(r)));
  }

  void printConfig() {
    const Result r = cli({"train", "--print-config", "--epochs", "7", "--set", "optim.lr=0.01"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json j = Json::parse(r.out.toStdString());
    QCOMPARE(j.at("train").at("epochs").get<int64_t>(), int64_t(7));
    QCOMPARE(j.at("optim").at("lr").get<double>(), 0.01);
    QVERIFY(j.at("precision").contains("loss_scale"));
  }

  // Train, then eval the weights: the same test accuracy as the summary.
  void trainThenEval() {
    const QString out = dir("ok");
    Result r = cli({"train", "--model", "digits-mlp", "--epochs", "3", "--seed", "1", "--device", "cpu", "--out", out});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("completed"), qPrintable(describe(r)));  // plain progress lines (not a terminal)
    QVERIFY2(r.err.contains("step 1/66"), qPrintable(describe(r)));
    const Json sum = read_json((out + "/summary.json").toStdString());
    QCOMPARE(sum.at("status").get<std::string>(), std::string("completed"));
    QCOMPARE(sum.at("steps").get<long>(), 66L);
    r = cli({"eval", "--weights", out + "/model.safetensors", "--device", "cpu"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json ev = Json::parse(r.out.toStdString());
    QCOMPARE(ev.at("test_samples").get<int64_t>(), int64_t(360));
    QCOMPARE(ev.at("test_accuracy").get<double>(), sum.at("test_accuracy").get<double>());
    QVERIFY(std::fabs(ev.at("test_loss").get<double>() - sum.at("test_loss").get<double>()) < 1e-5);
  }

  // A char-gpt run's weights: eval scores the validation split of its text with the run's windows,
  // the numbers its summary reports (test_loss, test_accuracy), and their perplexity; another text
  // with a character the model lacks is refused naming the weights file.
  void charGptTrainThenEval() {
    const std::string text = dir("words.txt").toStdString(), other = dir("other.txt").toStdString();
    std::string words;
    for (int i = 0; words.size() < 60000; ++i) words += (i % 7 == 0 ? "the " : i % 3 ? "quick fox " : "lazy dog ");
    write_text(text, words);
    write_text(other, std::string(30000, 'a') + std::string(30000, 'b'));
    const QString out = dir("gpt"), weights = out + "/model.safetensors";
    // 10 windows in batches of 4: the last batch is partial.
    Result r = cli({"train", "--model", "char-gpt", "--set", "model.preset=tiny", "--set", "data.name=text", "--set",
                    q("data.path=" + text), "--set", "train.eval_windows=10", "--steps", "3", "--batch", "4", "--seed", "5",
                    "--device", "cpu", "--out", out});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json sum = read_json((out + "/summary.json").toStdString());
    r = cli({"eval", "--weights", weights, "--device", "cpu", "--set", q("data.path=" + text)});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json ev = Json::parse(r.out.toStdString());
    const Json arch = Json::parse(read_safetensors(weights.toStdString()).metadata.at("trainlab_architecture"));
    QCOMPARE(ev.at("split").get<std::string>(), std::string("validation"));
    QCOMPARE(ev.at("val_windows").get<int64_t>(), int64_t(10));
    QCOMPARE(ev.at("val_tokens").get<int64_t>(), 10 * arch.at("context").get<int64_t>());
    QCOMPARE(ev.at("val_loss").get<double>(), sum.at("test_loss").get<double>());
    QCOMPARE(ev.at("val_accuracy").get<double>(), sum.at("test_accuracy").get<double>());
    QCOMPARE(ev.at("val_perplexity").get<double>(), std::exp(sum.at("test_loss").get<double>()));
    r = cli({"eval", "--weights", weights, "--device", "cpu", "--set", q("data.path=" + other)});
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(error_lines(r).size() == 1 && error_lines(r).front().contains(weights + ": ") &&
                 error_lines(r).front().contains("not in the model's vocabulary"),
             qPrintable(describe(r)));
  }

  // `sweep --baseline` starts the grid from a finished run's weights: the baseline row is that run's
  // accuracy and its step count comes from the summary.json beside the weights.
  void sweepFromBaseline() {
    const QString run = dir("sweep-base");
    Result r = cli({"train", "--model", "digits-mlp", "--epochs", "2", "--seed", "3", "--device", "cpu", "--out", run});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json sum = read_json((run + "/summary.json").toStdString());
    const QString out = dir("sweep-out");
    // A baseline trained with another seed (another train/test split) is refused, naming the fix.
    r = cli({"sweep", "--model", "digits-mlp", "--device", "cpu", "--baseline", run + "/model.safetensors", "--out", out});
    QVERIFY2(r.code != 0 && r.code != -2 && r.err.contains("--set train.seed=3"), qPrintable(describe(r)));
    r = cli({"sweep", "--model", "digits-mlp", "--device", "cpu", "--baseline", run + "/model.safetensors", "--set",
             "train.seed=3", "--set", "quant.calibration=2", "--finetune-steps", "4", "--min-accuracy", "0", "--speed-rows", "64",
             "--out", out},
            300000);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json table = read_json((out + "/sweep.json").toStdString());
    QCOMPARE(table.at("baseline_steps").get<long>(), sum.at("steps").get<long>());
    const Json& rows = table.at("rows");
    QVERIFY2(rows.size() > 40, qPrintable(QString("%1 rows").arg(rows.size())));
    QCOMPARE(rows[0].at("method").get<std::string>(), std::string("fp32"));
    QCOMPARE(rows[0].at("test_accuracy").get<double>(), sum.at("test_accuracy").get<double>());
    // The classifier stays dense in the pruning points: 50 % of each hidden layer is less than 50 %.
    bool saw_prune = false;
    for (const Json& row : rows)
      if (row.at("method").get<std::string>() == "prune-oneshot" && !saw_prune) {
        saw_prune = true;
        QVERIFY2(row.at("sparsity").get<double>() < 50.0 && row.at("sparsity").get<double>() > 45.0, row.dump().c_str());
      }
    QVERIFY(saw_prune);
    // GPTQ and AWQ beside round-to-nearest: bits 2..8, per channel and per group of 32, each.
    for (const char* m : {"ptq-gptq", "ptq-awq"}) {
      int n = 0;
      for (const Json& row : rows) n += row.at("method").get<std::string>() == m;
      QVERIFY2(n == 14, qPrintable(QString("%1: %2 rows").arg(m).arg(n)));
    }
  }

  void flagsReachTheConfig() {
    const QString out = dir("flags");
    const Result r = cli({"train", "--steps", "4", "--batch", "32", "--lr", "0.002", "--optimizer", "sgd", "--precision",
                          "bf16", "--accumulate", "2", "--seed", "3", "--device", "cpu", "--set", "run.save_weights=false",
                          "--quiet", "--out", out});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json c = read_json((out + "/config.json").toStdString());
    QCOMPARE(c.at("train").at("steps").get<int64_t>(), int64_t(4));
    QCOMPARE(c.at("train").at("batch").get<int64_t>(), int64_t(32));
    QCOMPARE(c.at("train").at("accumulate").get<int64_t>(), int64_t(2));
    QCOMPARE(c.at("train").at("seed").get<int64_t>(), int64_t(3));
    QCOMPARE(c.at("optim").at("lr").get<double>(), 0.002);
    QCOMPARE(c.at("optim").at("name").get<std::string>(), std::string("sgd"));
    QCOMPARE(c.at("precision").at("dtype").get<std::string>(), std::string("bf16"));
    QVERIFY(!std::filesystem::exists((out + "/model.safetensors").toStdString()));
    QCOMPARE(metrics_lines(out.toStdString()).size(), size_t(4));
  }

  void configFile() {
    const QString cfg = dir("run.json"), out = dir("fromfile");
    write_text(cfg.toStdString(), R"({"train": {"steps": 3, "batch": 16}, "device": {"name": "cpu"}})");
    const Result r = cli({"train", "--config", cfg, "--quiet", "--out", out});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(read_json((out + "/summary.json").toStdString()).at("steps").get<long>(), 3L);
  }

  // Bad input: non-zero exit, one error line naming what is wrong, no crash.
  void badInput_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QStringList>("mentions");
    const QString data = dir("bad.csv.gz");
    write_gzip(data.toStdString(), digits_line(1, 1) + "\n" + digits_line(2, 12) + "\n");
    const QString cfg = dir("bad.json");
    write_text(cfg.toStdString(), "{\n  \"optim\": {\n    \"lerning_rate\": 0.1\n  }\n}\n");
    const QString file = dir("afile");
    write_text(file.toStdString(), "x");
    SafeTensorsFile plain;  // a valid safetensors file that trainlab did not write
    plain.tensors.push_back({"w", "F32", {2}, std::vector<uint8_t>(8, 0)});
    write_safetensors(dir("plain.safetensors").toStdString(), plain);
    QTest::newRow("unknown key") << QStringList{"train", "--set", "train.epohcs=3"}
                                 << QStringList{"train.epohcs", "valid keys", "train.epochs"};
    QTest::newRow("unknown key in file") << QStringList{"train", "--config", cfg}
                                         << QStringList{cfg + ":3", "optim.lerning_rate", "optim.lr"};
    QTest::newRow("wrong type") << QStringList{"train", "--set", "train.batch=big"}
                                << QStringList{"train.batch", "an integer"};
    QTest::newRow("out of range") << QStringList{"train", "--set", "optim.beta1=2"} << QStringList{"optim.beta1", "[0, 1)"};
    QTest::newRow("negative lr") << QStringList{"train", "--lr", "-5"} << QStringList{"--lr", "optim.lr", "(0, 10]"};
    QTest::newRow("negative epochs") << QStringList{"train", "--epochs", "-3"}
                                     << QStringList{"--epochs", "train.epochs", "an integer in [0, "};
    QTest::newRow("bad precision") << QStringList{"train", "--precision", "fp64"} << QStringList{"precision.dtype", "bf16"};
    QTest::newRow("missing data") << QStringList{"train", "--device", "cpu", "--set", "data.path=" + dir("none.csv.gz")}
                                  << QStringList{dir("none.csv.gz")};
    QTest::newRow("bad label") << QStringList{"train", "--device", "cpu", "--set", "data.path=" + data}
                               << QStringList{data + ":2", "label outside [0, 9]"};
    QTest::newRow("unwritable out") << QStringList{"train", "--device", "cpu", "--steps", "1", "--out", file + "/run"}
                                    << QStringList{file + "/run"};
    QTest::newRow("missing weights") << QStringList{"eval", "--weights", dir("none.safetensors")}
                                     << QStringList{dir("none.safetensors")};
    QTest::newRow("weights not safetensors") << QStringList{"eval", "--weights", cfg} << QStringList{cfg};
    QTest::newRow("missing sweep baseline") << QStringList{"sweep", "--device", "cpu", "--baseline", dir("none.safetensors"), "--out", dir("sw")}
                                            << QStringList{"--baseline", dir("none.safetensors")};
    QTest::newRow("sweep baseline without steps") << QStringList{"sweep", "--device", "cpu", "--baseline", file, "--out", dir("sw")}
                                                  << QStringList{"--baseline", "--steps"};
    // trainThenEval (run before) left a run's weights in "ok".
    QTest::newRow("set without =") << QStringList{"eval", "--weights", dir("ok") + "/model.safetensors", "--set", "data.path"}
                                   << QStringList{"--set data.path", "key=value"};
    QTest::newRow("weights without metadata") << QStringList{"quantize", "--weights", dir("plain.safetensors")}
                                              << QStringList{dir("plain.safetensors"), "trainlab_config"};
    QTest::newRow("unknown bench case") << QStringList{"bench", "--case", "nope", "--device", "cpu"} << QStringList{"nope"};
  }
  void badInput() {
    QFETCH(QStringList, args);
    QFETCH(QStringList, mentions);
    const Result r = cli(args);
    QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(errors.size() == 1, qPrintable(describe(r)));
    for (const QString& m : mentions) QVERIFY2(errors.front().contains(m), qPrintable(m + " not in: " + errors.front()));
  }

  // fp16 reports its loss scale and skipped steps.
  void fp16LossScale() {
    const Result r = cli({"train", "--device", "cpu", "--steps", "5", "--precision", "fp16", "--out", dir("fp16")});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("fp16 loss scaling: scale 65536 at the end, 0 skipped steps"), qPrintable(describe(r)));
  }

  // A diverged run: exit 3, the message, and the record kept.
  // SIGINT, SIGTERM (what `timeout`, `kill` and schedulers send) and SIGHUP (a closed terminal)
  // end a run the same way: at the next step, status "stopped", exit 130, weights and summary kept.
  void stopSignalsKeepTheRun_data() {
    QTest::addColumn<int>("sig");
    QTest::newRow("SIGINT") << int(SIGINT);
    QTest::newRow("SIGTERM") << int(SIGTERM);
    QTest::newRow("SIGHUP") << int(SIGHUP);
  }
  void stopSignalsKeepTheRun() {
    QFETCH(int, sig);
    const QString out = dir(QString("signal-%1").arg(sig));
    QProcess p;
    p.start(QStringLiteral(TRAINLAB_CLI_PATH), {"train", "--device", "cpu", "--steps", "1000000", "--quiet", "--out", out});
    QVERIFY(p.waitForStarted(10000));
    // Wait until the run has written steps, so that the signal lands inside the loop.
    const std::string metrics = (out + "/metrics.jsonl").toStdString();
    for (int i = 0; i < 600 && (read_text(metrics).size() < 2000); ++i) QTest::qWait(50);
    QVERIFY2(read_text(metrics).size() >= 2000, "the run wrote no steps");
    QCOMPARE(::kill(static_cast<pid_t>(p.processId()), sig), 0);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 130);
    const Json summary = Json::parse(read_text((out + "/summary.json").toStdString()));
    QCOMPARE(QString::fromStdString(summary.at("status").get<std::string>()), QString("stopped"));
    QVERIFY(summary.at("steps").get<long>() > 0 && summary.at("steps").get<long>() < 1000000);
    QVERIFY(std::filesystem::exists((out + "/model.safetensors").toStdString()));
  }

  void divergedRun() {
    const QString out = dir("diverged");
    // SGD at the top of optim.lr's range with AdamW's weight decay (SGD's own, 2e-4, only stalls).
    const Result r = cli({"train", "--device", "cpu", "--steps", "300", "--optimizer", "sgd", "--lr", "10", "--set",
                          "optim.weight_decay=0.01", "--out", out});
    QVERIFY2(r.code == 3, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("diverged at step"), qPrintable(describe(r)));
    const Json sum = read_json((out + "/summary.json").toStdString());
    QCOMPARE(sum.at("status").get<std::string>(), std::string("diverged"));
    QCOMPARE(static_cast<long>(metrics_lines(out.toStdString()).size()), sum.at("steps").get<long>());
    // The progress shows the step that diverged, its loss as "no value", never printf's "nan".
    const QString diverged_step = QString("step %1/300  ").arg(sum.at("steps").get<long>());
    bool shown = false;
    for (const QString& line : r.err.split('\n'))
      shown = shown || (line.startsWith(diverged_step) && line.contains("loss no value"));
    QVERIFY2(shown, qPrintable(diverged_step + "with loss no value not in: " + describe(r)));
    QVERIFY2(!r.err.contains("nan"), qPrintable(describe(r)));  // (the error says "NaN")
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
