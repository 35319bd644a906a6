// Activation checkpointing of the character transformer: every policy gives bit-identical
// gradients to no checkpointing (fp32 and bf16, with and without dropout: recomputation redraws
// the same masks), and holds fewer activation bytes (ledger).
#include <QtTest>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu_backend.h"
#include "nn/transformer.h"
#include "plan/memory_model.h"

using namespace trainlab;

namespace {
struct Result {
  std::vector<std::vector<uint8_t>> grads;
  int64_t held_after_forward = 0;  // activation bytes held between forward and backward
  double loss = 0;
};

Result run(CheckpointPolicy p, int64_t k, DType dt, int64_t layers, int64_t dim, double dropout = 0.0) {
  CpuBackend be(1);
  CharGptConfig c;
  c.vocab = 13;
  c.layers = layers, c.heads = 2, c.dim = dim, c.context = 8;
  c.dropout = dropout;
  CharGpt m(be, c, 11);
  m.set_compute_dtype(be, dt);
  m.set_checkpointing(p, k);
  const int64_t B = 3, T = 8;
  std::mt19937 g(12);
  std::vector<int32_t> xs(B * T), ys(B * T);
  for (auto& v : xs) v = static_cast<int32_t>(g() % 13);
  for (auto& v : ys) v = static_cast<int32_t>(g() % 13);
  Tensor x = be.empty({B, T}, DType::I32, MemCategory::Workspace);
  be.upload(x, xs.data(), DType::I32);
  Tensor y = be.empty({B * T}, DType::I32, MemCategory::Workspace);
  be.upload(y, ys.data(), DType::I32);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  Result r;
  for (int rep = 0; rep < 2; ++rep) {  // the second step runs with warm buffers
    Tensor logits = m.forward(be, x, true);
    r.held_after_forward = be.ledger().current(MemCategory::Activations);
    Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Workspace);
    be.softmax_xent(logits, y, &dl, 1.0f / (B * T), stats, false);
    m.backward(be, dl, false);
  }
  float st[2];
  be.download(stats, st, DType::F32);
  r.loss = st[0];
  for (Parameter* q : m.parameters()) {
    std::vector<uint8_t> b(q->grad.bytes());
    std::memcpy(b.data(), q->grad.raw(), b.size());
    r.grads.push_back(std::move(b));
  }
  return r;
}
}  // namespace

class TestCheckpoint : public QObject {
  Q_OBJECT
 private slots:
  void bitIdenticalGradients_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<double>("dropout");
    QTest::newRow("fp32") << int(DType::F32) << 0.0;
    QTest::newRow("bf16") << int(DType::BF16) << 0.0;
    QTest::newRow("fp32 dropout 0.2") << int(DType::F32) << 0.2;
    QTest::newRow("bf16 dropout 0.2") << int(DType::BF16) << 0.2;
  }
  void bitIdenticalGradients() {
    QFETCH(int, dtype);
    QFETCH(double, dropout);
    const DType dt = static_cast<DType>(dtype);
    const Result off = run(CheckpointPolicy::Off, 0, dt, 4, 16, dropout);
    struct P {
      CheckpointPolicy p;
      int64_t k;
      const char* name;
    };
    for (P p : {P{CheckpointPolicy::EveryBlock, 1, "every-block"}, P{CheckpointPolicy::EveryK, 0, "every-k (sqrt)"},
                P{CheckpointPolicy::EveryK, 3, "every-k 3"}, P{CheckpointPolicy::Selective, 0, "selective"}}) {
      const Result r = run(p.p, p.k, dt, 4, 16, dropout);
      QCOMPARE(r.loss, off.loss);
      QCOMPARE(r.grads.size(), off.grads.size());
      for (size_t i = 0; i < r.grads.size(); ++i)
        QVERIFY2(r.grads[i] == off.grads[i], qPrintable(QString("%1: gradient %2 differs").arg(p.name).arg(i)));
    }
  }

  // Dropout changes the training loss (masks are drawn) but is the identity at p = 0.
  void dropoutChangesTrainingLoss() {
    const Result none = run(CheckpointPolicy::Off, 0, DType::F32, 2, 16, 0.0);
    const Result drop = run(CheckpointPolicy::Off, 0, DType::F32, 2, 16, 0.3);
    QVERIFY(std::isfinite(drop.loss));
    QVERIFY(drop.loss != none.loss);
  }

  void holdsFewerActivations() {
    const int64_t off = run(CheckpointPolicy::Off, 0, DType::F32, 6, 64).held_after_forward;
    const int64_t every = run(CheckpointPolicy::EveryBlock, 1, DType::F32, 6, 64).held_after_forward;
    const int64_t sqrtk = run(CheckpointPolicy::EveryK, 0, DType::F32, 6, 64).held_after_forward;
    const int64_t sel = run(CheckpointPolicy::Selective, 0, DType::F32, 6, 64).held_after_forward;
    qInfo("activation bytes held after forward: off %lld, every-block %lld, every-k(2) %lld, selective %lld",
          (long long)off, (long long)every, (long long)sqrtk, (long long)sel);
    QVERIFY(every < off / 3);
    QVERIFY(sqrtk < off / 2);
    QVERIFY(sel < off);
    QVERIFY(every < sqrtk);
  }

  // plan/memory_model.h's activation count by policy (its equality with the ledger is
  // test_checkpoint_memory's): checkpointing every block keeps one block's full set instead of L
  // (the L - 1 other outputs become kept segment inputs); selective drops each block's LayerNorm
  // and GELU outputs (6 N D elements) for one shared set.
  void predictionFollowsPolicy() {
    CpuBackend be(1);
    CharGptConfig c = CharGptConfig::preset("small");
    CharGpt m(be, c, 1);
    const int64_t B = 64, T = 256, N = B * T, L = c.layers, eb = 2;
    const int64_t nd = N * c.dim * eb, full_set = 15 * nd + 16 * N + 4 * N * c.heads;
    const int64_t off = char_gpt_activation_bytes(m, B, T, eb, false);
    QCOMPARE(off - 2 * N * c.padded_vocab() * eb, L * (full_set + nd) + 4 * nd + 8 * N);
    m.set_checkpointing(CheckpointPolicy::EveryBlock, 1);
    QCOMPARE(off - char_gpt_activation_bytes(m, B, T, eb, false), (L - 1) * full_set);
    m.set_checkpointing(CheckpointPolicy::Selective, 0);
    QCOMPARE(off - char_gpt_activation_bytes(m, B, T, eb, false), (L - 1) * 6 * nd);
  }
};

QTEST_APPLESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
