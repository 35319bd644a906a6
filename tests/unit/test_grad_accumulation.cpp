// Gradient accumulation: k micro-batches (loss scaled by 1/k) give the gradient of one batch k
// times larger, to 1e-6 relative (only the fp32 summation order differs), and so the same
// parameters after one optimizer step.
#include <QtTest>
#include <cmath>

#include "data/data_sources.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/training_step.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

struct Setup {
  std::unique_ptr<Backend> be = create_backend("cpu");
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<TrainingStep> step;
  Tensor x, y;

  Setup(int64_t batch, int k, bool adamw) {
    const TrainTestSplit data = load_classification_data(data_options(Config()));
    x = be->empty({data.train.size(), data.train.features}, DType::F32, MemCategory::Workspace);
    be->upload(x, data.train.x.data(), DType::F32);
    y = be->empty({data.train.size()}, DType::I32, MemCategory::Workspace);
    be->upload(y, data.train.y.data(), DType::I32);
    model = build_model(*be, {{"kind", "mlp"}, {"sizes", {64, 256, 256, 10}}, {"activation", "relu"}}, 5);
    if (adamw)
      opt = std::make_unique<AdamW>(AdamWHyper{});
    else
      opt = std::make_unique<Sgd>(SgdHyper{0.9f, 0.0f, false});
    step = std::make_unique<TrainingStep>(*be, *model, *opt, x, y, batch, k);
    std::vector<int32_t> idx(static_cast<size_t>(batch * k));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>((i * 37) % static_cast<size_t>(data.train.size()));
    step->set_indices(idx);
    StepScalars sc;
    sc.lr = 0.05f;
    be->set_step_scalars(sc);
  }

  std::vector<std::vector<float>> grads() {
    std::vector<std::vector<float>> out;
    for (Parameter* p : model->parameters()) out.push_back(download_f32(*be, p->grad));
    return out;
  }
  std::vector<std::vector<float>> params() {
    std::vector<std::vector<float>> out;
    for (Parameter* p : model->parameters()) out.push_back(download_f32(*be, p->master));
    return out;
  }
};

// max over tensors of ||a - b|| / ||b||, and the largest elementwise error relative to max|b|.
void expect_close(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, double rel,
                  const char* what, bool elementwise = true) {
  QCOMPARE(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    double diff = 0, norm = 0, maxabs = 0, maxdiff = 0;
    for (size_t i = 0; i < a[t].size(); ++i) {
      const double d = static_cast<double>(a[t][i]) - b[t][i];
      diff += d * d;
      norm += static_cast<double>(b[t][i]) * b[t][i];
      maxabs = std::max(maxabs, std::fabs(static_cast<double>(b[t][i])));
      maxdiff = std::max(maxdiff, std::fabs(d));
    }
    QVERIFY(norm > 0);
    const double r = std::sqrt(diff / norm);
    QVERIFY2(r <= rel, qPrintable(QString("%1 tensor %2: relative difference %3 > %4").arg(what).arg(t).arg(r).arg(rel)));
    if (elementwise)
      QVERIFY2(maxdiff <= 10 * rel * maxabs,
             qPrintable(QString("%1 tensor %2: largest elementwise difference %3 (max |value| %4)").arg(what).arg(t).arg(maxdiff).arg(maxabs)));
  }
}

}  // namespace

class TestGradAccumulation : public QObject {
  Q_OBJECT
 private slots:
  void gradientsMatch_data() {
    QTest::addColumn<int>("k");
    QTest::newRow("k=2") << 2;
    QTest::newRow("k=4") << 4;
    QTest::newRow("k=8") << 8;
  }
  void gradientsMatch() {
    QFETCH(int, k);
    const int64_t micro = 16;
    Setup acc(micro, k, false), big(micro * k, 1, false);
    acc.step->forward_backward();
    big.step->forward_backward();
    expect_close(acc.grads(), big.grads(), 1e-6, "gradient");
    // The summed loss and correct count over the k micro-batches are the big batch's.
    const std::vector<float> sa = download_f32(*acc.be, acc.step->stats()), sb = download_f32(*big.be, big.step->stats());
    QVERIFY(std::fabs(sa[0] - sb[0]) <= 1e-6 * std::fabs(sb[0]));
    QCOMPARE(sa[1], sb[1]);
  }

  void parametersAfterOneStep_data() {
    QTest::addColumn<bool>("adamw");
    QTest::newRow("sgd") << false;
    QTest::newRow("adamw") << true;
  }
  void parametersAfterOneStep() {
    QFETCH(bool, adamw);
    Setup acc(16, 4, adamw), big(64, 1, adamw);
    acc.step->full_step();
    big.step->full_step();
    // SGD's update is linear in the gradient: 1e-6 as for the gradients. AdamW's first update is
    // lr * g / (|g| + eps), which turns a last-bit difference in a gradient of size ~eps into a
    // large difference in that one element's update; over the whole tensor it stays below 1e-4.
    if (adamw)
      expect_close(acc.params(), big.params(), 1e-4, "parameters", false);
    else
      expect_close(acc.params(), big.params(), 1e-6, "parameters");
  }
};

QTEST_APPLESS_MAIN(TestGradAccumulation)
#include "test_grad_accumulation.moc"
