// The CPU backend's blocked product (backend/cpu_panels.h) and the fused fp8 cast of its operands
// (tensor/fp8_cast.h's convert_round_scaled). A product's bits are fixed by its sgemm calls (64 x 64
// blocks of C, panels of 64 of the inner dimension), not by how its operands are converted or how
// many threads run the calls: rows computed with other rows (other conversion blocks) or on one
// thread give the same bits. The fused cast gives round_scaled_n's bits and the maximum |x| that
// fp8_tiled_amax takes when no value is infinite.
#include <QtTest>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/cpu_fp8.h"
#include "backend/cpu_panels.h"
#include "tensor/dtype.h"
#include "tensor/fp8_cast.h"
#include "util/error.h"

using namespace trainlab;

namespace {

// Random values of roughly unit size, uploaded in format t.
Tensor random_matrix(CpuBackend& be, int64_t rows, int64_t cols, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& e : v) e = d(rng);
  Tensor out = be.empty({rows, cols}, t, MemCategory::Workspace);
  be.upload(out, v.data(), DType::F32);
  return out;
}

// Rows [r0, r0 + n) of t as a tensor of their own.
Tensor rows_of(CpuBackend& be, const Tensor& t, int64_t r0, int64_t n) {
  Tensor out = be.empty({n, t.dim(1)}, t.dtype(), MemCategory::Workspace);
  std::memcpy(out.raw(), cpu::elem_ptr(t, r0 * t.dim(1)), dtype_bytes(t.dtype(), static_cast<size_t>(n * t.dim(1))));
  return out;
}

std::vector<uint16_t> codes(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.raw());
  return std::vector<uint16_t>(p, p + t.numel());
}

struct Workspace {
  std::vector<std::vector<float>> buffers = std::vector<std::vector<float>>(4);
  cpu::Scratch scratch() {
    return [this](int s, size_t n) {
      if (buffers[size_t(s)].size() < n) buffers[size_t(s)].resize(n);
      return buffers[size_t(s)].data();
    };
  }
};

}  // namespace

