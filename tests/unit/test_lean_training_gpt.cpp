// ctest-labels: unit;slow
// Issue 19's acceptance on the CPU, char-gpt tiny (batch 16, 150 steps): each lean optimizer's
// validation loss is at most 2% above AdamW's after the same steps (lr 3e-3; Lion 2e-3 with beta2
// 0.99), and the trainer's memory ledger holds the optimizer bytes that plan/memory_model.h
// predicts: 8-bit AdamW <= 2.1 bytes a parameter (codes and block scales), Adafactor < 0.5 on the
// matrices, Lion 4 (fp32) or 2 (bf16).
#include <QtTest>
#include <filesystem>

#include "optim/lean_optimizers.h"
#include "plan/memory_model.h"
#include "plan/planner.h"
#include "lean_training_support.h"
#include "test_support.h"
#include "train/run_record.h"
#include "train/trainer.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

Config tiny_gpt() {
  Config c;
  c.set("device.name", "cpu");
  c.set("model.name", "char-gpt");
  c.set("model.preset", "tiny");
  c.set("train.batch", "16");
  c.set("train.steps", "150");
  c.set("train.eval_every", "150");
  c.set("train.eval_windows", "64");
  c.set("train.seed", "1");
  return c;
}

}  // namespace

class TestLeanTrainingGpt : public QObject {
  Q_OBJECT
 private slots:
  void charGptTiny_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("lr");
    QTest::addColumn<QString>("lion_state");
    QTest::newRow("adamw8bit") << "adamw8bit" << "0.003" << "fp32";
    QTest::newRow("adafactor") << "adafactor" << "0.003" << "fp32";
    QTest::newRow("lion fp32") << "lion" << "0.002" << "fp32";
    QTest::newRow("lion bf16") << "lion" << "0.002" << "bf16";
  }
  void charGptTiny() {
    QFETCH(QString, name);
    QFETCH(QString, lr);
    QFETCH(QString, lion_state);
    const std::string dir = QDir::tempPath().toStdString() + "/trainlab_lean_gpt";
    static Outcome adamw;  // the baseline once for every row
    if (adamw.val_loss == 0.0) {
      Config c = tiny_gpt();
      c.set("optim.lr", "0.003");
      adamw = run(c, dir);
    }
    Config c = tiny_gpt();
    set_optimizer(c, name, lr, name == "lion" ? "optim.beta2=0.99" : "");
    c.set("optim.lion_state", lion_state.toStdString());
    const Outcome o = run(c, dir);
    const double params = static_cast<double>(o.summary.params);
    qInfo("char-gpt tiny %s %s: val loss %.4f (adamw %.4f), optimizer bytes %lld (predicted %lld), %.4f a parameter",
          qPrintable(name), qPrintable(lion_state), o.val_loss, adamw.val_loss, static_cast<long long>(o.optimizer_bytes),
          static_cast<long long>(o.predicted_bytes), static_cast<double>(o.optimizer_bytes) / params);
    QCOMPARE(o.summary.status, std::string("completed"));
    QVERIFY(o.val_loss > 0.0 && adamw.val_loss > 0.0);
    QVERIFY2(o.val_loss <= 1.02 * adamw.val_loss,
             qPrintable(QString("val loss %1 > 1.02 x adamw's %2").arg(o.val_loss).arg(adamw.val_loss)));
    QCOMPARE(o.optimizer_bytes, o.predicted_bytes);
    const double per_param = static_cast<double>(o.optimizer_bytes) / params;
    if (name == "adamw8bit") QVERIFY2(per_param <= 2.1, qPrintable(QString::number(per_param)));
    if (name == "lion") QCOMPARE(per_param, lion_state == "bf16" ? 2.0 : 4.0);
    if (name == "adafactor") {
      // The vectors keep 4 bytes an element; what remains is the matrices' factored state.
      int64_t vector_elems = 0, matrix_elems = 0;
      for (const ParamShapeInfo& p : plan_model_preset("char-gpt-tiny", "model").param_shapes()) {
        int64_t r = 0, cc = 0;
        (adafactor_factors(p.shape, r, cc) ? matrix_elems : vector_elems) += shape_numel(p.shape);
      }
      QCOMPARE(matrix_elems + vector_elems, o.summary.params);
      const double on_matrices = static_cast<double>(o.optimizer_bytes - 4 * vector_elems) / static_cast<double>(matrix_elems);
      qInfo("adafactor: %.4f bytes a parameter on the matrices", on_matrices);
      QVERIFY2(on_matrices < 0.5, qPrintable(QString::number(on_matrices)));
    }
  }

};

QTEST_APPLESS_MAIN(TestLeanTrainingGpt)
#include "test_lean_training_gpt.moc"
