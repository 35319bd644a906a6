// The character transformer's activation bytes (ledger peak over a training step: forward,
// loss, backward) against CharGpt::predicted_activation_bytes, the DOMAIN.md count (34 bytes per
// token and channel per layer at 16 bits; only the residual stream at segment starts plus one
// block's activations when checkpointing). Backward's gradients live in activations that are
// dead by then (block_backward), so the measured peak stays within 10 % of the prediction with
// and without checkpointing, in fp32 and bf16.
#include <QtTest>
#include <random>

#include "backend/cpu_backend.h"
#include "nn/transformer.h"

using namespace trainlab;

namespace {
struct Peak {
  int64_t measured = 0, predicted = 0;
};

Peak step_peak(CheckpointPolicy p, DType dt) {
  CpuBackend be(1);
  CharGptConfig c;
  c.vocab = 65;
  c.layers = 4, c.heads = 4, c.dim = 64, c.context = 32;
  CharGpt m(be, c, 3);
  m.set_compute_dtype(be, dt);
  m.set_checkpointing(p, 1);
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
  return {be.ledger().peak(MemCategory::Activations), m.predicted_activation_bytes(B, T, dt == DType::F32 ? 4 : 2)};
}
}  // namespace

class TestCheckpointMemory : public QObject {
  Q_OBJECT
 private slots:
  void peak_within_prediction_data() {
    QTest::addColumn<int>("policy");
    QTest::addColumn<int>("dtype");
    QTest::newRow("off fp32") << int(CheckpointPolicy::Off) << int(DType::F32);
    QTest::newRow("off bf16") << int(CheckpointPolicy::Off) << int(DType::BF16);
    QTest::newRow("every-block fp32") << int(CheckpointPolicy::EveryBlock) << int(DType::F32);
    QTest::newRow("every-block bf16") << int(CheckpointPolicy::EveryBlock) << int(DType::BF16);
  }
  void peak_within_prediction() {
    QFETCH(int, policy);
    QFETCH(int, dtype);
    const Peak p = step_peak(static_cast<CheckpointPolicy>(policy), static_cast<DType>(dtype));
    qInfo("activation peak %lld bytes, predicted %lld (%.3f)", static_cast<long long>(p.measured),
          static_cast<long long>(p.predicted), static_cast<double>(p.measured) / static_cast<double>(p.predicted));
    QVERIFY(p.predicted > 0);
    QVERIFY2(static_cast<double>(p.measured) <= 1.10 * static_cast<double>(p.predicted),
             qPrintable(QString("measured %1 > 1.1 x predicted %2").arg(p.measured).arg(p.predicted)));
  }
};

QTEST_APPLESS_MAIN(TestCheckpointMemory)
#include "test_checkpoint_memory.moc"