class TestCpuPanels : public QObject {
  Q_OBJECT
 private slots:
  // C = A B^T (the forward) and C = A B (dx) in bf16 or with fp8 casts, at sizes that take several
  // conversion blocks: rows 64-191 and the rows after the last multiple of 64, computed alone
  // (other conversion blocks, the same calls), and the whole product on one thread, give the
  // same codes.
  void rowsDoNotDependOnTheirBlock_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("tb");
    QTest::addColumn<bool>("fp8");
    QTest::newRow("forward, B whole") << 700 << 384 << 128 << true << false;
    QTest::newRow("forward, column blocks") << 300 << 2000 << 96 << true << false;
    QTest::newRow("dx, long inner dimension") << 500 << 128 << 1100 << false << false;
    QTest::newRow("forward, fp8 casts") << 700 << 384 << 200 << true << true;
    QTest::newRow("dx, fp8, column blocks") << 260 << 1500 << 640 << false << true;
  }
  void rowsDoNotDependOnTheirBlock() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, tb);
    QFETCH(bool, fp8);
    CpuBackend be(2);
    const Tensor a = random_matrix(be, m, k, DType::BF16, 1);
    const Tensor b = tb ? random_matrix(be, n, k, DType::BF16, 2) : random_matrix(be, k, n, DType::BF16, 2);
    const cpu::Fp8Cast ca{DType::F8E4M3, 3.0f}, cb{DType::F8E5M2, 0.5f};
    Workspace ws;
    Tensor c = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
    cpu::panel_gemm(a, false, b, tb, c, 0.75f, 0.0f, false, ws.scratch(), nullptr, fp8 ? &ca : nullptr, fp8 ? &cb : nullptr, 2);
    const std::vector<uint16_t> all = codes(c);
    Tensor c1 = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
    cpu::panel_gemm(a, false, b, tb, c1, 0.75f, 0.0f, false, ws.scratch(), nullptr, fp8 ? &ca : nullptr, fp8 ? &cb : nullptr, 1);
    QVERIFY(codes(c1) == all);
    const std::pair<int64_t, int64_t> parts[] = {{64, 128}, {m / 64 * 64, m % 64}};
    for (const auto& [r0, rn] : parts) {
      const Tensor part = rows_of(be, a, r0, rn);
      Tensor cp = be.empty({rn, n}, DType::BF16, MemCategory::Workspace);
      cpu::panel_gemm(part, false, b, tb, cp, 0.75f, 0.0f, false, ws.scratch(), nullptr, fp8 ? &ca : nullptr, fp8 ? &cb : nullptr, 2);
      const std::vector<uint16_t> got = codes(cp);
      for (int64_t i = 0; i < rn * n; ++i)
        QVERIFY2(got[size_t(i)] == all[size_t(r0 * n + i)],
                 qPrintable(QString("row %1 column %2 differs").arg(r0 + i / n).arg(i % n)));
    }
  }
  // dW = G^T X (A transposed, inner dimension = the batch) with beta = 1 over a bf16 C, against the
  // same product of the first 64 columns of G alone (fewer rows of C: other conversion blocks).
  void transposedAccumulateKeepsTheBits() {
    CpuBackend be(2);
    const int64_t batch = 1000, out = 300, in = 200;
    const Tensor g = random_matrix(be, batch, out, DType::BF16, 3), x = random_matrix(be, batch, in, DType::BF16, 4);
    Workspace ws;
    Tensor dw = random_matrix(be, out, in, DType::BF16, 5);
    Tensor dw64 = rows_of(be, dw, 0, 64);
    cpu::panel_gemm(g, true, x, false, dw, 1.0f, 1.0f, false, ws.scratch(), nullptr, nullptr, nullptr, 2);
    Tensor g64 = be.empty({batch, 64}, DType::BF16, MemCategory::Workspace);
    for (int64_t r = 0; r < batch; ++r) std::memcpy(cpu::elem_ptr(g64, r * 64), cpu::elem_ptr(g, r * out), 64 * 2);
    cpu::panel_gemm(g64, true, x, false, dw64, 1.0f, 1.0f, false, ws.scratch(), nullptr);
    const std::vector<uint16_t> all = codes(dw), part = codes(dw64);
    for (size_t i = 0; i < part.size(); ++i) QCOMPARE(part[i], all[i]);
  }
  // The maximum gathered by a product's casts is the tensor's largest |x| (fp8_tiled_amax's value
  // when nothing is infinite), and an infinite value shows as 0x7F800000.
  void castsGatherTheMaximum() {
    CpuBackend be(2);
    Tensor a = random_matrix(be, 200, 150, DType::BF16, 6), b = random_matrix(be, 90, 150, DType::BF16, 7);
    Workspace ws;
    Tensor c = be.empty({200, 90}, DType::BF16, MemCategory::Workspace);
    uint32_t seen_a = 0, seen_b = 0;
    const cpu::Fp8Cast ca{DType::F8E4M3, 2.0f, &seen_a}, cb{DType::F8E4M3, 1.0f, &seen_b};
    cpu::panel_gemm(a, false, b, true, c, 1.0f, 0.0f, false, ws.scratch(), nullptr, &ca, &cb);
    QCOMPARE(std::bit_cast<float>(seen_a), cpu::fp8_tiled_amax(a));
    QCOMPARE(std::bit_cast<float>(seen_b), cpu::fp8_tiled_amax(b));
    const uint16_t inf = 0xFF80;  // -inf in bf16
    std::memcpy(cpu::elem_ptr(a, 77 * 150 + 3), &inf, 2);
    seen_a = 0;
    cpu::panel_gemm(a, false, b, true, c, 1.0f, 0.0f, false, ws.scratch(), nullptr, &ca, &cb);
    QCOMPARE(seen_a, 0x7F800000u);
  }
  // convert_round_scaled = convert_to_f32 then round_scaled_n, bit for bit, over every bf16 bit
  // pattern (and fp32 inputs), with the maximum |x| of the values as bits (NaN left out).
  void fusedCastIsConvertThenRound() {
    std::vector<uint16_t> bf(0x10000);
    for (uint32_t i = 0; i < 0x10000; ++i) bf[i] = uint16_t(i);
    std::vector<float> wide(bf.size()), want(bf.size()), got(bf.size());
    convert_to_f32(DType::BF16, bf.data(), wide.data(), wide.size());
    for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
      for (float scale : {1.0f, 3.0f, 1.0f / 1024}) {
        round_scaled_n(t, scale, wide.data(), want.data(), wide.size());
        const uint32_t mx = convert_round_scaled(DType::BF16, bf.data(), t, scale, got.data(), got.size());
        for (size_t i = 0; i < got.size(); ++i) QCOMPARE(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]));
        QCOMPARE(mx, 0x7F800000u);  // the patterns include inf
        // fp32 inputs without inf: the maximum is the largest finite |x|
        std::vector<float> finite;
        for (float v : wide)
          if (!std::isinf(v)) finite.push_back(v);
        std::vector<float> out(finite.size()), ref(finite.size());
        round_scaled_n(t, scale, finite.data(), ref.data(), finite.size());
        const uint32_t fm = convert_round_scaled(DType::F32, finite.data(), t, scale, out.data(), out.size());
        QCOMPARE(fm, 0x7F7F0000u);  // bf16's largest finite value
        for (size_t i = 0; i < out.size(); ++i) QCOMPARE(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(ref[i]));
      }
    }
    QVERIFY_THROWS_EXCEPTION(Error, convert_round_scaled(DType::BF16, bf.data(), DType::BF16, 1.0f, got.data(), 1));
  }
};

QTEST_APPLESS_MAIN(TestCpuPanels)
#include "test_cpu_panels.moc"
