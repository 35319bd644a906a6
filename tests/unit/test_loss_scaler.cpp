// fp16 dynamic loss scaling: halve and skip on inf/NaN, double after N good steps in a row, both
// numbers configurable; and the same rules seen through a training run's metrics.
#include <QtTest>
#include <cmath>

#include "optim/loss_scaler.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

class TestLossScaler : public QObject {
  Q_OBJECT
 private slots:
  void defaults() {
    LossScaler s;
    QCOMPARE(s.scale(), 65536.0);  // 2^16
    QVERIFY(s.enabled());
    for (int i = 0; i < 1999; ++i) QVERIFY(s.update(true));
    QCOMPARE(s.scale(), 65536.0);
    QVERIFY(s.update(true));  // the 2,000th good step doubles
    QCOMPARE(s.scale(), 131072.0);
    QCOMPARE(s.skipped(), 0L);
  }

  void halveAndSkipOnOverflow() {
    LossScaler s(1024.0, 3);
    QVERIFY(!s.update(false));  // skip
    QCOMPARE(s.scale(), 512.0);
    QCOMPARE(s.skipped(), 1L);
    QVERIFY(!s.update(false));
    QCOMPARE(s.scale(), 256.0);
    QCOMPARE(s.consecutive_skips(), 2L);
    QVERIFY(s.update(true));
    QCOMPARE(s.consecutive_skips(), 0L);
    QCOMPARE(s.skipped(), 2L);
  }

  // A skip restarts the count of good steps.
  void growthNeedsAnUnbrokenRun() {
    LossScaler s(8.0, 3);
    QVERIFY(s.update(true));
    QVERIFY(s.update(true));
    QVERIFY(!s.update(false));  // 8 -> 4, count restarts
    QCOMPARE(s.scale(), 4.0);
    QVERIFY(s.update(true));
    QVERIFY(s.update(true));
    QCOMPARE(s.scale(), 4.0);
    QVERIFY(s.update(true));  // third in a row
    QCOMPARE(s.scale(), 8.0);
    QCOMPARE(s.good_steps(), 0L);
  }

  void disabledIsIdentity() {
    LossScaler s(65536.0, 2000, false);
    QCOMPARE(s.scale(), 1.0);
    QVERIFY(s.update(false));
    QCOMPARE(s.skipped(), 0L);
  }

  void invalidSettings() {
    QVERIFY(error_of([] { LossScaler s(0.0, 10); }).find("precision.loss_scale.init") != std::string::npos);
    QVERIFY(error_of([] { LossScaler s(1.0, 0); }).find("precision.loss_scale.growth_interval") != std::string::npos);
  }

  // Through the trainer: an initial scale of 2^40 overflows fp16 gradients, so the first steps
  // are skipped with the scale halving each time until it fits; with a growth interval of 5 it
  // then doubles after every 5 good steps. metrics.jsonl and the summary report both.
  void inATrainingRun() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    Config c = digits_config(dir, 40);
    c.set("precision.dtype", "fp16");
    c.set("precision.loss_scale.init", "1099511627776");
    c.set("precision.loss_scale.growth_interval", "5");
    c.set("run.save_weights", "false");
    Trainer t(c);
    const RunSummary s = t.run();
    QCOMPARE(s.status, std::string("completed"));
    const std::vector<Json> lines = metrics_lines(dir);
    QCOMPARE(lines.size(), size_t(40));
    long skips = 0;
    double prev_scale = 1099511627776.0;
    long good_run = 0;
    for (const Json& l : lines) {
      const double scale = l.at("loss_scale").get<double>();
      const bool skipped = l.value("skipped", false);
      if (skipped) {
        ++skips;
        QCOMPARE(scale, prev_scale / 2);
        good_run = 0;
      } else if (++good_run == 5) {
        QCOMPARE(scale, prev_scale * 2);
        good_run = 0;
      } else {
        QCOMPARE(scale, prev_scale);
      }
      QCOMPARE(l.at("skipped_steps").get<long>(), skips);
      prev_scale = scale;
    }
    QVERIFY2(skips >= 1, "an initial scale of 2^40 must overflow fp16 gradients");
    QCOMPARE(s.skipped_steps, skips);
    QCOMPARE(read_json(dir + "/summary.json").at("skipped_steps").get<long>(), skips);
    // Skipped steps are not divergence: the run trains on.
    QVERIFY(std::isfinite(lines.back().at("loss").get<double>()));
  }
};

QTEST_APPLESS_MAIN(TestLossScaler)
#include "test_loss_scaler.moc"
