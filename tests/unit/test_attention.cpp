// Causal attention on the CPU backend: forward against a double-precision reference (including
// the saved log-sum-exp), backward against central finite differences of sum(y * R).
#include <QtTest>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu_backend.h"

using namespace trainlab;

namespace {
std::vector<float> randn(std::mt19937& g, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

class TestAttention : public QObject {
  Q_OBJECT
 private slots:
  void forwardMatchesDouble() {
    CpuBackend be(1);
    std::mt19937 g(4);
    const int64_t B = 2, T = 7, H = 3, D = 12, hd = D / H;
    auto qv = randn(g, B * T * 3 * D, 1.0f);
    Tensor qkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
    be.upload(qkv, qv.data(), DType::F32);
    Tensor y = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
    Tensor lse = be.empty({B * H * T}, DType::F32, MemCategory::Activations);
    be.attention_forward(qkv, B, T, H, y, lse, MatmulMode::Native);
    std::vector<float> yv(B * T * D), lv(B * H * T);
    be.download(y, yv.data(), DType::F32);
    be.download(lse, lv.data(), DType::F32);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> s(i + 1);
          double mx = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < hd; ++c)
              dot += double(qv[(b * T + i) * 3 * D + h * hd + c]) * qv[(b * T + j) * 3 * D + D + h * hd + c];
            s[j] = dot / std::sqrt(double(hd));
            mx = std::max(mx, s[j]);
          }
          double sum = 0;
          for (auto& v : s) sum += std::exp(v - mx);
          QVERIFY(std::fabs(lv[(b * H + h) * T + i] - (mx + std::log(sum))) < 1e-5);
          for (int64_t c = 0; c < hd; ++c) {
            double o = 0;
            for (int64_t j = 0; j <= i; ++j) o += std::exp(s[j] - mx) / sum * qv[(b * T + j) * 3 * D + 2 * D + h * hd + c];
            QVERIFY2(std::fabs(yv[(b * T + i) * D + h * hd + c] - o) < 1e-5, "attention forward");
          }
        }
  }

  void backwardMatchesFiniteDifferences() {
    CpuBackend be(1);
    std::mt19937 g(5);
    const int64_t B = 2, T = 5, H = 2, D = 8;
    auto qv = randn(g, B * T * 3 * D, 1.0f), R = randn(g, B * T * D, 1.0f);
    Tensor qkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
    Tensor y = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
    Tensor lse = be.empty({B * H * T}, DType::F32, MemCategory::Activations);
    auto objective = [&](const std::vector<float>& q) {
      be.upload(qkv, q.data(), DType::F32);
      be.attention_forward(qkv, B, T, H, y, lse, MatmulMode::Native);
      std::vector<float> yv(B * T * D);
      be.download(y, yv.data(), DType::F32);
      double s = 0;
      for (size_t i = 0; i < yv.size(); ++i) s += double(yv[i]) * R[i];
      return s;
    };
    objective(qv);
    Tensor dy = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
    be.upload(dy, R.data(), DType::F32);
    Tensor dqkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
    be.attention_backward(qkv, y, lse, dy, B, T, H, dqkv, MatmulMode::Native);
    std::vector<float> an(qv.size());
    be.download(dqkv, an.data(), DType::F32);
    const float h = 1e-2f;
    double err = 0, ref = 0, worst = 0;
    for (size_t i = 0; i < qv.size(); ++i) {
      auto p = qv, m = qv;
      p[i] += h, m[i] -= h;
      const double fd = (objective(p) - objective(m)) / (2 * h);
      err += std::pow(an[i] - fd, 2), ref += fd * fd;
      worst = std::max(worst, std::fabs(an[i] - fd));
    }
    QVERIFY2(std::sqrt(err / ref) < 5e-3, qPrintable(QString("rel err %1 worst %2").arg(std::sqrt(err / ref)).arg(worst)));
  }

  void threadCountDoesNotChangeResults() {  // (batch, head) pairs split over threads: same bits
    std::mt19937 g(7);
    const int64_t B = 3, T = 9, H = 2, D = 8;
    auto qv = randn(g, B * T * 3 * D, 1.0f), R = randn(g, B * T * D, 1.0f);
    std::vector<float> out[2];
    for (int threads : {1, 2}) {
      CpuBackend be(threads);
      Tensor qkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
      be.upload(qkv, qv.data(), DType::F32);
      Tensor y = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
      Tensor lse = be.empty({B * H * T}, DType::F32, MemCategory::Activations);
      be.attention_forward(qkv, B, T, H, y, lse, MatmulMode::Native);
      Tensor dy = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
      be.upload(dy, R.data(), DType::F32);
      Tensor dqkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
      be.attention_backward(qkv, y, lse, dy, B, T, H, dqkv, MatmulMode::Native);
      std::vector<float>& o = out[threads - 1];
      o.resize(static_cast<size_t>(B * T * (D + 3 * D)));
      be.download(y, o.data(), DType::F32);
      be.download(dqkv, o.data() + B * T * D, DType::F32);
    }
    QCOMPARE(out[0], out[1]);
  }

  // MatmulMode::Tf32 is an argument of the call: the products see q, k, v (and dy) rounded to tf32,
  // bit for bit what Native computes on inputs rounded beforehand; a Native call right after is
  // unaffected (no state is left behind in the backend).
  void tf32ModeRoundsTheProductInputs() {
    CpuBackend be(1);
    std::mt19937 g(9);
    const int64_t B = 2, T = 5, H = 2, D = 8;
    auto qv = randn(g, B * T * 3 * D, 1.0f), R = randn(g, B * T * D, 1.0f);
    auto rounded = [](std::vector<float> v) {
      for (auto& x : v) {  // tf32: keep 10 mantissa bits, ties to even (finite inputs)
        uint32_t u;
        std::memcpy(&u, &x, 4);
        u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
        std::memcpy(&x, &u, 4);
      }
      return v;
    };
    auto run = [&](const std::vector<float>& q, const std::vector<float>& r, MatmulMode mode) {
      Tensor qkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
      be.upload(qkv, q.data(), DType::F32);
      Tensor y = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
      Tensor lse = be.empty({B * H * T}, DType::F32, MemCategory::Activations);
      be.attention_forward(qkv, B, T, H, y, lse, mode);
      Tensor dy = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
      be.upload(dy, r.data(), DType::F32);
      Tensor dqkv = be.empty({B * T, 3 * D}, DType::F32, MemCategory::Activations);
      be.attention_backward(qkv, y, lse, dy, B, T, H, dqkv, mode);
      std::vector<float> o(static_cast<size_t>(B * T * D + B * T * 3 * D));
      be.download(y, o.data(), DType::F32);
      be.download(dqkv, o.data() + B * T * D, DType::F32);
      return o;
    };
    const auto native = run(qv, R, MatmulMode::Native);
    const auto tf32 = run(qv, R, MatmulMode::Tf32);
    const auto y_of_rounded = run(rounded(qv), R, MatmulMode::Native);
    // The forward output of Tf32 is Native's on rounded inputs (backward also rounds dy for its
    // products but not for rowdot(dy, y), so only the forward half is compared bit for bit).
    for (int64_t i = 0; i < B * T * D; ++i) QCOMPARE(tf32[i], y_of_rounded[i]);
    QVERIFY(tf32 != native);
    QCOMPARE(run(qv, R, MatmulMode::Native), native);
    // Fp8 has no attention path: it computes as Native.
    QCOMPARE(run(qv, R, MatmulMode::Fp8), native);
  }

  void causal() {  // the output at position i does not depend on later positions
    CpuBackend be(1);
    std::mt19937 g(6);
    const int64_t B = 1, T = 6, H = 2, D = 8;
    auto qv = randn(g, T * 3 * D, 1.0f);
    Tensor qkv = be.empty({T, 3 * D}, DType::F32, MemCategory::Activations);
    Tensor y = be.empty({T, D}, DType::F32, MemCategory::Activations);
    Tensor lse = be.empty({H * T}, DType::F32, MemCategory::Activations);
    be.upload(qkv, qv.data(), DType::F32);
    be.attention_forward(qkv, B, T, H, y, lse, MatmulMode::Native);
    std::vector<float> a(T * D), b(T * D);
    be.download(y, a.data(), DType::F32);
    for (int64_t c = 0; c < 3 * D; ++c) qv[(T - 1) * 3 * D + c] += 5.0f;  // change the last position
    be.upload(qkv, qv.data(), DType::F32);
    be.attention_forward(qkv, B, T, H, y, lse, MatmulMode::Native);
    be.download(y, b.data(), DType::F32);
    for (int64_t i = 0; i < (T - 1) * D; ++i) QCOMPARE(a[i], b[i]);
  }
};

QTEST_APPLESS_MAIN(TestAttention)
#include "test_attention.moc"
