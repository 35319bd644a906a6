// Finite-difference gradient checks for every layer and for the loss, on the CPU reference.
//
// Numerics: forward passes run in fp32; the scalar objective L = sum(y * r) (r fixed random) is
// summed in double, and each checked derivative is a central difference (L(p+h) - L(p-h)) / 2h.
// With h = 1e-2 on smooth functions the truncation error is O(h^2 f''') ~ 1e-4 and the fp32
// rounding of L contributes ~1e-6 / 2h ~ 5e-5, so |numeric - analytic| <= 2e-3 * max(1, |analytic|)
// is tight enough to catch any wrong term (a missing factor or transposition is off by O(1)).
// ReLU has a kink at 0: samples whose ReLU pattern changes within +-h are skipped (and counted).
#include <QtTest>
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

constexpr double kTol = 2e-3;

bool close(double numeric, double analytic) {
  return std::fabs(numeric - analytic) <= kTol * std::max(1.0, std::fabs(analytic));
}

struct Objective {
  std::vector<float> r;  // dL/dy
  double value(const std::vector<float>& y) const {
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  }
};

std::vector<bool> relu_pattern(const std::vector<float>& y) {
  std::vector<bool> p(y.size());
  for (size_t i = 0; i < y.size(); ++i) p[i] = y[i] > 0.0f;
  return p;
}

}  // namespace

class TestGradCheck : public QObject {
  Q_OBJECT

  // Checks dL/dW, dL/db and dL/dx of one Linear layer with activation `act`.
  void check_linear(Activation act, bool bias) {
    auto be = create_backend("cpu");
    std::mt19937_64 rng(7);
    const int64_t batch = 4, in = 6, out = 5;
    Linear layer(*be, in, out, act, bias, rng);
    layer.name = "lin";
    std::vector<float> xv = random_vector(static_cast<size_t>(batch * in), 11);
    Objective obj{random_vector(static_cast<size_t>(batch * out), 13)};

    auto forward = [&](const std::vector<float>& xh) {
      Tensor x = upload_f32(*be, xh, {batch, in});
      return download_f32(*be, layer.forward(*be, x, true));
    };

    // Analytic gradients.
    Tensor x = upload_f32(*be, xv, {batch, in});
    layer.forward(*be, x, true);
    Tensor dy = upload_f32(*be, obj.r, {batch, out});
    Tensor dx_t = layer.backward(*be, dy, true, false);
    const std::vector<float> dx = download_f32(*be, dx_t);
    const std::vector<float> dw = download_f32(*be, layer.weight().grad);
    std::vector<float> db;
    if (bias) db = download_f32(*be, layer.bias()->grad);
    const std::vector<bool> base_pattern = relu_pattern(forward(xv));

    const float h = act == Activation::ReLU ? 1e-3f : 1e-2f;
    int checked = 0, skipped = 0;
    // Perturbs element i of `host` (uploaded with `apply`), returns the central difference.
    auto central = [&](std::vector<float>& host, size_t i, const std::function<std::vector<float>()>& run,
                       bool& kink) {
      const float keep = host[i];
      host[i] = keep + h;
      const std::vector<float> yp = run();
      host[i] = keep - h;
      const std::vector<float> ym = run();
      host[i] = keep;
      kink = act == Activation::ReLU && (relu_pattern(yp) != base_pattern || relu_pattern(ym) != base_pattern);
      return (obj.value(yp) - obj.value(ym)) / (2.0 * static_cast<double>(h));
    };

    // Weights and bias: perturb the master (= value in fp32) through the host.
    auto check_param = [&](Parameter& p, const std::vector<float>& analytic, const char* what) {
      std::vector<float> host = download_f32(*be, p.master);
      auto run = [&]() {
        be->upload(p.master, host.data(), DType::F32);
        return forward(xv);
      };
      for (size_t i = 0; i < host.size(); ++i) {
        bool kink = false;
        const double num = central(host, i, run, kink);
        if (kink) {
          ++skipped;
          continue;
        }
        ++checked;
        if (!close(num, analytic[i]))
          QFAIL(qPrintable(QString("%1 %2[%3]: numeric %4, analytic %5")
                               .arg(activation_name(act))
                               .arg(what)
                               .arg(i)
                               .arg(num, 0, 'g', 8)
                               .arg(analytic[i], 0, 'g', 8)));
      }
      be->upload(p.master, host.data(), DType::F32);
    };
    check_param(layer.weight(), dw, "weight");
    if (bias) check_param(*layer.bias(), db, "bias");

    // Input.
    std::vector<float> xh = xv;
    auto run_x = [&]() { return forward(xh); };
    for (size_t i = 0; i < xh.size(); ++i) {
      bool kink = false;
      const double num = central(xh, i, run_x, kink);
      if (kink) {
        ++skipped;
        continue;
      }
      ++checked;
      if (!close(num, dx[i]))
        QFAIL(qPrintable(QString("%1 input[%2]: numeric %3, analytic %4")
                             .arg(activation_name(act))
                             .arg(i)
                             .arg(num, 0, 'g', 8)
                             .arg(dx[i], 0, 'g', 8)));
    }
    QVERIFY2(skipped * 10 < checked, "too many samples sat on ReLU's kink");
  }

