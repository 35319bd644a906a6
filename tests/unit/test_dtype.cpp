// Number formats: fp16/bf16 rounding on known values (DOMAIN.md section 2).
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"

using namespace trainlab;

class TestDType : public QObject {
  Q_OBJECT
 private slots:
  void tinyValues() {
    QCOMPARE(round_to(DType::F16, 1e-8f), 0.0f);          // underflows in fp16
    QVERIFY(round_to(DType::BF16, 1e-8f) != 0.0f);        // survives in bf16 (fp32's range)
    QVERIFY(std::fabs(round_to(DType::BF16, 1e-8f) - 1e-8f) < 1e-10f);
    const float sub = round_to(DType::F16, 1e-6f);        // subnormal in fp16: spacing 2^-24
    QVERIFY(sub > 0.0f && sub < 6.1e-5f);
    QCOMPARE(sub, std::ldexp(17.0f, -24));
  }
  void largestAndOverflow() {
    QCOMPARE(round_to(DType::F16, 65504.0f), 65504.0f);
    QCOMPARE(f32_to_f16(65504.0f), uint16_t(0x7BFF));
    QVERIFY(std::isinf(round_to(DType::F16, 65520.0f)));  // halfway to 2^16 rounds to even: inf
    QCOMPARE(round_to(DType::F16, 65519.0f), 65504.0f);
    QVERIFY(std::isinf(round_to(DType::BF16, 3.4e38f * 1.0f + 1e38f)));
    QCOMPARE(round_to(DType::F8E4M3, 1000.0f), 448.0f);   // e4m3fn saturates
  }
  void tiesToEven() {
    // fp16 spacing at 1.0 is 2^-10: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> 1 (even).
    QCOMPARE(round_to(DType::F16, 1.0f + std::ldexp(1.0f, -11)), 1.0f);
    // 1 + 3*2^-11 ties between 1+2^-10 (odd) and 1+2^-9 (even) -> 1 + 2^-9.
    QCOMPARE(round_to(DType::F16, 1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
    // bf16 spacing at 1.0 is 2^-7.
    QCOMPARE(round_to(DType::BF16, 1.0f + std::ldexp(1.0f, -8)), 1.0f);
    QCOMPARE(round_to(DType::BF16, 1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  }
  void roundTripAllHalfs() {
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float f = f16_to_f32(static_cast<uint16_t>(h));
      if (std::isnan(f)) continue;
      QCOMPARE(f32_to_f16(f), static_cast<uint16_t>(h));
    }
  }
  // fp32 -> fp16 against an independent reference: the nearest of all finite fp16 values (ties to
  // the even code), inf from 65,520 up. Checked on every fp16 value, every midpoint between
  // neighbours (the ties) and one fp32 ulp either side of it, and a sweep of fp32 bit patterns.
  void f16AgainstNearestSearch() {
    std::vector<float> values;  // all positive finite fp16 values, increasing with the code
    for (uint32_t h = 0; h <= 0x7BFF; ++h) values.push_back(f16_to_f32(static_cast<uint16_t>(h)));
    auto reference = [&](float x) -> uint16_t {
      const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
      const float a = std::fabs(x);
      if (a >= 65520.0f) return sign | 0x7C00;
      const auto it = std::lower_bound(values.begin(), values.end(), a);
      size_t hi = static_cast<size_t>(it - values.begin());
      if (hi == 0) return sign;
      if (hi == values.size()) return sign | 0x7BFF;
      const size_t lo = hi - 1;
      const double dlo = static_cast<double>(a) - values[lo], dhi = static_cast<double>(values[hi]) - a;
      const size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
      return static_cast<uint16_t>(sign | pick);
    };
    auto check = [&](float x) {
      if (f32_to_f16(x) != reference(x))
        QFAIL(qPrintable(QString("f32_to_f16(%1) = 0x%2, expected 0x%3")
                             .arg(static_cast<double>(x), 0, 'g', 10)
                             .arg(f32_to_f16(x), 0, 16)
                             .arg(reference(x), 0, 16)));
    };
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const float mid = static_cast<float>((static_cast<double>(values[i]) + values[i + 1]) / 2);  // exact in fp32
      for (float x : {values[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
        check(x);
        check(-x);
      }
    }
    for (float x : {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, 1e-45f, 2.9802322e-8f, 2.9802326e-8f, 0.0f, -0.0f})
      check(x);
    for (uint64_t u = 0; u < 0x100000000ull; u += 40503) {  // a sweep of bit patterns (NaNs skipped)
      float x;
      const uint32_t b = static_cast<uint32_t>(u);
      std::memcpy(&x, &b, 4);
      if (!std::isnan(x)) check(x);
    }
    QCOMPARE(f32_to_f16(NAN) & 0x7C00, 0x7C00);
    QVERIFY((f32_to_f16(NAN) & 0x3FF) != 0);
  }
  void nanStaysNan() {
    QVERIFY(std::isnan(round_to(DType::F16, NAN)));
    QVERIFY(std::isnan(round_to(DType::BF16, NAN)));
  }
  // The conversions of a block's rows (convert_to_f32_rows / convert_from_f32_rows: bf16 in one
  // vectorised loop, fp16 in one F16C loop where rows are whole groups of 8, the other formats
  // row by row) give the bulk conversions' bits row for row, and write nothing outside the block:
  // a [48, 96] matrix of bit patterns (NaNs, infs, ties and subnormals among them), the block of
  // 37 rows from row 5 and 67 or 64 columns from column 9.
  void rowsMatchBulk_data() {
    QTest::addColumn<int>("cols_in");
    QTest::newRow("67 columns") << 67;
    QTest::newRow("64 columns") << 64;
  }
  void rowsMatchBulk() {
    QFETCH(int, cols_in);
    constexpr size_t R = 48, C = 96, r0 = 5, c0 = 9, rows = 37;
    const size_t cols = static_cast<size_t>(cols_in);
    std::vector<float> f32(R * C);
    for (size_t i = 0; i < f32.size(); ++i) {
      const uint32_t b = static_cast<uint32_t>(i) * 2654435761u;
      std::memcpy(&f32[i], &b, 4);
    }
    for (DType t : {DType::BF16, DType::F16, DType::F8E4M3, DType::F32}) {
      const size_t es = dtype_bytes(t, 1);
      std::vector<char> src(R * C * es);
      convert_from_f32(f32.data(), t, src.data(), f32.size());
      std::vector<float> block(rows * cols), want(rows * cols);
      convert_to_f32_rows(t, src.data() + (r0 * C + c0) * es, C * es, rows, cols, block.data());
      for (size_t r = 0; r < rows; ++r) convert_to_f32(t, src.data() + ((r0 + r) * C + c0) * es, want.data() + r * cols, cols);
      QVERIFY2(std::memcmp(block.data(), want.data(), block.size() * 4) == 0, dtype_name(t));
      std::vector<char> out(src.size(), 0x5A), out_want(src.size(), 0x5A);
      convert_from_f32_rows(f32.data() + 3, C, t, out.data() + (r0 * C + c0) * es, C * es, rows, cols);
      for (size_t r = 0; r < rows; ++r)
        convert_from_f32(f32.data() + 3 + r * C, t, out_want.data() + ((r0 + r) * C + c0) * es, cols);
      QVERIFY2(out == out_want, dtype_name(t));
    }
  }
};

QTEST_APPLESS_MAIN(TestDType)
#include "test_dtype.moc"
