// plan/memory_model.h against the ledger through whole trainer runs: the predicted weights,
// gradients, optimizer state and activations of every step (StepMetrics::mem_predicted) equal the
// bytes the ledger holds (mem_current), for MLPs (ReLU and GELU; fp32, bf16, fp16 with loss
// scaling; AdamW and SGD; gradient accumulation) and the character transformer (checkpoint
// policies, dropout, bf16). Workspace is predicted as the resident data set only, so it is held
// to be at most the measured workspace. (QAT's fp32 copies and a distillation teacher are not
// predicted; those runs are not among these.)
#include <QtTest>

#include "config/config.h"
#include "plan/memory_model.h"
#include "train/trainer.h"

using namespace trainlab;

namespace {
size_t idx(MemCategory c) { return static_cast<size_t>(c); }
}  // namespace

class TestMemoryModel : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;

 private slots:
  void predictionEqualsLedger_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::newRow("digits-mlp fp32") << QStringList{"model.name=digits-mlp"};
    QTest::newRow("digits-mlp bf16 accumulate 3")
        << QStringList{"model.name=digits-mlp", "precision.dtype=bf16", "train.accumulate=3", "train.batch=16"};
    QTest::newRow("mlp gelu fp16 sgd") << QStringList{"model.name=mlp", "model.hidden=[48,24]", "model.activation=gelu",
                                                      "precision.dtype=fp16", "optim.name=sgd"};
    QTest::newRow("char-gpt fp32") << QStringList{"model.name=char-gpt", "model.dim=32", "model.heads=2", "model.context=16",
                                                  "train.batch=4", "train.eval_windows=4"};
    QTest::newRow("char-gpt bf16 every-k 2 of 3, dropout")
        << QStringList{"model.name=char-gpt", "model.layers=3", "model.dim=32", "model.heads=2", "model.context=16",
                       "train.batch=4", "train.eval_windows=4", "precision.dtype=bf16", "checkpoint.policy=every-k",
                       "checkpoint.k=2", "model.dropout=0.1"};
    QTest::newRow("char-gpt selective fp16 padded")
        << QStringList{"model.name=char-gpt", "model.dim=32", "model.heads=2", "model.context=16", "train.batch=4",
                       "train.eval_windows=4", "precision.dtype=fp16", "checkpoint.policy=selective", "model.pad_vocab=true"};
  }
  void predictionEqualsLedger() {
    QFETCH(QStringList, sets);
    Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "3");
    c.set("train.eval_every", "2");
    c.set("run.save_weights", "false");
    c.set("run.out", m_tmp.filePath(QString("run-%1").arg(QTest::currentDataTag()).replace(' ', '_')).toStdString());
    for (const QString& s : sets) {
      const auto kv = s.split('=');
      c.set(kv[0].toStdString(), kv.mid(1).join('=').toStdString());
    }
    std::vector<StepMetrics> steps;
    TrainerCallbacks cb;
    cb.on_step = [&](const StepMetrics& m) { steps.push_back(m); };
    Trainer t(c, cb);
    const RunSummary s = t.run();
    QCOMPARE(s.status, std::string("completed"));
    QCOMPARE(steps.size(), size_t{3});
    for (const StepMetrics& m : steps) {
      for (MemCategory cat : {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer, MemCategory::Activations})
        QCOMPARE(m.mem_predicted.by_category[idx(cat)], m.mem_current.by_category[idx(cat)]);
      QVERIFY(m.mem_predicted.by_category[idx(MemCategory::Activations)] > 0);
      QVERIFY(m.mem_predicted.by_category[idx(MemCategory::Workspace)] <= m.mem_current.by_category[idx(MemCategory::Workspace)]);
    }
  }

  // The FLOPs per token the trainer reports MFU with are the peer's count.
  void charGptFlops() {
    auto be = create_backend("cpu");
    CharGpt m(*be, CharGptConfig::preset("tiny"), 1);
    // The peer's count: 6 * non-embedding parameters + 12 * L * d * T. tiny has 421,632 parameters
    // (shared/bench's CPU peer prints the same), 413,440 without the 64 x 128 position embedding.
    QCOMPARE(m.non_embedding_params(), int64_t{413440});
    QCOMPARE(char_gpt_train_flops_per_token(m, 64), 6.0 * 413440 + 12.0 * 2 * 128 * 64);
    QCOMPARE(char_gpt_train_flops_per_token(m, 64) - char_gpt_train_flops_per_token(m, 32), 12.0 * 2 * 128 * 32);
  }
};

QTEST_APPLESS_MAIN(TestMemoryModel)
#include "test_memory_model.moc"
