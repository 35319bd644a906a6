// The conversion workspace of the CPU backend's blocked product (backend/cpu_panels.h): a product
// holds at most what storing its two smaller tensors in 16 bits saves (or kGemmWork floats a slot
// and thread, or what slot 1 already holds), all in slot 1, so a 16-bit run never holds more
// than the fp32 run it replaces; the threads that take a large product's blocks (each with its
// own buffers, or one shared B) give the single thread's codes and gather the same fp8 maxima.
#include <QtTest>
#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/cpu_fp8.h"
#include "backend/cpu_panels.h"
#include "tensor/dtype.h"

using namespace trainlab;

namespace {

Tensor random_matrix(CpuBackend& be, int64_t rows, int64_t cols, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& e : v) e = d(rng);
  Tensor out = be.empty({rows, cols}, t, MemCategory::Workspace);
  be.upload(out, v.data(), DType::F32);
  return out;
}

std::vector<uint16_t> codes(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.raw());
  return std::vector<uint16_t>(p, p + t.numel());
}

// Slots as the backend keeps them, with the most floats each slot was asked for.
struct Workspace {
  std::vector<std::vector<float>> buffers = std::vector<std::vector<float>>(8);
  std::vector<size_t> most = std::vector<size_t>(8, 0);
  cpu::Scratch scratch() {
    return [this](int s, size_t n) {
      most[size_t(s)] = std::max(most[size_t(s)], n);
      if (buffers[size_t(s)].size() < n) buffers[size_t(s)].resize(n);
      return buffers[size_t(s)].data();
    };
  }
};

// The data columns of a product's shape: C [m, n] = op(A) op(B) over k, A and B transposed as asked.
void add_shape_columns() {
  QTest::addColumn<int>("m");
  QTest::addColumn<int>("n");
  QTest::addColumn<int>("k");
  QTest::addColumn<bool>("ta");
  QTest::addColumn<bool>("tb");
}
// Random bf16 operands A and B of that shape (seeds `seed` and seed + 1).
std::pair<Tensor, Tensor> bf16_operands(CpuBackend& be, int m, int n, int k, bool ta, bool tb, unsigned seed) {
  Tensor a = ta ? random_matrix(be, k, m, DType::BF16, seed) : random_matrix(be, m, k, DType::BF16, seed);
  Tensor b = tb ? random_matrix(be, n, k, DType::BF16, seed + 1) : random_matrix(be, k, n, DType::BF16, seed + 1);
  return {std::move(a), std::move(b)};
}
}  // namespace

