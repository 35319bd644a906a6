// AdamW and SGD (momentum, Nesterov, weight decay) against steps computed by hand, in double,
// with PyTorch's formulas (backend.h states them); learning-rate schedules.
#include <QtTest>
#include <cmath>

#include "backend/backend.h"
#include "nn/parameter.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

// A parameter with given fp32 values (compute format fp32 unless changed).
Parameter make_param(Backend& be, const std::vector<float>& w, const std::string& name = "p") {
  Parameter p;
  p.name = name;
  p.shape = {static_cast<int64_t>(w.size())};
  p.master = upload_f32(be, w, p.shape, MemCategory::Weights);
  p.value = p.master;
  p.grad = be.empty(p.shape, DType::F32, MemCategory::Gradients);
  be.fill(p.grad, 0.0f);
  return p;
}

bool rel_close(double a, double b, double rel = 1e-6) { return std::fabs(a - b) <= rel * std::max(1e-6, std::fabs(b)); }

// PyTorch's AdamW in double for one tensor.
struct RefAdamW {
  double lr, b1, b2, eps, wd;
  std::vector<double> w, m, v;
  int t = 0;
  void step(const std::vector<double>& g) {
    ++t;
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

}  // namespace

class TestOptimizers : public QObject {
  Q_OBJECT
 private slots:
  // One step worked out on paper: w = 1, g = 0.5, lr = 0.1, wd = 0.01, t = 1.
  //   w <- 1 * (1 - 0.1*0.01) = 0.999; m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25;
  //   w <- 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899 (+2e-9).
  void adamwByHand() {
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {1.0f, -2.0f});
    const std::vector<float> g{0.5f, -0.25f};
    be->upload(p.grad, g.data(), DType::F32);
    AdamW opt(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.01f});
    StepScalars sc;
    sc.lr = 0.1f;
    sc.step = 1.0f;
    be->set_step_scalars(sc);
    std::vector<Parameter*> ps{&p};
    opt.step(*be, ps);
    const std::vector<float> w = download_f32(*be, p.master);
    QVERIFY(rel_close(w[0], 0.899, 1e-6));
    // w = -2: decay to -1.998, then a step of +0.1 (the sign of -g): -1.898.
    QVERIFY(rel_close(w[1], -1.898, 1e-6));
    const std::vector<float> m = download_f32(*be, p.m), v = download_f32(*be, p.v);
    QVERIFY(rel_close(m[0], 0.05));
    QVERIFY(rel_close(v[0], 0.00025, 1e-4));  // 1 - 0.999f carries fp32's 5e-5 relative error
    QCOMPARE(p.m.category(), MemCategory::Optimizer);
  }

  // Several steps with changing gradients, bias correction over t = 1..5, against double.
  void adamwSeveralSteps() {
    auto be = create_backend("cpu");
    const std::vector<float> w0 = random_vector(64, 3);
    Parameter p = make_param(*be, w0);
    AdamWHyper h{0.9f, 0.95f, 1e-6f, 0.1f};
    AdamW opt(h);
    RefAdamW ref{1e-2, 0.9, 0.95, 1e-6, 0.1, {w0.begin(), w0.end()}, std::vector<double>(64), std::vector<double>(64)};
    std::vector<Parameter*> ps{&p};
    for (int t = 1; t <= 5; ++t) {
      const std::vector<float> g = random_vector(64, 100 + t, -0.1f, 0.1f);
      be->upload(p.grad, g.data(), DType::F32);
      StepScalars sc;
      sc.lr = 1e-2f;
      sc.step = static_cast<float>(t);
      be->set_step_scalars(sc);
      opt.step(*be, ps);
      ref.step({g.begin(), g.end()});
    }
    const std::vector<float> w = download_f32(*be, p.master);
    for (size_t i = 0; i < w.size(); ++i)
      QVERIFY2(std::fabs(w[i] - ref.w[i]) <= 1e-6 * std::max(1.0, std::fabs(ref.w[i])),
               qPrintable(QString("w[%1] = %2, expected %3").arg(i).arg(w[i], 0, 'g', 9).arg(ref.w[i], 0, 'g', 9)));
  }

  // grad_unscale divides the (loss-scaled) gradient; decay=false skips weight decay; the mask
  // keeps pruned weights at zero; a bf16 value copy is rewritten from the fp32 master.
  void adamwUnscaleDecayMaskAndValue() {
    auto be = create_backend("cpu");
    Parameter a = make_param(*be, {1.0f, 1.0f, 1.0f}, "a");
    Parameter b = make_param(*be, {1.0f, 1.0f, 1.0f}, "b");
    b.decay = false;
    a.mask = upload_f32(*be, {1.0f, 0.0f, 1.0f}, {3});
    a.set_compute_dtype(*be, DType::BF16);
    QCOMPARE(a.value.dtype(), DType::BF16);
    const std::vector<float> g{1024.0f, 1024.0f, 1024.0f};  // loss scale 1024: true gradient 1
    be->upload(a.grad, g.data(), DType::F32);
    be->upload(b.grad, g.data(), DType::F32);
    StepScalars sc;
    sc.lr = 0.1f;
    sc.step = 1.0f;
    sc.grad_unscale = 1.0f / 1024.0f;
    be->set_step_scalars(sc);
    AdamW opt(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.5f});
    std::vector<Parameter*> ps{&a, &b};
    opt.step(*be, ps);
    const std::vector<float> wa = download_f32(*be, a.master), wb = download_f32(*be, b.master);
    QVERIFY(rel_close(wa[0], 1.0 * (1 - 0.05) - 0.1));
    QCOMPARE(wa[1], 0.0f);
    QVERIFY(rel_close(wb[0], 1.0 - 0.1));
    const std::vector<float> va = download_f32(*be, a.value);
    for (size_t i = 0; i < 3; ++i) QCOMPARE(va[i], round_to(DType::BF16, wa[i]));
  }

  // SGD with momentum (PyTorch: buf = mu buf + g, w -= lr buf; buf starts at g), weight decay
  // added to the gradient, and Nesterov (w -= lr (g + mu buf)).
  void sgdMomentum() {
    for (bool nesterov : {false, true}) {
      auto be = create_backend("cpu");
      Parameter p = make_param(*be, {1.0f, -0.5f});
      SgdHyper h{0.9f, 0.01f, nesterov};
      Sgd opt(h);
      std::vector<Parameter*> ps{&p};
      std::vector<double> w{1.0, -0.5}, buf{0.0, 0.0};
      const std::vector<std::vector<float>> grads{{0.2f, -0.1f}, {0.4f, 0.3f}, {-0.1f, 0.0f}};
      for (size_t t = 0; t < grads.size(); ++t) {
        be->upload(p.grad, grads[t].data(), DType::F32);
        StepScalars sc;
        sc.lr = 0.5f;
        sc.step = static_cast<float>(t + 1);
        be->set_step_scalars(sc);
        opt.step(*be, ps);
        for (size_t i = 0; i < 2; ++i) {
          const double g = grads[t][i] + 0.01 * w[i];
          buf[i] = 0.9 * buf[i] + g;
          w[i] -= 0.5 * (nesterov ? g + 0.9 * buf[i] : buf[i]);
        }
      }
      const std::vector<float> got = download_f32(*be, p.master);
      for (size_t i = 0; i < 2; ++i)
        QVERIFY2(rel_close(got[i], w[i], 1e-6), qPrintable(QString("nesterov=%1 w[%2] = %3, expected %4")
                                                               .arg(nesterov)
                                                               .arg(i)
                                                               .arg(got[i], 0, 'g', 9)
                                                               .arg(w[i], 0, 'g', 9)));
    }
    // First step by hand: w = 1, g = 0.2 + 0.01 = 0.21, buf = 0.21, w = 1 - 0.5 * 0.21 = 0.895.
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {1.0f});
    const float g = 0.2f;
    be->upload(p.grad, &g, DType::F32);
    StepScalars sc;
    sc.lr = 0.5f;
    be->set_step_scalars(sc);
    Sgd opt(SgdHyper{0.9f, 0.01f, false});
    std::vector<Parameter*> ps{&p};
    opt.step(*be, ps);
    QVERIFY(rel_close(download_f32(*be, p.master)[0], 0.895));
    QCOMPARE(opt.state_buffers().size(), size_t{1});
  }

  void sgdWithoutMomentumKeepsNoState() {
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {2.0f});
    const float g = 1.0f;
    be->upload(p.grad, &g, DType::F32);
    StepScalars sc;
    sc.lr = 0.25f;
    be->set_step_scalars(sc);
    Sgd opt(SgdHyper{0.0f, 0.0f, false});
    std::vector<Parameter*> ps{&p};
    opt.step(*be, ps);
    QCOMPARE(download_f32(*be, p.master)[0], 1.75f);
    QVERIFY(!p.m.defined());
    QVERIFY(opt.state_buffers().empty());
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), int64_t(0));
  }

  void learningRateSchedules() {
    LrSchedule c;
    c.base_lr = 0.1;
    QCOMPARE(c.at(0), 0.1);
    QCOMPARE(c.at(1000), 0.1);
    LrSchedule w;
    w.name = "warmup-cosine";
    w.base_lr = 1.0;
    w.warmup_steps = 10;
    w.total_steps = 110;
    w.min_lr = 0.1;
    QVERIFY(rel_close(w.at(0), 0.1));       // (0 + 1) / 10
    QVERIFY(rel_close(w.at(9), 1.0));       // end of warm-up
    QVERIFY(rel_close(w.at(10), 1.0));      // cosine starts at the peak
    QVERIFY(rel_close(w.at(60), 0.55));     // half-way: (1 + 0.1) / 2
    QVERIFY(rel_close(w.at(110), 0.1));     // the end: min_lr
    QVERIFY(rel_close(w.at(500), 0.1));     // and after
    for (long s = 11; s < 110; ++s) QVERIFY(w.at(s) <= w.at(s - 1));
  }
};

QTEST_APPLESS_MAIN(TestOptimizers)
#include "test_optimizers.moc"
