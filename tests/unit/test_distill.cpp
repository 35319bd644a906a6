// Distillation (DOMAIN.md section 5): the gradient of L = alpha T^2 KL(p_t^T || p_s^T) +
// (1 - alpha) CE (softmax_xent's CE gradient turned into it by distill_backward) against central
// differences of the loss computed in double, and a short student run through the trainer.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <random>

#include "backend/cpu_backend.h"
#include "compress/compression.h"
#include "nn/linear.h"
#include "train/trainer.h"

using namespace trainlab;

namespace {
// Mean over rows of the distillation loss, in double.
double loss(const std::vector<double>& zs, const std::vector<double>& zt, const std::vector<int32_t>& y, int64_t b,
            int64_t c, double T, double alpha) {
  double total = 0.0;
  for (int64_t i = 0; i < b; ++i) {
    const double* s = zs.data() + i * c;
    const double* t = zt.data() + i * c;
    auto lse = [&](const double* z, double scale) {
      double m = z[0] * scale;
      for (int64_t j = 1; j < c; ++j) m = std::max(m, z[j] * scale);
      double acc = 0.0;
      for (int64_t j = 0; j < c; ++j) acc += std::exp(z[j] * scale - m);
      return std::log(acc) + m;
    };
    const double ls_t = lse(s, 1.0 / T), lt_t = lse(t, 1.0 / T), ls1 = lse(s, 1.0);
    double kl = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const double log_pt = t[j] / T - lt_t, log_ps = s[j] / T - ls_t;
      kl += std::exp(log_pt) * (log_pt - log_ps);
    }
    const double ce = ls1 - s[y[static_cast<size_t>(i)]];
    total += alpha * T * T * kl + (1.0 - alpha) * ce;
  }
  return total / static_cast<double>(b);
}
}  // namespace

class TestDistill : public QObject {
  Q_OBJECT
 private slots:
  void gradientMatchesFiniteDifferences() {
    CpuBackend be(1);
    const int64_t b = 4, c = 6;
    std::mt19937_64 rng(12);
    std::vector<float> zs(static_cast<size_t>(b * c)), zt(zs.size());
    for (auto& v : zs) v = uniform_pm(rng, 3.0f);
    for (auto& v : zt) v = uniform_pm(rng, 3.0f);
    const std::vector<int32_t> y = {1, 5, 0, 3};
    for (auto [T, alpha] : {std::pair<float, float>{4.0f, 0.5f}, {1.0f, 0.9f}, {2.5f, 0.0f}, {0.5f, 1.0f}}) {
      Tensor ts = be.empty({b, c}, DType::F32, MemCategory::Workspace), tt = be.empty({b, c}, DType::F32, MemCategory::Workspace);
      Tensor ty = be.empty({b}, DType::I32, MemCategory::Workspace), dz = be.empty({b, c}, DType::F32, MemCategory::Workspace);
      Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace), kl = be.empty({1}, DType::F32, MemCategory::Workspace);
      be.upload(ts, zs.data(), DType::F32);
      be.upload(tt, zt.data(), DType::F32);
      be.upload(ty, y.data(), DType::I32);
      be.softmax_xent(ts, ty, &dz, 1.0f / b, stats, false);
      be.distill_backward(ts, tt, T, alpha, 1.0f / b, dz, &kl, false);
      std::vector<float> g(zs.size());
      be.download(dz, g.data(), DType::F32);
      std::vector<double> ds(zs.begin(), zs.end()), dt(zt.begin(), zt.end());
      for (size_t k = 0; k < ds.size(); ++k) {
        const double h = 1e-5, keep = ds[k];
        ds[k] = keep + h;
        const double lp = loss(ds, dt, y, b, c, T, alpha);
        ds[k] = keep - h;
        const double lm = loss(ds, dt, y, b, c, T, alpha);
        ds[k] = keep;
        const double fd = (lp - lm) / (2 * h);
        QVERIFY2(std::fabs(fd - g[k]) < 1e-5 + 1e-4 * std::fabs(fd),
                 qPrintable(QString("T=%1 alpha=%2 k=%3: %4 vs %5").arg(T).arg(alpha).arg(k).arg(fd).arg(g[k])));
      }
      // kl_sum is the sum over rows of T^2 KL: the alpha = 1 loss times b.
      const double kl_ref = loss(ds, dt, y, b, c, T, 1.0) * b;
      QVERIFY(std::fabs(kl.data<float>()[0] - kl_ref) < 1e-4 * (1.0 + kl_ref));
    }
  }

  // A student distilled from a teacher file through the trainer's distill.* keys.
  void studentRun() {
    const std::string dir = (std::filesystem::temp_directory_path() / "trainlab_test_distill").string();
    std::filesystem::remove_all(dir);
    Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "150");
    c.set("model.name", "mlp");
    c.set("model.hidden", "[48]");
    c.set("run.out", dir + "/teacher");
    Trainer teacher(c);
    const RunSummary ts = teacher.run();
    QVERIFY(ts.test_accuracy > 0.85);
    c.set("model.hidden", "[16]");
    c.set("train.steps", "300");
    c.set("optim.lr", "3e-3");
    c.set("run.out", dir + "/student");
    c.set("distill.teacher", dir + "/teacher/model.safetensors");
    c.set("distill.temperature", "3");
    Trainer student(c);
    const RunSummary ss = student.run();
    QCOMPARE(ss.status, std::string("completed"));
    QCOMPARE(ss.params, int64_t(64 * 16 + 16 + 16 * 10 + 10));  // the student's parameters only
    QVERIFY2(ss.test_accuracy > 0.7, qPrintable(QString::number(ss.test_accuracy)));
    CpuBackend be(1);
    auto m = load_model_file(be, dir + "/student/model.safetensors");
    QCOMPARE(m->parameter_count(), ss.params);
    std::filesystem::remove_all(dir);
  }
};

QTEST_APPLESS_MAIN(TestDistill)
#include "test_distill.moc"