class TestCpuPanelBudget : public QObject {
  Q_OBJECT
 private slots:
  // C = A B^T, C = A B and dW = G^T X in bf16 at the lab's shapes (digits' 128 x 256 x 256,
  // char-gpt tiny's 2048-token products), on 1 and 2 threads: slot 1 holds at most
  // max(threads x 3 x kGemmWork, half the elements of the two smaller tensors), the other slots
  // nothing, and both thread counts give the same codes.
  void workspaceWithinWhatSixteenBitsSave_data() {
    add_shape_columns();
    QTest::newRow("digits forward") << 128 << 256 << 256 << false << true;
    QTest::newRow("digits dW") << 256 << 256 << 128 << true << false;
    QTest::newRow("char qkv forward") << 2048 << 384 << 128 << false << true;
    QTest::newRow("char dx of fc2") << 2048 << 128 << 512 << false << false;
    QTest::newRow("char dW of fc1") << 512 << 128 << 2048 << true << false;
  }
  void workspaceWithinWhatSixteenBitsSave() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, ta);
    QFETCH(bool, tb);
    CpuBackend be(2);
    const auto [a, b] = bf16_operands(be, m, n, k, ta, tb, 1);
    int64_t sizes[3] = {int64_t(m) * k, int64_t(k) * n, int64_t(m) * n};
    std::sort(sizes, sizes + 3);
    const int64_t saved = (sizes[0] + sizes[1]) / 2;
    std::vector<uint16_t> first;
    for (int threads : {1, 2}) {
      Workspace ws;
      Tensor c = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
      cpu::panel_gemm(a, ta, b, tb, c, 1.0f, 0.0f, false, ws.scratch(), nullptr, nullptr, nullptr, threads);
      const int64_t limit = std::max<int64_t>(threads * 3 * cpu::kGemmWork, saved);
      QVERIFY2(int64_t(ws.most[1]) <= limit, qPrintable(QString("%1 threads: %2 floats > %3").arg(threads).arg(ws.most[1]).arg(limit)));
      for (size_t s = 0; s < ws.most.size(); ++s)
        if (s != 1) QCOMPARE(ws.most[s], size_t(0));
      if (threads == 1)
        first = codes(c);
      else
        QVERIFY(codes(c) == first);
    }
  }
  // A product whose own budget holds one thread's buffers (digits' first layer: 3 x kGemmWork)
  // takes a second thread when slot 1 already holds room for it (`held`, left by the step's larger
  // products), asks for no more than that, and gives the codes and fp8 maxima of one thread.
  void heldRoomGivesThreads_data() {
    add_shape_columns();
    QTest::newRow("digits first forward") << 128 << 256 << 64 << false << true;
    QTest::newRow("digits first dW") << 256 << 64 << 128 << true << false;
  }
  void heldRoomGivesThreads() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, ta);
    QFETCH(bool, tb);
    CpuBackend be(2);
    const auto [a, b] = bf16_operands(be, m, n, k, ta, tb, 8);
    constexpr size_t kHeld = 8 * cpu::kGemmWork;
    for (const bool fp8 : {false, true}) {
      std::vector<uint16_t> first;
      for (const size_t held : {size_t(0), kHeld}) {
        Workspace ws;
        Tensor c = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
        uint32_t seen_a = 0, seen_b = 0;
        const cpu::Fp8Cast ca{DType::F8E4M3, 4.0f, &seen_a}, cb{DType::F8E5M2, 0.25f, &seen_b};
        cpu::panel_gemm(a, ta, b, tb, c, 1.0f, 0.0f, false, ws.scratch(), nullptr, fp8 ? &ca : nullptr,
                        fp8 ? &cb : nullptr, held ? 2 : 1, held);
        if (fp8) {
          QCOMPARE(std::bit_cast<float>(seen_a), cpu::fp8_tiled_amax(a));
          QCOMPARE(std::bit_cast<float>(seen_b), cpu::fp8_tiled_amax(b));
        }
        if (held == 0) {
          QCOMPARE(ws.most[1], size_t(3 * cpu::kGemmWork));
          first = codes(c);
        } else {
          QVERIFY2(ws.most[1] > size_t(3 * cpu::kGemmWork) && ws.most[1] <= kHeld,
                   qPrintable(QString("%1 floats with %2 held").arg(ws.most[1]).arg(kHeld)));
          QVERIFY2(codes(c) == first, qPrintable(QString("2 threads in the held room differ from 1 (fp8 %1)").arg(fp8)));
        }
      }
    }
  }
  // fp8 casts of a product split over 2 threads (m 1024: each thread its own blocks) gather the
  // tensors' largest |x| as one thread does, and give its codes.
  void threadsGatherTheSameMaxima() {
    CpuBackend be(2);
    const int64_t m = 1024, n = 512, k = 192;
    const Tensor a = random_matrix(be, m, k, DType::BF16, 3), b = random_matrix(be, n, k, DType::BF16, 4);
    std::vector<uint16_t> first;
    for (int threads : {1, 2}) {
      Workspace ws;
      Tensor c = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
      uint32_t seen_a = 0, seen_b = 0;
      const cpu::Fp8Cast ca{DType::F8E4M3, 2.0f, &seen_a}, cb{DType::F8E5M2, 0.5f, &seen_b};
      cpu::panel_gemm(a, false, b, true, c, 1.0f, 0.0f, false, ws.scratch(), nullptr, &ca, &cb, threads);
      QCOMPARE(std::bit_cast<float>(seen_a), cpu::fp8_tiled_amax(a));
      QCOMPARE(std::bit_cast<float>(seen_b), cpu::fp8_tiled_amax(b));
      if (threads == 1)
        first = codes(c);
      else
        QVERIFY(codes(c) == first);
    }
  }
  // A product whose C is one conversion block but large enough for several threads: the threads
  // split the block's conversions by rows (A, B, and C where beta is not 0) and its calls. 1, 2
  // and 3 threads give the same codes and the same fp8 maxima (those of the whole tensors).
  void oneBlockSplitByRows_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::newRow("one call a panel") << 64 << 64 << 1024;
    QTest::newRow("four calls a panel") << 128 << 128 << 2048;
  }
  void oneBlockSplitByRows() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    CpuBackend be(3);
    const Tensor a = random_matrix(be, m, k, DType::BF16, 5), b = random_matrix(be, n, k, DType::BF16, 6);
    const Tensor c0 = random_matrix(be, m, n, DType::BF16, 7);
    for (const bool fp8 : {false, true}) {
      std::vector<uint16_t> first;
      for (int threads : {1, 2, 3}) {
        Workspace ws;
        Tensor c = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
        std::memcpy(c.raw(), c0.raw(), static_cast<size_t>(m) * static_cast<size_t>(n) * 2);
        uint32_t seen_a = 0, seen_b = 0;
        const cpu::Fp8Cast ca{DType::F8E4M3, 4.0f, &seen_a}, cb{DType::F8E5M2, 0.25f, &seen_b};
        cpu::panel_gemm(a, false, b, true, c, 0.5f, 0.75f, false, ws.scratch(), nullptr, fp8 ? &ca : nullptr,
                        fp8 ? &cb : nullptr, threads);
        if (fp8) {
          QCOMPARE(std::bit_cast<float>(seen_a), cpu::fp8_tiled_amax(a));
          QCOMPARE(std::bit_cast<float>(seen_b), cpu::fp8_tiled_amax(b));
        }
        if (threads == 1)
          first = codes(c);
        else
          QVERIFY2(codes(c) == first, qPrintable(QString("%1 threads differ from 1 (fp8 %2)").arg(threads).arg(fp8)));
      }
    }
  }
};

QTEST_APPLESS_MAIN(TestCpuPanelBudget)
#include "test_cpu_panel_budget.moc"