 private slots:
  void linearNoActivation() { check_linear(Activation::None, true); }
  void linearNoBias() { check_linear(Activation::None, false); }
  void linearRelu() { check_linear(Activation::ReLU, true); }
  void linearGelu() { check_linear(Activation::GELU, true); }

  // The stand-alone activation layers (ReLU, GELU): dL/dx.
  void activationLayers() {
    for (Activation act : {Activation::ReLU, Activation::GELU}) {
      auto be = create_backend("cpu");
      ActivationLayer layer(act);
      const int64_t n = 3, d = 7;
      std::vector<float> xv = random_vector(static_cast<size_t>(n * d), 21, -2.0f, 2.0f);
      Objective obj{random_vector(xv.size(), 22)};
      Tensor x = upload_f32(*be, xv, {n, d});
      layer.forward(*be, x, true);
      Tensor dy = upload_f32(*be, obj.r, {n, d});
      const std::vector<float> dx = download_f32(*be, layer.backward(*be, dy, true, false));
      const float h = 1e-3f;
      for (size_t i = 0; i < xv.size(); ++i) {
        if (act == Activation::ReLU && std::fabs(xv[i]) < 2 * h) continue;
        std::vector<float> xp = xv, xm = xv;
        xp[i] += h;
        xm[i] -= h;
        ActivationLayer probe(act);
        const double lp = obj.value(download_f32(*be, probe.forward(*be, upload_f32(*be, xp, {n, d}), false)));
        const double lm = obj.value(download_f32(*be, probe.forward(*be, upload_f32(*be, xm, {n, d}), false)));
        const double num = (lp - lm) / (2.0 * h);
        QVERIFY2(close(num, dx[i]), qPrintable(QString("%1 x[%2]: numeric %3, analytic %4")
                                                   .arg(activation_name(act))
                                                   .arg(i)
                                                   .arg(num)
                                                   .arg(dx[i])));
      }
    }
  }

  // Fused softmax + cross-entropy: stats[0] = sum of per-row losses, dlogits = (softmax - onehot) * mult.
  void softmaxCrossEntropy() {
    auto be = create_backend("cpu");
    const int64_t b = 5, c = 7;
    std::vector<float> z = random_vector(static_cast<size_t>(b * c), 31, -3.0f, 3.0f);
    const std::vector<int32_t> labels{0, 3, 6, 2, 3};
    Tensor y = be->empty({b}, DType::I32, MemCategory::Activations);
    be->upload(y, labels.data(), DType::I32);
    Tensor stats = be->empty({2}, DType::F32, MemCategory::Workspace);
    Tensor dz = be->empty({b, c}, DType::F32, MemCategory::Activations);
    StepScalars sc;
    sc.loss_scale = 1.0f;
    be->set_step_scalars(sc);
    be->softmax_xent(upload_f32(*be, z, {b, c}), y, &dz, 1.0f, stats, false);
    const std::vector<float> g = download_f32(*be, dz);

    auto loss = [&](const std::vector<float>& zz) {
      Tensor st = be->empty({2}, DType::F32, MemCategory::Workspace);
      be->softmax_xent(upload_f32(*be, zz, {b, c}), y, nullptr, 1.0f, st, false);
      return static_cast<double>(download_f32(*be, st)[0]);
    };
    // The loss itself against a double-precision log-sum-exp.
    double ref = 0;
    for (int64_t i = 0; i < b; ++i) {
      double mx = -1e300, s = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, static_cast<double>(z[i * c + j]));
      for (int64_t j = 0; j < c; ++j) s += std::exp(z[i * c + j] - mx);
      ref += std::log(s) + mx - z[i * c + labels[i]];
    }
    QVERIFY(std::fabs(loss(z) - ref) < 1e-5 * std::max(1.0, ref));

