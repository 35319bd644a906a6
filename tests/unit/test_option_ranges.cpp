// ctest-labels: unit;no-asan
// Every numeric option of every trainlab-cli verb has a range (cli/option_ranges.h): NaN,
// infinities and out-of-range values are refused while the command line is parsed, with one
// "error:" line naming the option, its range and the value, and a non-zero exit (no crash, no run).
// The audit reads each verb's --help, so an option added later without a range fails here.
#include <QRegularExpression>
#include <QtTest>

#include "cli_support.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

using Result = CliResult;

Result cli(const QStringList& args) { return run_cli(args, 120000); }

QStringList error_lines(const Result& r) {
  QStringList out;
  for (const QString& l : r.err.split('\n'))
    if (l.startsWith("error:")) out << l;
  return out;
}

QString describe(const QStringList& args, const Result& r) {
  return QString("trainlab-cli %1\nexit %2\nstdout: %3\nstderr: %4").arg(args.join(' ')).arg(r.code).arg(r.out, r.err);
}

// The arguments a verb needs besides the option under test (files that do not exist: the range
// check comes first, while parsing).
QStringList required_args(const QString& verb) {
  if (verb == "eval" || verb == "quantize" || verb == "prune") return {"--weights", "none.safetensors"};
  if (verb == "generate") return {"--weights", "none.safetensors"};
  if (verb == "sweep") return {"--out", "none-sweep"};
  if (verb == "train") return {"--print-config"};  // were a value accepted, print it and stop
  if (verb == "plan") return {};                    // were a value accepted: "give a model"
  return {"--case", "none"};                        // bench: an unknown case, were the value accepted
}

// Refused with one error line that names the option, says what was expected and echoes the value.
void expect_refused(const QStringList& args, const QString& option, const QString& value, const QString& range = {}) {
  const Result r = cli(args);
  QVERIFY2(r.code != 0 && r.code != -2, qPrintable(describe(args, r)));
  const QStringList errors = error_lines(r);
  QVERIFY2(errors.size() == 1, qPrintable(describe(args, r)));
  const QString& e = errors.front();
  QVERIFY2(e.contains(option + ":"), qPrintable(option + " not in: " + e));
  QVERIFY2(e.contains("expected a number in") || e.contains("expected an integer in"), qPrintable(e));
  QVERIFY2(e.contains("got " + value), qPrintable(value + " not in: " + e));
  if (!range.isEmpty()) QVERIFY2(e.contains(range), qPrintable(range + " not in: " + e));
}

}  // namespace

