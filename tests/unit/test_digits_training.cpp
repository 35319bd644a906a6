// ctest-labels: unit;slow
// The digits MLP end to end on the CPU: 30 epochs reach >= 97% test accuracy in fp32 and >= 96%
// in bf16 and fp16 (fp16 with its loss scale reported); the run record is complete.
#include <QtTest>
#include <filesystem>

#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

class TestDigitsTraining : public QObject {
  Q_OBJECT
 private slots:
  void thirtyEpochs_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<double>("minimum");
    QTest::newRow("fp32") << "fp32" << 0.97;
    QTest::newRow("bf16") << "bf16" << 0.96;
    QTest::newRow("fp16") << "fp16" << 0.96;
  }
  void thirtyEpochs() {
    QFETCH(QString, precision);
    QFETCH(double, minimum);
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    Config c = digits_config(dir, 0, 30);
    c.set("precision.dtype", precision.toStdString());
    Trainer t(c);
    const RunSummary s = t.run();
    qInfo("%s: test accuracy %.4f, test loss %.4f, %ld steps, %.2f s", qPrintable(precision), s.test_accuracy,
          s.test_loss, s.steps, s.wall_s);
    QCOMPARE(s.status, std::string("completed"));
    QVERIFY2(s.test_accuracy >= minimum, qPrintable(QString("test accuracy %1 < %2").arg(s.test_accuracy).arg(minimum)));
    QCOMPARE(s.steps, 30L * (1437 / 64));  // drop-last: 22 steps an epoch
    QCOMPARE(s.params, int64_t(85002));

    // The record: config.json (every key resolved), metrics.jsonl (a line a step), summary.json, weights.
    namespace fs = std::filesystem;
    for (const char* f : {"config.json", "metrics.jsonl", "summary.json", "model.safetensors"})
      QVERIFY2(fs::exists(dir + "/" + f), f);
    const Json cfg = read_json(dir + "/config.json");
    QCOMPARE(cfg.at("precision").at("dtype").get<std::string>(), precision.toStdString());
    QCOMPARE(cfg.at("train").at("seed").get<int64_t>(), int64_t(1));
    const Json sum = read_json(dir + "/summary.json");
    for (const char* k : {"params", "steps", "epochs", "final_train_loss", "test_accuracy", "test_loss", "samples_per_s",
                          "peak_bytes", "wall_s"})
      QVERIFY2(sum.contains(k), k);
    QCOMPARE(sum.at("test_accuracy").get<double>(), s.test_accuracy);
    QVERIFY(sum.at("peak_bytes").contains("total"));
    const std::vector<Json> lines = metrics_lines(dir);
    QCOMPARE(static_cast<long>(lines.size()), s.steps);
    int evals = 0;
    for (const Json& l : lines) {
      for (const char* k : {"step", "loss", "train_accuracy", "lr", "loss_scale", "samples_per_s", "mem", "mem_peak"})
        QVERIFY2(l.contains(k), k);
      evals += l.contains("val_accuracy");
    }
    QCOMPARE(evals, 30);  // at the end of every epoch
    QCOMPARE(lines.back().at("val_accuracy").get<double>(), s.test_accuracy);

    if (precision == "fp16") {
      // The loss scale starts at 2^16 and is reported on every step with the skipped steps.
      QCOMPARE(lines.front().at("loss_scale").get<double>(), 65536.0);
      QCOMPARE(sum.at("skipped_steps").get<long>(), s.skipped_steps);
      QCOMPARE(lines.back().at("skipped_steps").get<long>(), s.skipped_steps);
    } else {
      QCOMPARE(lines.back().at("loss_scale").get<double>(), 1.0);
      QCOMPARE(s.skipped_steps, 0L);
    }
  }
};

QTEST_APPLESS_MAIN(TestDigitsTraining)
#include "test_digits_training.moc"
