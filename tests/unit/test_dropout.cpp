// The dropout operation (Backend::dropout, CPU reference): the kept fraction is 1 - p, kept values
// are scaled by 1/(1-p), the mask is a function of the seed alone (the backward call with the same
// seed applies the same mask), different seeds draw different masks, p = 0 is the identity, bad p
// is refused; and a char-gpt forward in evaluation mode applies no dropout.
#include <QtTest>
#include <cmath>
#include <vector>

#include "backend/cpu_backend.h"
#include "tensor/dropout_hash.h"
#include "nn/transformer.h"
#include "util/error.h"

using namespace trainlab;

namespace {
std::vector<float> apply(CpuBackend& be, const std::vector<float>& x, float p, uint64_t seed, DType dt) {
  Tensor t = be.empty({static_cast<int64_t>(x.size())}, dt, MemCategory::Workspace);
  be.upload(t, x.data(), DType::F32);
  be.dropout(t, p, seed, t);  // in place, as the model uses it
  std::vector<float> y(x.size());
  be.download(t, y.data(), DType::F32);
  return y;
}
}  // namespace

class TestDropout : public QObject {
  Q_OBJECT
 private slots:
  void keptFractionAndScale() {
    CpuBackend be(1);
    const size_t n = 200000;
    std::vector<float> ones(n, 1.0f);
    for (float p : {0.1f, 0.2f, 0.5f}) {
      const std::vector<float> y = apply(be, ones, p, 7, DType::F32);
      size_t kept = 0;
      for (float v : y) {
        if (v != 0.0f) {
          ++kept;
          QCOMPARE(v, 1.0f / (1.0f - p));
        }
      }
      const double frac = static_cast<double>(kept) / n;
      // Binomial standard deviation sqrt(p(1-p)/n) < 0.0012: 5 sigma.
      QVERIFY2(std::fabs(frac - (1.0 - p)) < 0.006, qPrintable(QString("p %1: kept %2").arg(p).arg(frac)));
    }
  }

  void maskIsAFunctionOfTheSeed() {
    CpuBackend be(1);
    std::vector<float> x(4096), dy(4096);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + static_cast<float>(i % 7), dy[i] = -1.0f - static_cast<float>(i % 5);
    const std::vector<float> a = apply(be, x, 0.25f, 99, DType::F32);
    const std::vector<float> b = apply(be, x, 0.25f, 99, DType::F32);
    const std::vector<float> g = apply(be, dy, 0.25f, 99, DType::F32);
    const std::vector<float> c = apply(be, x, 0.25f, 100, DType::F32);
    QVERIFY(a == b);
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      QCOMPARE(a[i] == 0.0f, g[i] == 0.0f);  // backward: the same mask on the gradient
      QCOMPARE(a[i] == 0.0f, dropout_hash(99, i) < dropout_threshold(0.25f));
      differ += (a[i] == 0.0f) != (c[i] == 0.0f);
    }
    QVERIFY(differ > 500);  // another seed, another mask (expected 2 p (1-p) n = 1536)
  }

  void zeroIsIdentityAndBadPRefused() {
    CpuBackend be(1);
    std::vector<float> x{1.5f, -2.0f, 3.25f};
    QVERIFY(apply(be, x, 0.0f, 1, DType::BF16) == x);
    QVERIFY_THROWS_EXCEPTION(Error, apply(be, x, 1.0f, 1, DType::F32));
    QVERIFY_THROWS_EXCEPTION(Error, apply(be, x, -0.1f, 1, DType::F32));
  }

  void evaluationForwardHasNoDropout() {
    CpuBackend be(1);
    CharGptConfig c;
    c.vocab = 11, c.layers = 2, c.heads = 2, c.dim = 16, c.context = 8;
    CharGpt plain(be, c, 5);
    c.dropout = 0.5;
    CharGpt dropped(be, c, 5);  // same seed: same weights
    std::vector<int32_t> toks(16);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>(i % 11);
    Tensor x = be.empty({2, 8}, DType::I32, MemCategory::Workspace);
    be.upload(x, toks.data(), DType::I32);
    auto logits = [&](CharGpt& m, bool training) {
      Tensor l = m.forward(be, x, training);
      std::vector<float> v(static_cast<size_t>(l.numel()));
      be.download(l, v.data(), DType::F32);
      return v;
    };
    QVERIFY(logits(plain, false) == logits(dropped, false));
    QVERIFY(logits(plain, true) != logits(dropped, true));
    QVERIFY_THROWS_EXCEPTION(Error, [] {
      CharGptConfig bad;
      bad.dropout = 1.0;
      bad.validate();
    }());
  }
};

QTEST_APPLESS_MAIN(TestDropout)
#include "test_dropout.moc"
