// LayerNorm on the CPU backend: forward against a double-precision reference, backward against
// central finite differences of sum(y * R) (fp32 evaluation, h = 1e-2), the fused residual add.
#include <QtTest>
#include <cmath>
#include <random>

#include "backend/cpu_backend.h"

using namespace trainlab;

namespace {
Tensor make(CpuBackend& be, const Shape& s, const std::vector<float>& v) {
  Tensor t = be.empty(s, DType::F32, MemCategory::Activations);
  be.upload(t, v.data(), DType::F32);
  return t;
}
std::vector<float> randn(std::mt19937& g, size_t n, float scale, float shift = 0.0f) {
  std::normal_distribution<float> d(shift, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
std::vector<float> host(CpuBackend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}
}  // namespace

class TestLayerNorm : public QObject {
  Q_OBJECT
 private slots:
  void forwardMatchesDouble() {
    CpuBackend be(1);
    std::mt19937 g(1);
    const int64_t N = 5, D = 24;
    auto xv = randn(g, N * D, 2.0f, 0.7f), gv = randn(g, D, 1.0f), bv = randn(g, D, 1.0f);
    Tensor x = make(be, {N, D}, xv), ga = make(be, {D}, gv), bb = make(be, {D}, bv);
    Tensor y = be.empty({N, D}, DType::F32, MemCategory::Activations);
    Tensor m = be.empty({N}, DType::F32, MemCategory::Activations), r = be.empty({N}, DType::F32, MemCategory::Activations);
    be.layernorm_forward(x, ga, bb, 1e-5f, y, m, r);
    auto yv = host(be, y);
    for (int64_t i = 0; i < N; ++i) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < D; ++j) mean += xv[i * D + j];
      mean /= D;
      for (int64_t j = 0; j < D; ++j) var += (xv[i * D + j] - mean) * (xv[i * D + j] - mean);
      var /= D;
      for (int64_t j = 0; j < D; ++j) {
        const double ref = (xv[i * D + j] - mean) / std::sqrt(var + 1e-5) * gv[j] + bv[j];
        QVERIFY2(std::fabs(yv[i * D + j] - ref) < 1e-5 * (1 + std::fabs(ref)), "layernorm forward");
      }
    }
  }

