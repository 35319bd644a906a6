// The memory ledger: per-category current and peak bytes, and its counts for the digits MLP
// (85,002 parameters): fp32 weights are exactly 85,002 x 4 bytes; 16-bit halves weights and
// gradients and moves the fp32 master to the optimizer category; AdamW adds 8 bytes a parameter.
#include <QtTest>

#include "nn/model.h"
#include "optim/optimizer.h"
#include "tensor/memory_ledger.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {
constexpr int64_t kParams = 85002;  // 64*256+256 + 256*256+256 + 256*10+10

void adamw_step(Backend& be, Model& model) {
  std::vector<Parameter*> ps = model.parameters();
  StepScalars sc;
  sc.lr = 1e-3f;
  be.set_step_scalars(sc);
  AdamW(AdamWHyper{}).step(be, ps);
}
}  // namespace

class TestMemoryLedger : public QObject {
  Q_OBJECT
 private slots:
  void countsAndPeaks() {
    MemoryLedger l;
    l.on_alloc(MemCategory::Weights, 100);
    l.on_alloc(MemCategory::Activations, 50);
    l.on_free(MemCategory::Activations, 50);
    l.on_alloc(MemCategory::Activations, 20);
    QCOMPARE(l.current(MemCategory::Weights), int64_t(100));
    QCOMPARE(l.current(MemCategory::Activations), int64_t(20));
    QCOMPARE(l.peak(MemCategory::Activations), int64_t(50));
    MemorySnapshot s = l.snapshot();
    QCOMPARE(s.current_total, int64_t(120));
    QCOMPARE(s.peak_total, int64_t(150));
    l.move(MemCategory::Weights, MemCategory::Optimizer, 100);
    QCOMPARE(l.current(MemCategory::Weights), int64_t(0));
    QCOMPARE(l.current(MemCategory::Optimizer), int64_t(100));
    QCOMPARE(l.peak(MemCategory::Weights), int64_t(100));
    QCOMPARE(l.snapshot().current_total, int64_t(120));  // a move is not an allocation
    l.reset_peaks();
    QCOMPARE(l.peak(MemCategory::Activations), int64_t(20));
    QCOMPARE(l.snapshot().peak_total, int64_t(120));
  }

  // Tensors return their bytes when the last handle goes.
  void tensorsReleaseTheirBytes() {
    auto be = create_backend("cpu");
    {
      Tensor t = be->empty({10, 10}, DType::F32, MemCategory::Workspace);
      Tensor view = t.reshape({100});
      QCOMPARE(be->ledger().current(MemCategory::Workspace), int64_t(400));
      t = Tensor();
      QCOMPARE(be->ledger().current(MemCategory::Workspace), int64_t(400));  // the view keeps it
    }
    QCOMPARE(be->ledger().current(MemCategory::Workspace), int64_t(0));
    QCOMPARE(be->ledger().peak(MemCategory::Workspace), int64_t(400));
    Tensor h = be->empty({3}, DType::BF16, MemCategory::Activations);
    QCOMPARE(be->ledger().current(MemCategory::Activations), int64_t(6));
  }

  void digitsMlpFp32() {
    auto be = create_backend("cpu");
    Mlp model(*be, {64, 256, 256, 10}, Activation::ReLU, 1);
    QCOMPARE(model.parameter_count(), kParams);
    QCOMPARE(be->ledger().current(MemCategory::Weights), kParams * 4);
    QCOMPARE(be->ledger().current(MemCategory::Gradients), kParams * 4);
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), int64_t(0));
    adamw_step(*be, model);  // state is created on the first step, as in PyTorch
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), kParams * 8);
    QCOMPARE(be->ledger().current(MemCategory::Weights), kParams * 4);
    // 4 + 4 + 8 = 16 bytes a parameter.
    QCOMPARE(be->ledger().current(MemCategory::Weights) + be->ledger().current(MemCategory::Gradients) +
                 be->ledger().current(MemCategory::Optimizer),
             kParams * 16);
  }

  void digitsMlp16Bit() {
    for (DType dt : {DType::BF16, DType::F16}) {
      auto be = create_backend("cpu");
      Mlp model(*be, {64, 256, 256, 10}, Activation::ReLU, 1);
      model.set_compute_dtype(*be, dt);
      QCOMPARE(be->ledger().current(MemCategory::Weights), kParams * 2);
      QCOMPARE(be->ledger().current(MemCategory::Gradients), kParams * 2);
      QCOMPARE(be->ledger().current(MemCategory::Optimizer), kParams * 4);  // the fp32 master
      adamw_step(*be, model);
      QCOMPARE(be->ledger().current(MemCategory::Optimizer), kParams * 12);  // master + m + v
      // Mixed-precision Adam: 2 + 2 + 12 = 16 bytes a parameter.
      QCOMPARE(be->ledger().current(MemCategory::Weights) + be->ledger().current(MemCategory::Gradients) +
                   be->ledger().current(MemCategory::Optimizer),
               kParams * 16);
      // Back to fp32: the master becomes the weights again.
      model.set_compute_dtype(*be, DType::F32);
      QCOMPARE(be->ledger().current(MemCategory::Weights), kParams * 4);
      QCOMPARE(be->ledger().current(MemCategory::Gradients), kParams * 4);
      QCOMPARE(be->ledger().current(MemCategory::Optimizer), kParams * 8);
    }
  }

  // A run's summary reports the peaks per category; the weights peak is exactly 85,002 x 4.
  void runSummaryPeaks() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    Config c = digits_config(dir, 3);
    Trainer t(c);
    const RunSummary s = t.run();
    QCOMPARE(s.params, kParams);
    QCOMPARE(s.peak_bytes.by_category[static_cast<size_t>(MemCategory::Weights)], kParams * 4);
    QCOMPARE(s.peak_bytes.by_category[static_cast<size_t>(MemCategory::Gradients)], kParams * 4);
    QCOMPARE(s.peak_bytes.by_category[static_cast<size_t>(MemCategory::Optimizer)], kParams * 8);
    const Json j = read_json(dir + "/summary.json");
    QCOMPARE(j.at("peak_bytes").at("weights").get<int64_t>(), kParams * 4);
    QVERIFY(j.at("peak_bytes").at("total").get<int64_t>() >= kParams * 16);
    // Every step's line carries current and peak bytes per category.
    const std::vector<Json> lines = metrics_lines(dir);
    QCOMPARE(lines.size(), size_t(3));
    for (const char* cat : {"weights", "gradients", "optimizer", "activations", "workspace", "communication"}) {
      QVERIFY(lines.back().at("mem").contains(cat));
      QVERIFY(lines.back().at("mem_peak").contains(cat));
    }
    QCOMPARE(lines.back().at("mem").at("weights").get<int64_t>(), kParams * 4);
  }
};

QTEST_APPLESS_MAIN(TestMemoryLedger)
#include "test_memory_ledger.moc"
