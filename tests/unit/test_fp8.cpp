// fp8 e4m3 / e5m2 casts (tensor/dtype.h; the products' saturating ones too) on hand-checked values
// and exhaustively; the vectorised
// bulk conversions (fp16 and fp8) bit for bit against the scalar ones; the delayed-scaling
// bookkeeping (tensor/fp8_scaling.h); the CPU backend's fp8 linear layer (backend/cpu_fp8.cpp)
// against the same product computed here from the casts.
#include <QtTest>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/cpu_fp8.h"
#include "tensor/dtype.h"
#include "tensor/fp8_cast.h"
#include "tensor/fp8_scaling.h"
#include "util/error.h"

using namespace trainlab;

namespace {
float p2(int e) { return std::ldexp(1.0f, e); }

// The code of the fp8 value nearest to x, ties to the even code, by a search over all finite
// codes (independent of dtype.cpp's encoders); overflow as CUDA's casts: e4m3 saturates to 448,
// e5m2 gives inf from 61,440 (57,344 + half its step) up.
uint8_t nearest_code(DType t, float x) {
  if (std::isnan(x)) return 0x7F;
  const bool e4 = t == DType::F8E4M3;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (!e4 && a >= 61440.0f) return sign | 0x7C;
  const uint8_t top = e4 ? 0x7E : 0x7B;
  if (a >= (e4 ? 448.0f : 57344.0f)) return sign | top;
  uint8_t best = 0;
  double best_d = INFINITY;
  for (uint8_t c = 0; c <= top; ++c) {
    const double v = e4 ? e4m3_to_f32(c) : e5m2_to_f32(c);
    const double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return sign | best;
}

std::vector<float> sweep() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 0x10000; ++b) v.push_back(std::bit_cast<float>(b << 16));  // every bf16 bit pattern
  for (DType t : {DType::F8E4M3, DType::F8E5M2})
    for (uint32_t c = 0; c < 0x7F; ++c) {
      const float lo = round_to(t, t == DType::F8E4M3 ? e4m3_to_f32(uint8_t(c)) : e5m2_to_f32(uint8_t(c)));
      const float hi = t == DType::F8E4M3 ? e4m3_to_f32(uint8_t(c + 1)) : e5m2_to_f32(uint8_t(c + 1));
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const float mid = lo + (hi - lo) * 0.5f;  // exact: both are short binary fractions
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) v.insert(v.end(), {x, -x});
    }
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}
}  // namespace