    const float h = 1e-2f;
    for (size_t i = 0; i < z.size(); ++i) {
      std::vector<float> zp = z, zm = z;
      zp[i] += h;
      zm[i] -= h;
      const double num = (loss(zp) - loss(zm)) / (2.0 * h);
      QVERIFY2(close(num, g[i]), qPrintable(QString("dlogits[%1]: numeric %2, analytic %3").arg(i).arg(num).arg(g[i])));
    }
    // Each row of the gradient sums to zero; the multiplier and the loss scale multiply it.
    for (int64_t i = 0; i < b; ++i) {
      double s = 0;
      for (int64_t j = 0; j < c; ++j) s += g[i * c + j];
      QVERIFY(std::fabs(s) < 1e-6);
    }
    sc.loss_scale = 8.0f;
    be->set_step_scalars(sc);
    be->softmax_xent(upload_f32(*be, z, {b, c}), y, &dz, 0.25f, stats, false);
    const std::vector<float> g2 = download_f32(*be, dz);
    for (size_t i = 0; i < g.size(); ++i) QCOMPARE(g2[i], g[i] * 2.0f);
  }

  // The whole MLP (GELU, smooth) through Sequential: d(mean cross-entropy)/d(every parameter).
  void mlpEndToEnd() {
    auto be = create_backend("cpu");
    Mlp model(*be, {5, 8, 6, 3}, Activation::GELU, 3);
    const int64_t b = 4;
    std::vector<float> xv = random_vector(static_cast<size_t>(b * 5), 41);
    const std::vector<int32_t> labels{2, 0, 1, 2};
    Tensor y = be->empty({b}, DType::I32, MemCategory::Activations);
    be->upload(y, labels.data(), DType::I32);
    Tensor stats = be->empty({2}, DType::F32, MemCategory::Workspace);
    Tensor dz = be->empty({b, 3}, DType::F32, MemCategory::Activations);
    be->set_step_scalars(StepScalars{});
    Tensor x = upload_f32(*be, xv, {b, 5});
    be->softmax_xent(model.forward(*be, x, true), y, &dz, 1.0f / b, stats, false);
    model.backward(*be, dz, false);

    auto loss = [&]() {
      Tensor st = be->empty({2}, DType::F32, MemCategory::Workspace);
      be->softmax_xent(model.forward(*be, x, false), y, nullptr, 1.0f, st, false);
      return static_cast<double>(download_f32(*be, st)[0]) / b;
    };
    QCOMPARE(model.parameters().size(), size_t(6));
    const float h = 1e-2f;
    for (Parameter* p : model.parameters()) {
      const std::vector<float> g = download_f32(*be, p->grad);
      std::vector<float> host = download_f32(*be, p->master);
      for (size_t i = 0; i < host.size(); ++i) {
        const float keep = host[i];
        host[i] = keep + h;
        be->upload(p->master, host.data(), DType::F32);
        const double lp = loss();
        host[i] = keep - h;
        be->upload(p->master, host.data(), DType::F32);
        const double lm = loss();
        host[i] = keep;
        be->upload(p->master, host.data(), DType::F32);
        const double num = (lp - lm) / (2.0 * h);
        QVERIFY2(close(num, g[i]),
                 qPrintable(QString("%1[%2]: numeric %3, analytic %4").arg(q(p->name)).arg(i).arg(num).arg(g[i])));
      }
    }
  }

  // Accumulating backward adds to the gradients already there.
  void backwardAccumulates() {
    auto be = create_backend("cpu");
    std::mt19937_64 rng(5);
    Linear layer(*be, 4, 3, Activation::None, true, rng);
    Tensor x = upload_f32(*be, random_vector(8, 51), {2, 4});
    const std::vector<float> r = random_vector(6, 52);
    layer.forward(*be, x, true);
    Tensor dy = upload_f32(*be, r, {2, 3});
    layer.backward(*be, dy, false, false);
    const std::vector<float> once = download_f32(*be, layer.weight().grad);
    const std::vector<float> bonce = download_f32(*be, layer.bias()->grad);
    Tensor dy2 = upload_f32(*be, r, {2, 3});
    layer.backward(*be, dy2, false, true);
    const std::vector<float> twice = download_f32(*be, layer.weight().grad);
    const std::vector<float> btwice = download_f32(*be, layer.bias()->grad);
    for (size_t i = 0; i < once.size(); ++i) QCOMPARE(twice[i], 2.0f * once[i]);
    for (size_t i = 0; i < bonce.size(); ++i) QCOMPARE(btwice[i], 2.0f * bonce[i]);
  }
};

QTEST_APPLESS_MAIN(TestGradCheck)
#include "test_grad_check.moc"
