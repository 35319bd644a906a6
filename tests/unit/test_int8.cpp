// Integer arithmetic (DOMAIN.md section 5): the int8 x int8 matrix product accumulates exactly in
// int32 (compared with an int64 reference, extreme values included), the W8A8 linear layer
// rescales once, and activation quantization follows q = clamp(rne(x / s), -127, 127).
#include <QtTest>
#include <cmath>
#include <random>

#include "backend/cpu_backend.h"
#include "compress/compression.h"
#include "compress/quant.h"
#include "nn/linear.h"

using namespace trainlab;

class TestInt8 : public QObject {
  Q_OBJECT
 private slots:
  void gemmIsExact() {
    CpuBackend be(1);
    std::mt19937 rng(1);
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 29, 300}, {1, 1, 1}, {64, 130, 1023}}) {
      std::vector<int8_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k));
      for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
      for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
      a[0] = -128;  // the extreme product 128 * 128
      b[0] = -128;
      Tensor ta = be.empty({m, k}, DType::I8, MemCategory::Workspace);
      Tensor tb = be.empty({n, k}, DType::I8, MemCategory::Workspace);
      Tensor tc = be.empty({m, n}, DType::I32, MemCategory::Workspace);
      be.upload(ta, a.data(), DType::I8);
      be.upload(tb, b.data(), DType::I8);
      be.gemm_i8(ta, tb, tc);
      const int32_t* c = tc.data<int32_t>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int64_t ref = 0;
          for (int64_t t = 0; t < k; ++t) ref += int64_t(a[static_cast<size_t>(i * k + t)]) * b[static_cast<size_t>(j * k + t)];
          QCOMPARE(int64_t(c[i * n + j]), ref);
        }
    }
    // All -128: the largest magnitude a row of K=1023 can reach, 16,760,832, still exact.
    std::vector<int8_t> a(1023, -128);
    Tensor ta = be.empty({1, 1023}, DType::I8, MemCategory::Workspace);
    Tensor tc = be.empty({1, 1}, DType::I32, MemCategory::Workspace);
    be.upload(ta, a.data(), DType::I8);
    be.gemm_i8(ta, ta, tc);
    QCOMPARE(tc.data<int32_t>()[0], int32_t(1023 * 16384));
  }

  void quantizeActivations() {
    CpuBackend be(1);
    std::vector<float> x = {0.0f, 1.0f, -1.0f, 0.5f, 0.25f, 100.0f, -100.0f, 0.015f};
    Tensor tx = be.empty({8}, DType::F32, MemCategory::Workspace);
    Tensor tq = be.empty({8}, DType::I8, MemCategory::Workspace);
    be.upload(tx, x.data(), DType::F32);
    be.quantize_i8(tx, 1.0f / 127.0f, tq);
    const int8_t* q = tq.data<int8_t>();
    QCOMPARE(int(q[0]), 0);
    QCOMPARE(int(q[1]), 127);
    QCOMPARE(int(q[2]), -127);
    QCOMPARE(int(q[3]), 64);  // 63.5 ties to even
    QCOMPARE(int(q[5]), 127);  // clamped
    QCOMPARE(int(q[6]), -127);
    QCOMPARE(int(q[7]), 2);
  }

  void int8LinearRescalesOnce() {
    CpuBackend be(1);
    const int64_t m = 7, k = 40, n = 9;
    std::mt19937 rng(2);
    std::vector<int8_t> xq(static_cast<size_t>(m * k)), wq(static_cast<size_t>(n * k));
    for (auto& v : xq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    for (auto& v : wq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    std::vector<float> ws(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) ws[static_cast<size_t>(j)] = 0.001f * static_cast<float>(j + 1), bias[static_cast<size_t>(j)] = 0.1f * static_cast<float>(j) - 0.3f;
    const float xs = 0.02f;
    Tensor txq = be.empty({m, k}, DType::I8, MemCategory::Workspace), twq = be.empty({n, k}, DType::I8, MemCategory::Workspace);
    Tensor tws = be.empty({n}, DType::F32, MemCategory::Workspace), tb = be.empty({n}, DType::F32, MemCategory::Workspace);
    Tensor ty = be.empty({m, n}, DType::F32, MemCategory::Workspace);
    be.upload(txq, xq.data(), DType::I8);
    be.upload(twq, wq.data(), DType::I8);
    be.upload(tws, ws.data(), DType::F32);
    be.upload(tb, bias.data(), DType::F32);
    be.int8_linear(txq, xs, twq, tws, &tb, Activation::ReLU, ty);
    const float* y = ty.data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int32_t acc = 0;
        for (int64_t t = 0; t < k; ++t) acc += int32_t(xq[static_cast<size_t>(i * k + t)]) * wq[static_cast<size_t>(j * k + t)];
        const float expect = std::fmax(0.0f, static_cast<float>(acc) * (xs * ws[static_cast<size_t>(j)]) + bias[static_cast<size_t>(j)]);
        QCOMPARE(y[i * n + j], expect);
      }
  }

  // W8A8 of a small MLP agrees with the fp32 model on nearly every prediction.
  void w8a8MatchesFp32() {
    CpuBackend be(1);
    Mlp mlp(be, {16, 32, 5}, Activation::ReLU, 3);
    ClassificationData d;
    d.features = 16;
    d.classes = 5;
    std::mt19937_64 rng(6);
    for (int i = 0; i < 200; ++i) {
      for (int f = 0; f < 16; ++f) d.x.push_back(uniform_pm(rng, 1.0f));
      d.y.push_back(0);
    }
    W8A8Mlp w8(be, mlp, d, 50, 4);
    QCOMPARE(w8.activation_scales().size(), size_t(2));
    Tensor x = be.empty({200, 16}, DType::F32, MemCategory::Workspace);
    be.upload(x, d.x.data(), DType::F32);
    std::vector<float> z8(1000), z32(1000);
    be.download(w8.forward(be, x), z8.data(), DType::F32);
    be.download(mlp.forward(be, x, false), z32.data(), DType::F32);
    double max_err = 0.0, max_abs = 0.0;
    for (size_t i = 0; i < z8.size(); ++i) max_err = std::fmax(max_err, std::fabs(z8[i] - z32[i])), max_abs = std::fmax(max_abs, std::fabs(z32[i]));
    QVERIFY2(max_err < 0.03 * max_abs, qPrintable(QString("W8A8 error %1 of %2").arg(max_err).arg(max_abs)));
    QCOMPARE(w8.weight_bytes(), int64_t(16 * 32 + 32 * 2 + 32 * 4 + 32 * 5 + 5 * 2 + 5 * 4));
  }
};

QTEST_APPLESS_MAIN(TestInt8)
#include "test_int8.moc"