class TestFp8 : public QObject {
  Q_OBJECT
 private slots:
  void e4m3HandChecked() {
    QCOMPARE(f32_to_e4m3(1.0f), uint8_t(0x38));
    QCOMPARE(f32_to_e4m3(-2.0f), uint8_t(0xC0));
    QCOMPARE(f32_to_e4m3(240.0f), uint8_t(0x77));  // 1.875 * 2^7
    QCOMPARE(f32_to_e4m3(448.0f), uint8_t(0x7E));  // the largest: S.1111.110 (S.1111.111 is NaN)
    QCOMPARE(f32_to_e4m3(464.0f), uint8_t(0x7E));  // tie between 448 and (NaN's) 480: saturates
    QCOMPARE(f32_to_e4m3(1e6f), uint8_t(0x7E));
    QCOMPARE(f32_to_e4m3(INFINITY), uint8_t(0x7E));
    QCOMPARE(f32_to_e4m3(-INFINITY), uint8_t(0xFE));
    QCOMPARE(f32_to_e4m3(p2(-6)), uint8_t(0x08));          // the smallest normal
    QCOMPARE(f32_to_e4m3(p2(-9)), uint8_t(0x01));          // the smallest subnormal
    QCOMPARE(f32_to_e4m3(p2(-10)), uint8_t(0x00));         // half of it: a tie, to even (0)
    QCOMPARE(f32_to_e4m3(std::nextafter(p2(-10), 1.0f)), uint8_t(0x01));
    QCOMPARE(f32_to_e4m3(3 * p2(-10)), uint8_t(0x02));     // 1.5 units: tie, to even (2)
    QCOMPARE(f32_to_e4m3(5 * p2(-10)), uint8_t(0x02));     // 2.5 units: tie, to even (2)
    QCOMPARE(f32_to_e4m3(1.0625f), uint8_t(0x38));         // tie between 1 and 1.125: 1
    QCOMPARE(f32_to_e4m3(1.1875f), uint8_t(0x3A));         // tie between 1.125 and 1.25: 1.25
    QCOMPARE(f32_to_e4m3(15 * p2(-10)), uint8_t(0x08));    // 7.5 units rounds up to the smallest normal
    QCOMPARE(f32_to_e4m3(-0.0f), uint8_t(0x80));
    QCOMPARE(f32_to_e4m3(NAN), uint8_t(0x7F));
    QCOMPARE(f32_to_e4m3(-NAN), uint8_t(0x7F));  // CUDA's cast gives the canonical NaN
    QCOMPARE(e4m3_to_f32(0x7E), 448.0f);
    QCOMPARE(e4m3_to_f32(0x01), p2(-9));
    QVERIFY(std::isnan(e4m3_to_f32(0x7F)) && std::isnan(e4m3_to_f32(0xFF)));
    QVERIFY(e4m3_to_f32(0x80) == 0.0f && std::signbit(e4m3_to_f32(0x80)));
  }
  void e5m2HandChecked() {
    QCOMPARE(f32_to_e5m2(1.0f), uint8_t(0x3C));
    QCOMPARE(f32_to_e5m2(57344.0f), uint8_t(0x7B));  // the largest finite
    QCOMPARE(f32_to_e5m2(61439.996f), uint8_t(0x7B));
    QCOMPARE(f32_to_e5m2(61440.0f), uint8_t(0x7C));  // tie between 57,344 (odd code) and inf: inf
    QCOMPARE(f32_to_e5m2(INFINITY), uint8_t(0x7C));
    QCOMPARE(f32_to_e5m2(-INFINITY), uint8_t(0xFC));
    QCOMPARE(f32_to_e5m2(p2(-14)), uint8_t(0x04));        // the smallest normal
    QCOMPARE(f32_to_e5m2(p2(-16)), uint8_t(0x01));        // the smallest subnormal
    QCOMPARE(f32_to_e5m2(p2(-17)), uint8_t(0x00));        // tie: to even
    QCOMPARE(f32_to_e5m2(3 * p2(-17)), uint8_t(0x02));    // 1.5 units: to even
    QCOMPARE(f32_to_e5m2(1.125f), uint8_t(0x3C));         // tie between 1 and 1.25: 1
    QCOMPARE(f32_to_e5m2(1.375f), uint8_t(0x3E));         // tie between 1.25 and 1.5: 1.5
    QCOMPARE(f32_to_e5m2(-0.0f), uint8_t(0x80));
    QCOMPARE(f32_to_e5m2(NAN), uint8_t(0x7F));
    QCOMPARE(f32_to_e5m2(-NAN), uint8_t(0x7F));
    // The products' cast saturates (kernels/fp8.cu: __NV_SATFINITE).
    const float big[] = {57344.0f, 61440.0f, 1e9f, INFINITY, -INFINITY, NAN};
    uint8_t sat[6];
    cast_fp8_saturating(big, DType::F8E5M2, sat, 6);
    QCOMPARE(sat[0], uint8_t(0x7B));
    QCOMPARE(sat[1], uint8_t(0x7B));
    QCOMPARE(sat[2], uint8_t(0x7B));
    QCOMPARE(sat[3], uint8_t(0x7B));
    QCOMPARE(sat[4], uint8_t(0xFB));
    QCOMPARE(sat[5], uint8_t(0x7F));
    QVERIFY(std::isinf(e5m2_to_f32(0x7C)) && e5m2_to_f32(0xFC) < 0.0f);
    for (uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) QVERIFY(std::isnan(e5m2_to_f32(c)));
  }
  // Every code decodes and encodes back to itself (NaNs to the canonical 0x7F), by the scalar
  // and the bulk conversions.
  void allCodesRoundTrip() {
    for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
      std::vector<uint8_t> codes(256), back(256);
      std::vector<float> values(256);
      for (int c = 0; c < 256; ++c) codes[size_t(c)] = uint8_t(c);
      convert_to_f32(t, codes.data(), values.data(), 256);
      convert_from_f32(values.data(), t, back.data(), 256);
      for (int c = 0; c < 256; ++c) {
        const float v = t == DType::F8E4M3 ? e4m3_to_f32(uint8_t(c)) : e5m2_to_f32(uint8_t(c));
        QCOMPARE(std::bit_cast<uint32_t>(values[size_t(c)]), std::bit_cast<uint32_t>(v));
        const uint8_t want = std::isnan(v) ? 0x7F : uint8_t(c);
        QCOMPARE(t == DType::F8E4M3 ? f32_to_e4m3(v) : f32_to_e5m2(v), want);
        QCOMPARE(back[size_t(c)], want);
      }
    }
  }
  // Scalar, bulk and the nearest-value search agree on every bf16 pattern, every midpoint between
  // neighbouring fp8 values and one fp32 step either side, and random fp32 bit patterns.
  void castsAgainstNearestSearch() {
    const std::vector<float> in = sweep();
    for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
      std::vector<uint8_t> bulk(in.size());
      convert_from_f32(in.data(), t, bulk.data(), in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const uint8_t scalar = t == DType::F8E4M3 ? f32_to_e4m3(in[i]) : f32_to_e5m2(in[i]);
        const uint8_t ref = nearest_code(t, in[i]);
        if (scalar != ref || bulk[i] != ref)
          QFAIL(qPrintable(QString("%1 of 0x%2: scalar 0x%3, bulk 0x%4, nearest 0x%5").arg(dtype_name(t))
                               .arg(std::bit_cast<uint32_t>(in[i]), 8, 16, QChar('0')).arg(scalar, 2, 16).arg(bulk[i], 2, 16).arg(ref, 2, 16)));
      }
    }
  }
  // The vectorised fp16 conversions give the scalar functions' bits: every fp16 code widened, and
  // the sweep (plus every fp16 midpoint) narrowed and rounded in place.
  void bulkF16BitIdentical() {
    std::vector<uint16_t> codes(0x10000);
    for (uint32_t h = 0; h < 0x10000; ++h) codes[h] = uint16_t(h);
    std::vector<float> wide(0x10000);
    convert_to_f32(DType::F16, codes.data(), wide.data(), wide.size());
    for (uint32_t h = 0; h < 0x10000; ++h) QCOMPARE(std::bit_cast<uint32_t>(wide[h]), std::bit_cast<uint32_t>(f16_to_f32(uint16_t(h))));
    std::vector<float> in = sweep();
    for (uint32_t h = 0; h < 0x7BFF; ++h) {
      const float lo = f16_to_f32(uint16_t(h)), hi = f16_to_f32(uint16_t(h + 1));
      const float mid = lo + (hi - lo) * 0.5f;
      in.insert(in.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid});
    }
    std::vector<uint16_t> narrow(in.size());
    convert_from_f32(in.data(), DType::F16, narrow.data(), in.size());
    std::vector<float> rounded = in;
    round_to_n(DType::F16, rounded.data(), rounded.size());
    for (size_t i = 0; i < in.size(); ++i) {
      QCOMPARE(narrow[i], f32_to_f16(in[i]));
      QCOMPARE(std::bit_cast<uint32_t>(rounded[i]), std::bit_cast<uint32_t>(round_to(DType::F16, in[i])));
    }
    for (DType t : {DType::F8E4M3, DType::F8E5M2}) {  // fp8 rounding in place, and scaled
      std::vector<float> r = in, s(in.size());
      round_to_n(t, r.data(), r.size());
      round_scaled_n(t, 3.0f, in.data(), s.data(), in.size());
      std::vector<uint8_t> sat(in.size());
      cast_fp8_saturating(in.data(), t, sat.data(), in.size());
      const float fmax = t == DType::F8E4M3 ? 448.0f : 57344.0f;
      auto clamp = [&](float x) { return std::isnan(x) ? x : std::fmax(-fmax, std::fmin(fmax, x)); };
      for (size_t i = 0; i < in.size(); ++i) {
        QCOMPARE(std::bit_cast<uint32_t>(r[i]), std::bit_cast<uint32_t>(round_to(t, in[i])));
        QCOMPARE(std::bit_cast<uint32_t>(s[i]), std::bit_cast<uint32_t>(round_to(t, clamp(in[i] * 3.0f))));
        QCOMPARE(sat[i], t == DType::F8E4M3 ? f32_to_e4m3(in[i]) : f32_to_e5m2(clamp(in[i])));
      }
    }
    QVERIFY_THROWS_EXCEPTION(Error, round_scaled_n(DType::BF16, 1.0f, in.data(), in.data(), 1));
  }
  // A product operand's fused cast (convert_round_scaled and its rows: the AVX2 path for groups of 8 where the
  // CPU has it, the vector loop for the rest and for single values) on every bf16 bit pattern, and
  // the same values as fp32, times scales that keep, overflow and underflow them: the codec's
  // value of the product x * scale rounded to fp32 (e4m3 saturating, e5m2 clamped to 57,344),
  // and the largest |x| before the scale with NaNs left out.
  void roundScaledAllBf16() {
    std::vector<uint16_t> codes(0x10000);
    std::vector<float> wide(0x10000);
    for (uint32_t b = 0; b < 0x10000; ++b) codes[b] = uint16_t(b), wide[b] = bf16_to_f32(uint16_t(b));
    uint32_t want_max = 0;
    for (float x : wide)
      if (!std::isnan(x)) want_max = std::max(want_max, std::bit_cast<uint32_t>(std::fabs(x)));
    for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
      const float fmax = t == DType::F8E4M3 ? 448.0f : 57344.0f;
      for (float scale : {1.0f, 3.0f, 0.75f, 448.0f / 3.7f, p2(-20), p2(20), 1e-30f, 1e30f, 1e-40f, 5.5e4f}) {
        std::vector<float> bulk(wide.size()), from32(wide.size()), one(1);
        const uint32_t got_max = convert_round_scaled(DType::BF16, codes.data(), t, scale, bulk.data(), codes.size());
        const uint32_t got_max32 = convert_round_scaled(DType::F32, wide.data(), t, scale, from32.data(), wide.size());
        QCOMPARE(got_max, want_max);
        QCOMPARE(got_max32, want_max);
        for (uint32_t b = 0; b < 0x10000; ++b) {
          const float y = wide[b] * scale;
          const float want = t == DType::F8E4M3 ? e4m3_to_f32(f32_to_e4m3(y))
                                                : e5m2_to_f32(f32_to_e5m2(std::isnan(y) ? y : std::fmax(-fmax, std::fmin(fmax, y))));
          const uint32_t single_max = convert_round_scaled(DType::BF16, &codes[b], t, scale, one.data(), 1);
          const uint32_t w = std::bit_cast<uint32_t>(want);
          if (std::bit_cast<uint32_t>(bulk[b]) != w || std::bit_cast<uint32_t>(one[0]) != w ||
              std::bit_cast<uint32_t>(from32[b]) != w || single_max != (std::isnan(wide[b]) ? 0u : b & 0x7FFFu) << 16)
            QFAIL(qPrintable(QString("%1 of bf16 0x%2 times %3: bulk 0x%4, single 0x%5, from fp32 0x%6, codec 0x%7")
                                 .arg(dtype_name(t)).arg(b, 4, 16, QChar('0')).arg(double(scale))
                                 .arg(std::bit_cast<uint32_t>(bulk[b]), 8, 16).arg(std::bit_cast<uint32_t>(one[0]), 8, 16)
                                 .arg(std::bit_cast<uint32_t>(from32[b]), 8, 16).arg(w, 8, 16)));
        }
        std::vector<float> part(1003);  // an odd start and length: groups of 8 and a tail
        convert_round_scaled(DType::BF16, codes.data() + 0x3C01, t, scale, part.data(), part.size());
        for (size_t i = 0; i < part.size(); ++i) QCOMPARE(std::bit_cast<uint32_t>(part[i]), std::bit_cast<uint32_t>(bulk[0x3C01 + i]));
        // A block of the codes as a [256, 256] matrix, by rows (convert_round_scaled_rows), from
        // bf16 and fp32: 61 rows from row 3, 67 columns from column 5 (groups of 8 and a tail).
        for (DType src : {DType::BF16, DType::F32}) {
          std::vector<float> block(61 * 67);
          const void* at = src == DType::BF16 ? static_cast<const void*>(codes.data() + 3 * 256 + 5) : wide.data() + 3 * 256 + 5;
          const uint32_t block_max = convert_round_scaled_rows(src, at, 256 * (src == DType::BF16 ? 2 : 4), 61, 67, t, scale,
                                                               block.data());
          uint32_t want_block_max = 0;
          for (size_t r = 0; r < 61; ++r)
            for (size_t c = 0; c < 67; ++c) {
              const size_t b = (3 + r) * 256 + 5 + c;
              QCOMPARE(std::bit_cast<uint32_t>(block[r * 67 + c]), std::bit_cast<uint32_t>(bulk[b]));
              if (!std::isnan(wide[b])) want_block_max = std::max(want_block_max, std::bit_cast<uint32_t>(std::fabs(wide[b])));
            }
          QCOMPARE(block_max, want_block_max);
        }
      }
    }
    QVERIFY_THROWS_EXCEPTION(Error, convert_round_scaled(DType::BF16, codes.data(), DType::F16, 1.0f, wide.data(), 1));
  }
  // Delayed scaling by hand: the scale of step t comes from the maxima of other steps' slots.
  void delayedScaling() {
    float h[kFp8History] = {};
    QCOMPARE(fp8_delayed_scale(h, 0.0f, 448.0f), 1.0f);  // empty history
    fp8_record_amax(h, 0.0f, 2.0f);
    QCOMPARE(h[0], 2.0f);
    QCOMPARE(fp8_delayed_scale(h, 0.0f, 448.0f), 1.0f);   // its own slot does not count
    QCOMPARE(fp8_delayed_scale(h, 1.0f, 448.0f), 224.0f);  // 448 / 2
    fp8_record_amax(h, 1.0f, 8.0f);
    fp8_record_amax(h, 1.0f, 4.0f);                        // a second cast in step 1: the max stays
    QCOMPARE(h[1], 8.0f);
    QCOMPARE(fp8_delayed_scale(h, 2.0f, 57344.0f), 57344.0f / 8.0f);
    fp8_record_amax(h, 2.0f, INFINITY);  // not recorded
    fp8_record_amax(h, 2.0f, NAN);
    QCOMPARE(h[2], 0.0f);
    QCOMPARE(fp8_delayed_scale(h, 15.0f, 448.0f), 56.0f);  // slots 15 and 0 left out: 448 / 8
    h[3] = 5.0f;
    fp8_record_amax(h, 2.0f, 1.0f);  // step 2 clears slot 3 for the step after next
    QCOMPARE(h[3], 0.0f);
    QCOMPARE(fp8_history_slot(17.0f), 1);
    QVERIFY(fp8_linear_eligible(64, 64, 256, false, false));
    QVERIFY(!fp8_linear_eligible(64, 256, 10, false, false));  // the digits output layer
    QVERIFY(!fp8_linear_eligible(64, 64, 256, true, false));   // GELU epilogue
  }
  // The maximum the history records: over 32 x 32 tiles, a tile with inf left out, NaN ignored.
  void tiledMaximum() {
    CpuBackend be;
    Tensor t = be.empty({40, 70}, DType::F32, MemCategory::Workspace);
    std::vector<float> v(40 * 70, 0.5f);
    v[3 * 70 + 5] = -7.0f;      // tile (0, 0)
    v[35 * 70 + 65] = NAN;      // tile (1, 2): ignored
    be.upload(t, v.data(), DType::F32);
    QCOMPARE(cpu::fp8_tiled_amax(t), 7.0f);
    v[3 * 70 + 6] = INFINITY;   // tile (0, 0) now has inf: left out
    be.upload(t, v.data(), DType::F32);
    QCOMPARE(cpu::fp8_tiled_amax(t), 0.5f);
  }
  // An fp8 linear layer on the CPU: y = (e4m3(x sx) e4m3(w sw)^T) / (sx sw) + b, rounded to bf16,
  // with the scales of the history (step 0: 1; step 1: 448 / max), computed here in double.
  void linearForwardIsTheCastProduct() {
    CpuBackend be;
    const int64_t m = 32, k = 48, n = 16;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> xs(static_cast<size_t>(m * k)), ws(static_cast<size_t>(n * k)), bs(static_cast<size_t>(n));
    for (auto& e : xs) e = u(rng) * 3.0f;
    for (auto& e : ws) e = u(rng) * 0.02f;  // small: e4m3 at scale 1 loses them to subnormals
    for (auto& e : bs) e = u(rng);
    Tensor x = be.empty({m, k}, DType::BF16, MemCategory::Workspace), w = be.empty({n, k}, DType::BF16, MemCategory::Weights);
    Tensor b = be.empty({n}, DType::BF16, MemCategory::Weights), y = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
    Tensor yb = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
    be.upload(x, xs.data(), DType::F32), be.upload(w, ws.data(), DType::F32), be.upload(b, bs.data(), DType::F32);
    be.download(x, xs.data(), DType::F32), be.download(w, ws.data(), DType::F32), be.download(b, bs.data(), DType::F32);
    const float wmax = cpu::fp8_tiled_amax(w), xmax = cpu::fp8_tiled_amax(x);
    for (int step = 0; step < 2; ++step) {
      StepScalars sc;
      sc.step = float(step);
      be.set_step_scalars(sc);
      be.linear_forward(x, w, &b, Activation::None, y, nullptr, MatmulMode::Fp8);
      const float sx = step == 0 ? 1.0f : 448.0f / xmax, sw = step == 0 ? 1.0f : 448.0f / wmax;
      std::vector<float> got(size_t(m * n));
      be.download(y, got.data(), DType::F32);
      double worst = 0.0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (int64_t p = 0; p < k; ++p)
            acc += double(round_to(DType::F8E4M3, xs[size_t(i * k + p)] * sx)) * round_to(DType::F8E4M3, ws[size_t(j * k + p)] * sw);
          const double want = acc / (double(sx) * sw) + bs[size_t(j)];
          worst = std::max(worst, std::fabs(got[size_t(i * n + j)] - want) / (std::fabs(want) + 1e-3));
        }
      QVERIFY2(worst < 1e-2, qPrintable(QString("step %1: relative error %2").arg(step).arg(worst)));  // bf16 output
      be.linear_forward(x, w, &b, Activation::None, yb, nullptr, MatmulMode::Native);
      std::vector<float> bf(size_t(m * n));
      be.download(yb, bf.data(), DType::F32);
      QVERIFY2(bf != got, "the fp8 product equals the bf16 one");
    }
  }
  // A weight freed and another made at the same address (what the CUDA caching allocator does
  // nearly every time; forced here with one buffer under both) gets scales of its own: its first
  // fp8 step equals a fresh backend's, not one scaled by the freed weight's history.
  void newWeightAtAFreedAddressStartsAfresh() {
    const int64_t m = 16, k = 32, n = 16;
    std::vector<uint16_t> bytes(size_t(n * k));
    const auto weight_over = [&](CpuBackend& be, float scale) {
      auto storage = std::make_shared<Storage>(bytes.data(), bytes.size() * 2, MemCategory::Weights, DeviceKind::Cpu,
                                               nullptr, [](void*, size_t) {});
      Tensor w(storage, {n, k}, DType::BF16);
      std::vector<float> v(size_t(n * k));
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (auto& e : v) e = u(rng) * scale;
      be.upload(w, v.data(), DType::F32);
      return w;
    };
    const auto step = [&](CpuBackend& be, const Tensor& w, int t) {
      StepScalars sc;
      sc.step = float(t);
      be.set_step_scalars(sc);
      Tensor x = be.empty({m, k}, DType::BF16, MemCategory::Workspace), y = be.empty({m, n}, DType::BF16, MemCategory::Workspace);
      std::vector<float> xs(size_t(m * k));
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * float(i)) * 0.05f;
      be.upload(x, xs.data(), DType::F32);
      be.linear_forward(x, w, nullptr, Activation::None, y, nullptr, MatmulMode::Fp8);
      std::vector<float> out(size_t(m * n));
      be.download(y, out.data(), DType::F32);
      return out;
    };
    CpuBackend be;
    {
      const Tensor old = weight_over(be, 40.0f);  // large maxima: its scales are far from 1
      for (int t = 0; t < 3; ++t) step(be, old, t);
    }
    const Tensor w = weight_over(be, 0.02f);
    const std::vector<float> reused = step(be, w, 3);
    CpuBackend fresh_be;
    const Tensor w2 = weight_over(fresh_be, 0.02f);
    QCOMPARE(w.raw(), w2.raw());
    QCOMPARE(reused, step(fresh_be, w2, 3));
  }
};

QTEST_APPLESS_MAIN(TestFp8)
#include "test_fp8.moc"