class TestOptionRanges : public QObject {
  Q_OBJECT
 private slots:
  // The reported cases, with the range each one states.
  void reportedCases_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("option");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("range");
    QTest::newRow("train --lr nan") << QStringList{"train", "--print-config", "--lr", "nan"} << "--lr" << "nan"
                                    << "expected a number in (0, 10] (optim.lr)";
    QTest::newRow("train --lr inf") << QStringList{"train", "--print-config", "--lr", "inf"} << "--lr" << "inf" << "(0, 10]";
    QTest::newRow("train --lr 0") << QStringList{"train", "--print-config", "--lr", "0"} << "--lr" << "0" << "(0, 10]";
    QTest::newRow("train --lr 1000") << QStringList{"train", "--print-config", "--lr", "1000"} << "--lr" << "1000"
                                     << "(0, 10]";
    QTest::newRow("train --steps -1") << QStringList{"train", "--print-config", "--steps", "-1"} << "--steps" << "-1"
                                      << "an integer in [0, 1e9] (train.steps)";
    QTest::newRow("train --batch 1.5") << QStringList{"train", "--print-config", "--batch", "1.5"} << "--batch" << "1.5"
                                       << "an integer in [1, 16777216]";
    QTest::newRow("train --seed -1") << QStringList{"train", "--print-config", "--seed", "-1"} << "--seed" << "-1" << "";
    QTest::newRow("prune --sparsity nan") << QStringList{"prune", "--weights", "none.safetensors", "--sparsity", "nan"}
                                          << "--sparsity" << "nan" << "a number in [0, 0.999]";
    QTest::newRow("prune --sparsity 1") << QStringList{"prune", "--weights", "none.safetensors", "--sparsity", "1"}
                                        << "--sparsity" << "1" << "[0, 0.999]";
    QTest::newRow("generate --temperature nan")
        << QStringList{"generate", "--weights", "none.safetensors", "--temperature", "nan"} << "--temperature" << "nan"
        << "expected a number in [0, 100]";
    QTest::newRow("generate --temperature -1")
        << QStringList{"generate", "--weights", "none.safetensors", "--temperature", "-1"} << "--temperature" << "-1" << "";
    QTest::newRow("generate --top-k -3") << QStringList{"generate", "--weights", "none.safetensors", "--top-k", "-3"}
                                         << "--top-k" << "-3" << "an integer in [0, 1048576]";
    QTest::newRow("generate --tokens 0") << QStringList{"generate", "--weights", "none.safetensors", "--tokens", "0"}
                                         << "--tokens" << "0" << "[1, 1e6]";
    QTest::newRow("bench --steps -1") << QStringList{"bench", "--case", "digits", "--device", "cpu", "--steps", "-1"}
                                      << "--steps" << "-1" << "an integer in [1, 1e7]";
    QTest::newRow("quantize --bits 2.5") << QStringList{"quantize", "--weights", "none.safetensors", "--bits", "2.5"}
                                         << "--bits" << "2.5" << "an integer in [2, 8] (quant.bits)";
    QTest::newRow("quantize --group 0") << QStringList{"quantize", "--weights", "none.safetensors", "--group", "0"}
                                        << "--group" << "0" << "[1, 4096]";
    QTest::newRow("sweep --min-accuracy nan") << QStringList{"sweep", "--out", "none", "--min-accuracy", "nan"}
                                              << "--min-accuracy" << "nan" << "a number in [0, 1]";
  }
  void reportedCases() {
    QFETCH(QStringList, args);
    QFETCH(QString, option);
    QFETCH(QString, value);
    QFETCH(QString, range);
    expect_refused(args, option, value, range);
  }

  // The audit: every option that --help shows as INT or FLOAT, of every verb, refuses NaN, both
  // infinities and a huge negative number.
  void everyNumericOptionHasARange() {
    const QRegularExpression numeric(R"(^\s+(--[a-z0-9-]+)\s+(INT|FLOAT)\b)");
    int checked = 0;
    for (const QString verb : {"train", "eval", "bench", "generate", "quantize", "prune", "sweep", "plan"}) {
      const Result help = cli({verb, "--help"});
      QVERIFY2(help.code == 0, qPrintable(describe({verb, "--help"}, help)));
      for (const QString& line : help.out.split('\n')) {
        const QRegularExpressionMatch m = numeric.match(line);
        if (!m.hasMatch()) continue;
        const QString option = m.captured(1);
        QVERIFY2(line.contains("in [") || line.contains("in ("), qPrintable(verb + ": no range in --help: " + line));
        for (const QString value : {"nan", "inf", "-inf", "-1e300"}) {
          const QStringList args = QStringList{verb} + required_args(verb) + QStringList{option, value};
          expect_refused(args, option, value);
          if (QTest::currentTestFailed()) return;
        }
        ++checked;
      }
    }
    // train 6, bench 3, generate 4, quantize 4, prune 2, sweep 4, plan 22 when this was written.
    QVERIFY2(checked >= 45, qPrintable(QString("only %1 numeric options found in --help").arg(checked)));
  }

  // The ends of a range are accepted; an integer may be written 1e4; the value reaches the config.
  void valuesInsideTheRangesAreTaken() {
    const QStringList args{"train", "--print-config", "--lr", "10", "--steps", "1e4", "--epochs", "0", "--seed",
                           "9007199254740993", "--accumulate", "+2", "--batch", "16777216"};
    const Result r = cli(args);
    QVERIFY2(r.code == 0, qPrintable(describe(args, r)));
    const Json c = Json::parse(r.out.toStdString());
    QCOMPARE(c.at("optim").at("lr").get<double>(), 10.0);
    QCOMPARE(c.at("train").at("steps").get<int64_t>(), int64_t(10000));
    QCOMPARE(c.at("train").at("epochs").get<int64_t>(), int64_t(0));
    QCOMPARE(c.at("train").at("seed").get<int64_t>(), int64_t(9007199254740993));  // every digit kept
    QCOMPARE(c.at("train").at("accumulate").get<int64_t>(), int64_t(2));
    QCOMPARE(c.at("train").at("batch").get<int64_t>(), int64_t(16777216));
  }

  // --set goes through the same parser and the key's range.
  void setTakesTheKeysRange_data() {
    QTest::addColumn<QString>("set");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("lr nan") << "optim.lr=nan" << "key 'optim.lr': expected a number in (0, 10], got nan";
    QTest::newRow("beta2 1") << "optim.beta2=1" << "key 'optim.beta2': expected a number in [0, 1), got 1";
    QTest::newRow("eps 0") << "optim.eps=0" << "key 'optim.eps': expected a number in (0, 1], got 0";
    QTest::newRow("dropout inf") << "model.dropout=inf" << "expected a number in [0, 0.9], got inf";
    QTest::newRow("steps nan") << "train.steps=nan" << "key 'train.steps': expected an integer in [0, 1e9], got nan";
    QTest::newRow("checkpoint every 1e10") << "run.checkpoint_every=1e10"
                                           << "key 'run.checkpoint_every': expected an integer in [0, 1e9], got 1e10";
    QTest::newRow("hidden 0") << "model.hidden=256,0" << "a list of 1 to 64 integers in [1, 65536]";
  }
  void setTakesTheKeysRange() {
    QFETCH(QString, set);
    QFETCH(QString, mentions);
    const QStringList args{"train", "--print-config", "--set", set};
    const Result r = cli(args);
    QVERIFY2(r.code == 1, qPrintable(describe(args, r)));
    const QStringList errors = error_lines(r);
    QVERIFY2(errors.size() == 1 && errors.front().contains("--set " + set) && errors.front().contains(mentions),
             qPrintable(mentions + " not in: " + describe(args, r)));
  }
};

QTEST_GUILESS_MAIN(TestOptionRanges)
#include "test_option_ranges.moc"