  void backwardMatchesFiniteDifferences() {
    CpuBackend be(1);
    std::mt19937 g(2);
    const int64_t N = 4, D = 16;
    auto xv = randn(g, N * D, 1.5f, 0.3f), gv = randn(g, D, 1.0f, 1.0f), bv = randn(g, D, 0.5f), R = randn(g, N * D, 1.0f);
    auto objective = [&](const std::vector<float>& x, const std::vector<float>& gam, const std::vector<float>& bet) {
      Tensor tx = make(be, {N, D}, x), tg = make(be, {D}, gam), tb = make(be, {D}, bet);
      Tensor y = be.empty({N, D}, DType::F32, MemCategory::Activations);
      Tensor m = be.empty({N}, DType::F32, MemCategory::Activations), r = be.empty({N}, DType::F32, MemCategory::Activations);
      be.layernorm_forward(tx, tg, tb, 1e-5f, y, m, r);
      auto yv = host(be, y);
      double s = 0;
      for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(yv[i]) * R[i];
      return s;
    };
    Tensor x = make(be, {N, D}, xv), ga = make(be, {D}, gv), bb = make(be, {D}, bv), dy = make(be, {N, D}, R);
    Tensor y = be.empty({N, D}, DType::F32, MemCategory::Activations);
    Tensor m = be.empty({N}, DType::F32, MemCategory::Activations), r = be.empty({N}, DType::F32, MemCategory::Activations);
    be.layernorm_forward(x, ga, bb, 1e-5f, y, m, r);
    std::vector<float> base(N * D, 0.25f);  // fused residual add: dx += ...
    Tensor dx = make(be, {N, D}, base);
    Tensor dg = be.empty({D}, DType::F32, MemCategory::Gradients), db = be.empty({D}, DType::F32, MemCategory::Gradients);
    be.layernorm_backward(x, ga, m, r, dy, dx, dg, db, true, false);
    auto dxv = host(be, dx), dgv = host(be, dg), dbv = host(be, db);
    const float h = 1e-2f;
    double err = 0, ref = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      auto p = xv, q = xv;
      p[i] += h, q[i] -= h;
      const double fd = (objective(p, gv, bv) - objective(q, gv, bv)) / (2 * h);
      err += std::pow(dxv[i] - 0.25 - fd, 2), ref += fd * fd;
    }
    QVERIFY2(std::sqrt(err / ref) < 5e-3, qPrintable(QString("dx rel err %1").arg(std::sqrt(err / ref))));
    for (int64_t j = 0; j < D; ++j) {
      auto p = gv, q = gv;
      p[j] += h, q[j] -= h;
      const double fdg = (objective(xv, p, bv) - objective(xv, q, bv)) / (2 * h);
      QVERIFY2(std::fabs(dgv[j] - fdg) < 2e-3 * (1 + std::fabs(fdg)), "dgamma");
      auto pb = bv, qb = bv;
      pb[j] += h, qb[j] -= h;
      const double fdb = (objective(xv, gv, pb) - objective(xv, gv, qb)) / (2 * h);
      QVERIFY2(std::fabs(dbv[j] - fdb) < 2e-3 * (1 + std::fabs(fdb)), "dbeta");
    }
    // accumulate_params adds to what is there.
    be.layernorm_backward(x, ga, m, r, dy, dx, dg, db, false, true);
    auto dg2 = host(be, dg);
    for (int64_t j = 0; j < D; ++j) QCOMPARE(dg2[j], dgv[j] + dgv[j]);
    // dx_sums: the column sums of dx as written (rows in order), and accumulated with the parameters.
    Tensor sums = be.empty({D}, DType::F32, MemCategory::Gradients);
    be.layernorm_backward(x, ga, m, r, dy, dx, dg, db, false, false, &sums);
    auto dx3 = host(be, dx), s1 = host(be, sums);
    for (int64_t j = 0; j < D; ++j) {
      float ref = 0.0f;
      for (int64_t i = 0; i < N; ++i) ref += dx3[i * D + j];
      QCOMPARE(s1[j], ref);
    }
    be.layernorm_backward(x, ga, m, r, dy, dx, dg, db, false, true, &sums);
    auto s2 = host(be, sums);
    for (int64_t j = 0; j < D; ++j) QCOMPARE(s2[j], s1[j] + s1[j]);
  }

  void bf16Inputs() {
    CpuBackend be(1);
    std::mt19937 g(3);
    const int64_t N = 3, D = 32;
    auto xv = randn(g, N * D, 1.0f);
    Tensor x = be.empty({N, D}, DType::BF16, MemCategory::Activations);
    be.upload(x, xv.data(), DType::F32);
    std::vector<float> ones(D, 1.0f), zeros(D, 0.0f);
    Tensor ga = be.empty({D}, DType::BF16, MemCategory::Weights), bb = be.empty({D}, DType::BF16, MemCategory::Weights);
    be.upload(ga, ones.data(), DType::F32);
    be.upload(bb, zeros.data(), DType::F32);
    Tensor y = be.empty({N, D}, DType::BF16, MemCategory::Activations);
    Tensor m = be.empty({N}, DType::F32, MemCategory::Activations), r = be.empty({N}, DType::F32, MemCategory::Activations);
    be.layernorm_forward(x, ga, bb, 1e-5f, y, m, r);
    auto yv = host(be, y);
    for (int64_t i = 0; i < N; ++i) {
      double s = 0, s2 = 0;
      for (int64_t j = 0; j < D; ++j) s += yv[i * D + j], s2 += yv[i * D + j] * yv[i * D + j];
      QVERIFY(std::fabs(s / D) < 2e-2);
      QVERIFY(std::fabs(s2 / D - 1.0) < 3e-2);
    }
  }
};

QTEST_APPLESS_MAIN(TestLayerNorm)
#include "test_layernorm.moc"
