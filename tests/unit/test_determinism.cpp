// ctest-labels: unit;slow
// Same config and seed, twice, on the CPU: bit-identical metrics.jsonl losses, accuracies and
// weights. A different seed gives a different run.
#include <QtTest>
#include <cstring>

#include "io/safetensors.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {
uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

RunSummary run(const std::string& dir, const std::string& precision, long seed, long accumulate = 1) {
  Config c = digits_config(dir, 60);
  c.set("precision.dtype", precision);
  c.set("train.seed", std::to_string(seed));
  c.set("train.accumulate", std::to_string(accumulate));
  c.set("train.eval_every", "20");
  Trainer t(c);
  return t.run();
}
}  // namespace

class TestDeterminism : public QObject {
  Q_OBJECT
 private slots:
  void sameSeedSameBits_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<int>("accumulate");
    QTest::newRow("fp32") << "fp32" << 1;
    QTest::newRow("fp32-accumulate-2") << "fp32" << 2;
    QTest::newRow("bf16") << "bf16" << 1;
    QTest::newRow("fp16") << "fp16" << 1;
  }
  void sameSeedSameBits() {
    QFETCH(QString, precision);
    QFETCH(int, accumulate);
    QTemporaryDir tmp;
    const std::string a = tmp.path().toStdString() + "/a", b = tmp.path().toStdString() + "/b";
    const RunSummary sa = run(a, precision.toStdString(), 1, accumulate);
    const RunSummary sb = run(b, precision.toStdString(), 1, accumulate);
    const std::vector<Json> la = metrics_lines(a), lb = metrics_lines(b);
    QCOMPARE(la.size(), size_t(60));
    QCOMPARE(lb.size(), la.size());
    int evals = 0;
    for (size_t i = 0; i < la.size(); ++i) {
      QCOMPARE(bits(la[i].at("loss").get<double>()), bits(lb[i].at("loss").get<double>()));
      QCOMPARE(bits(la[i].at("train_accuracy").get<double>()), bits(lb[i].at("train_accuracy").get<double>()));
      QCOMPARE(la[i].contains("val_loss"), lb[i].contains("val_loss"));
      if (la[i].contains("val_loss")) {
        ++evals;
        QCOMPARE(bits(la[i].at("val_loss").get<double>()), bits(lb[i].at("val_loss").get<double>()));
      }
    }
    QCOMPARE(evals, 3);  // eval_every 20 over 60 steps
    QCOMPARE(bits(sa.test_loss), bits(sb.test_loss));
    QCOMPARE(bits(sa.final_train_loss), bits(sb.final_train_loss));
    // The weights files hold the same bytes.
    const SafeTensorsFile wa = read_safetensors(a + "/model.safetensors");
    const SafeTensorsFile wb = read_safetensors(b + "/model.safetensors");
    QCOMPARE(wa.tensors.size(), wb.tensors.size());
    for (size_t i = 0; i < wa.tensors.size(); ++i) QVERIFY(wa.tensors[i].bytes == wb.tensors[i].bytes);
  }

  void otherSeedOtherRun() {
    QTemporaryDir tmp;
    const std::string a = tmp.path().toStdString() + "/a", b = tmp.path().toStdString() + "/b";
    run(a, "fp32", 1);
    run(b, "fp32", 2);
    QVERIFY(metrics_lines(a).front().at("loss") != metrics_lines(b).front().at("loss"));
  }
};

QTEST_APPLESS_MAIN(TestDeterminism)
#include "test_determinism.moc"
