// Number formats: fp16/bf16 rounding on known values (DOMAIN.md section 2).
#include <QtTest>
#include <cmath>

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
  void nanStaysNan() {
    QVERIFY(std::isnan(round_to(DType::F16, NAN)));
    QVERIFY(std::isnan(round_to(DType::BF16, NAN)));
  }
};

QTEST_APPLESS_MAIN(TestDType)
#include "test_dtype.moc"
