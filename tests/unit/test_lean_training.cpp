// ctest-labels: unit;slow
// Issue 19's acceptance on the CPU, digits: each lean optimizer's fp32 test accuracy after 30
// epochs is at most 0.5 points below AdamW's, and the trainer's ledger holds the optimizer bytes
// plan/memory_model.h predicts. (char-gpt tiny: test_lean_training_gpt.) ZeRO with these
// optimizers is refused, naming the options.
#include <QtTest>
#include <filesystem>

#include "lean_training_support.h"
#include "test_support.h"
#include "train/distributed.h"
#include "train/run_record.h"
#include "train/trainer.h"

using namespace trainlab;
using namespace trainlab::test;


class TestLeanTraining : public QObject {
  Q_OBJECT
 private slots:
  // AdamW: lr 1e-3 (the digits default). 8-bit AdamW with blocks of 256 (this MLP's 85k
  // parameters are 42 blocks of 2048; the finer scales keep it within the 0.5 points), Lion with
  // its paper's language-model betas (0.95, 0.98), no weight decay and lr 3e-4.
  void digits_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("lr");
    QTest::addColumn<QString>("sets");
    QTest::newRow("adamw8bit") << "adamw8bit" << "0.001" << "optim.block_size=256";
    QTest::newRow("adafactor") << "adafactor" << "0.001" << "";
    QTest::newRow("lion") << "lion" << "0.0003" << "optim.beta1=0.95 optim.beta2=0.98 optim.weight_decay=0";
  }
  void digits() {
    QFETCH(QString, name);
    QFETCH(QString, lr);
    QFETCH(QString, sets);
    const std::string dir = QDir::tempPath().toStdString() + "/trainlab_lean_digits";
    const Outcome adamw = run(digits_config(dir, 0, 30), dir);
    Config c = digits_config(dir, 0, 30);
    set_optimizer(c, name, lr, sets);
    const Outcome o = run(c, dir);
    qInfo("digits %s: test accuracy %.4f (adamw %.4f), optimizer bytes %lld (predicted %lld)", qPrintable(name),
          o.summary.test_accuracy, adamw.summary.test_accuracy, static_cast<long long>(o.optimizer_bytes),
          static_cast<long long>(o.predicted_bytes));
    QCOMPARE(o.summary.status, std::string("completed"));
    QVERIFY2(o.summary.test_accuracy >= adamw.summary.test_accuracy - 0.005,
             qPrintable(QString("%1 < adamw's %2 - 0.005").arg(o.summary.test_accuracy).arg(adamw.summary.test_accuracy)));
    QCOMPARE(o.optimizer_bytes, o.predicted_bytes);
  }

  // ZeRO shards the state as ranges of the flat order, which these optimizers' states are not.
  void zeroIsRefused() {
    for (const char* name : {"adamw8bit", "adafactor", "lion"}) {
      Config c = digits_config("/tmp/unused");
      c.set("optim.name", name);
      c.set("dist.strategy", "zero1");
      const std::string e = error_of([&] { DistributedRun d(c); });
      QVERIFY2(e.find("dist.strategy zero1") != std::string::npos && e.find(std::string("optim.name ") + name) != std::string::npos,
               e.c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestLeanTraining)
#include "test_lean_training.moc"
