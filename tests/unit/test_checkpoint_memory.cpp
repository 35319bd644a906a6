// The character transformer's activation bytes (the ledger's peak over two training steps:
// forward, loss, backward) equal plan/memory_model.h's char_gpt_activation_bytes exactly, for
// every checkpoint policy (every-k with k dividing the layers and not), with dropout, in fp32,
// bf16 and fp8 (whose products keep buffers of their own). The formula counts every buffer the
// model allocates and the logits' gradient the loss writes; backward's gradients reuse dead
// activations, so the peak is the sum.
#include <QtTest>
#include <random>

#include "backend/cpu_backend.h"
#include "nn/transformer.h"
#include "plan/memory_model.h"
#include "train/precision.h"

using namespace trainlab;

namespace {
struct Peak {
  int64_t measured = 0, predicted = 0;
};

Peak step_peak(CheckpointPolicy p, int64_t k, const std::string& precision, double dropout) {
  CpuBackend be(1);
  CharGptConfig c;
  c.vocab = 65;
  c.layers = 4, c.heads = 4, c.dim = 64, c.context = 32;
  c.dropout = dropout;
  CharGpt m(be, c, 3);
  const PrecisionPolicy& policy = precision_policy(precision);
  apply_precision(be, m, policy);
  m.set_checkpointing(p, k);
  const int64_t B = 4, T = 32;
  std::mt19937 g(5);
  std::vector<int32_t> xs(B * T), ys(B * T);
  for (auto& v : xs) v = static_cast<int32_t>(g() % 65);
  for (auto& v : ys) v = static_cast<int32_t>(g() % 65);
  Tensor x = be.empty({B, T}, DType::I32, MemCategory::Workspace);
  be.upload(x, xs.data(), DType::I32);
  Tensor y = be.empty({B * T}, DType::I32, MemCategory::Workspace);
  be.upload(y, ys.data(), DType::I32);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  for (int rep = 0; rep < 2; ++rep) {  // the second step with warm buffers
    Tensor logits = m.forward(be, x, true);
    // The logits' gradient counts as an activation, as in the prediction.
    Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
    be.softmax_xent(logits, y, &dl, 1.0f / (B * T), stats, false);
    m.backward(be, dl, false);
  }
  return {be.ledger().peak(MemCategory::Activations),
          char_gpt_activation_bytes(m, B, T, policy.element_bytes(), m.matmul_mode() == MatmulMode::Fp8)};
}
}  // namespace

class TestCheckpointMemory : public QObject {
  Q_OBJECT
 private slots:
  void peak_equals_prediction_data() {
    QTest::addColumn<int>("policy");
    QTest::addColumn<int>("k");
    QTest::addColumn<QString>("precision");
    QTest::addColumn<double>("dropout");
    const int off = int(CheckpointPolicy::Off), every = int(CheckpointPolicy::EveryBlock),
              every_k = int(CheckpointPolicy::EveryK), sel = int(CheckpointPolicy::Selective);
    QTest::newRow("off fp32") << off << 1 << "fp32" << 0.0;
    QTest::newRow("off bf16") << off << 1 << "bf16" << 0.0;
    QTest::newRow("off fp8") << off << 1 << "fp8" << 0.0;
    QTest::newRow("off bf16 dropout") << off << 1 << "bf16" << 0.1;
    QTest::newRow("every-block fp32") << every << 1 << "fp32" << 0.0;
    QTest::newRow("every-block bf16") << every << 1 << "bf16" << 0.0;
    QTest::newRow("every-block bf16 dropout") << every << 1 << "bf16" << 0.1;
    QTest::newRow("every-k 2 fp32") << every_k << 2 << "fp32" << 0.0;
    QTest::newRow("every-k 3 fp32 (last segment partial)") << every_k << 3 << "fp32" << 0.0;
    QTest::newRow("every-k 4 bf16 (one segment)") << every_k << 4 << "bf16" << 0.0;
    QTest::newRow("selective fp32") << sel << 1 << "fp32" << 0.0;
    QTest::newRow("selective fp16") << sel << 1 << "fp16" << 0.0;
    QTest::newRow("selective fp8 dropout") << sel << 1 << "fp8" << 0.1;
  }
  void peak_equals_prediction() {
    QFETCH(int, policy);
    QFETCH(int, k);
    QFETCH(QString, precision);
    QFETCH(double, dropout);
    const Peak p = step_peak(static_cast<CheckpointPolicy>(policy), k, precision.toStdString(), dropout);
    QVERIFY(p.predicted > 0);
    QCOMPARE(p.measured, p.predicted);
  }
};

QTEST_APPLESS_MAIN(TestCheckpointMemory)
#include "test_checkpoint_memory.moc"
