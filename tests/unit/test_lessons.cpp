// The lessons (core/lessons/, issue 22): each lesson's figures at its defaults against values
// worked out by hand (the working is in the comments) or computed independently here, and the
// inputs' validation (every bad value an Error naming the lesson, the key and the range).
#include <QtTest>
#include <algorithm>
#include <cmath>

#include "lessons/lesson.h"
#include "tensor/dtype.h"
#include "util/error.h"

using namespace trainlab;

namespace {

LessonResult run(const std::string& name, const LessonValues& given = {}) {
  return run_lesson(find_lesson(name), given);
}

bool near(double a, double b, double rel) { return std::fabs(a - b) <= rel * std::fabs(b); }

QString error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return QString::fromStdString(e.what());
  }
  return QString("no error");
}

}  // namespace

class TestLessons : public QObject {
  Q_OBJECT

 private slots:
  void registryHasTheSixLessons() {
    QStringList names;
    for (const Lesson& l : lesson_registry()) {
      names << QString::fromStdString(l.name);
      QVERIFY(!l.title.empty() && !l.text.empty() && !l.inputs.empty());
      for (const LessonInput& in : l.inputs) QVERIFY2(in.lo <= in.def && in.def <= in.hi, in.key.c_str());
    }
    QCOMPARE(names, QStringList({"accumulate", "small-values", "checkpointing", "quant-outlier", "group-quant",
                                 "distillation"}));
  }

  // 10,000 x 1e-4 (exactly 1). An accumulator stalls once half its ulp exceeds the stored value v.
  //  fp16 (11-bit significand): in [2^-3, 2^-2) the ulp is 2^-13 = 1.22e-4, v lies between half an
  //    ulp and 1.5 ulp, so every addition adds exactly one ulp and the sum reaches 2^-2 exactly; in
  //    [2^-2, 2^-1) half an ulp is 2^-13 > 1e-4: it stalls at 0.25.
  //  bf16 (8-bit significand): v = bf16(1e-4) = 210/128 * 2^-14 = 1.00136e-4; in [2^-6, 2^-5) the
  //    ulp is 2^-13, one ulp an addition up to 2^-5, where half an ulp (2^-13) > v: stalls at 0.03125.
  //  e4m3: the smallest subnormal is 2^-9 = 1.95e-3, so 1e-4 is stored as 0 and the first addition
  //    changes nothing: the sum is 0, relative error 1, stall at step 1.
  //  e5m2: 1e-4 = 1.6384 * 2^-14 rounds to 1.75 * 2^-14 = 1.0681e-4; in [2^-11, 2^-10) the ulp is
  //    2^-13 (v between half and 1.5 ulp: one ulp an addition); at 2^-10 half an ulp is 2^-13 =
  //    1.22e-4 > v: stalls at 2^-10 = 0.0009765625.
  //  fp32 (24 bits) never stalls below 1: ulp/2 <= 2^-25; its error is the 1e-4 stored (9.9999997e-5)
  //    plus 10^4 roundings of at most 2^-25 each: under 4e-4 relative.
  void accumulateDefaults() {
    const LessonResult r = run("accumulate");
    QCOMPARE(r.figure("exact"), 1.0);
    QCOMPARE(r.figure("fp16.stalled_at"), 0.25);
    QCOMPARE(r.figure("fp16.sum"), 0.25);
    QCOMPARE(r.figure("fp16.relative_error"), 0.75);
    QCOMPARE(r.figure("bf16.stored_value"), 210.0 / 128.0 * std::ldexp(1.0, -14));
    QCOMPARE(r.figure("bf16.stalled_at"), 0.03125);
    QCOMPARE(r.figure("e4m3.stored_value"), 0.0);
    QCOMPARE(r.figure("e4m3.sum"), 0.0);
    QCOMPARE(r.figure("e4m3.stall_step"), 1.0);
    QCOMPARE(r.figure("e4m3.relative_error"), 1.0);
    QCOMPARE(r.figure("e5m2.stored_value"), 1.75 * std::ldexp(1.0, -14));
    QCOMPARE(r.figure("e5m2.stalled_at"), std::ldexp(1.0, -10));
    QCOMPARE(r.figure("fp32.stall_step"), 0.0);
    QVERIFY(std::isnan(r.figure("fp32.stalled_at")));
    QVERIFY(r.figure("fp32.relative_error") < 4e-4);
    // fp16 climbs one ulp an addition; from 2^-3 to 2^-2 at 2^-13 an addition alone takes 1024
    // additions, so it stalls after step 1024 (and before N); bf16 stalls earlier.
    QVERIFY(r.figure("fp16.stall_step") > 1024 && r.figure("fp16.stall_step") < 10000);
    QVERIFY(r.figure("bf16.stall_step") < r.figure("fp16.stall_step"));
    // The plot: one curve a format (plus the exact line), each ending at the sum.
    QCOMPARE(r.plot.series.size(), size_t(6));
    QCOMPARE(r.series("fp16").y.back(), 0.25);
    QCOMPARE(r.series("fp16").x.back(), 10000.0);
  }

  // 1000 x 2^-10: every partial sum k 2^-10 < 1 has an ulp of at most 2^-11 in fp16, half of which
  // is below the value, so fp16 never stalls and its sum is exact: 1000 / 1024 = 0.9765625.
  void accumulateThatNeverStalls() {
    const LessonResult r = run("accumulate", {{"n", 1000}, {"value", std::ldexp(1.0, -10)}});
    QCOMPARE(r.figure("fp16.stall_step"), 0.0);
    QCOMPARE(r.figure("fp16.sum"), 0.9765625);
    QCOMPARE(r.figure("fp16.relative_error"), 0.0);
  }

  // fp16: 1e-3 = 1.024 * 2^-10, 10 fraction bits: 1048.576 / 1024 -> 1049 / 1024 * 2^-10 = 1.00040436e-3.
  //   1e-6 is subnormal (< 2^-14): 1e-6 / 2^-24 = 16.78 -> 17 * 2^-24 = 1.01327896e-6 (1.3 % off).
  //   1e-8 < 2^-25 (half the smallest subnormal): 0, relative error 1.
  // bf16: 1e-8 = 1.34218 * 2^-27, 7 fraction bits: 171.8 / 128 -> 172/128 * 2^-27 = 1.00117e-8.
  // fp16 scaled by 2^16: 1e-8 * 65536 = 6.5536e-4 = 1.34218 * 2^-11 is normal: 1374.39 -> 1374/1024
  //   * 2^-11, / 2^16 = 1374/1024 * 2^-27 = 9.99717e-9 (error under 2^-11).
  void smallValuesDefaults() {
    const LessonResult r = run("small-values");
    QCOMPARE(r.figure("v1.fp16"), 1049.0 / 1024.0 * std::ldexp(1.0, -10));
    QCOMPARE(r.figure("v2.fp16"), 17.0 * std::ldexp(1.0, -24));
    QVERIFY(r.figure("v2.fp16_error") > 0.013 && r.figure("v2.fp16_error") < 0.014);
    QCOMPARE(r.figure("v3.fp16"), 0.0);
    QCOMPARE(r.figure("v3.fp16_error"), 1.0);
    QCOMPARE(r.figure("v3.bf16"), 172.0 / 128.0 * std::ldexp(1.0, -27));
    QCOMPARE(r.figure("v3.fp16_scaled"), 1374.0 / 1024.0 * std::ldexp(1.0, -27));
    QVERIFY(r.figure("v3.fp16_scaled_error") < std::ldexp(1.0, -11));
    QCOMPARE(r.plot.series.size(), size_t(3));
  }

  // k = 40: 1e-3 * 2^40 = 1.1e9 > 65504, fp16's largest value: the scaled value overflows to
  // infinity (JSON null); k = 0 is plain fp16.
  void smallValuesOverflowAndNoScale() {
    const Lesson& l = find_lesson("small-values");
    const LessonValues v = lesson_values(l, {{"k", 40}});
    const LessonResult r = l.compute(v);
    QVERIFY(std::isinf(r.figure("v1.fp16_scaled")));
    QVERIFY(lesson_json(l, v, r).at("figures").at("v1.fp16_scaled").is_null());
    const LessonResult r0 = run("small-values", {{"k", 0}});
    QCOMPARE(r0.figure("v3.fp16_scaled"), 0.0);
  }

  // 8 blocks, d = 256, batch 64, fp32: a [64, 256] tensor is 64 * 256 * 4 = 65,536 bytes (u).
  // Without checkpointing the ledger holds the input (u) and per block fc1's output and GELU
  // pre-activation ([64, 1024]: 4u each), fc2's output (u) and the residual sum (u): 10u a block,
  // (1 + 80) u = 5,308,416 bytes. Keeping the block inputs only: x_0 .. x_8, 9u = 589,824 bytes.
  // The recomputation runs every block's forward once more: 2 products of 2 * 64 * 256 * 1024
  // FLOPs = 67,108,864 a block, 536,870,912 in all, a third of the step (forward + 2x backward).
  void checkpointingDefaults() {
    const LessonResult r = run("checkpointing");
    QCOMPARE(r.figure("full.kept_bytes"), 5308416.0);
    QCOMPARE(r.figure("ckpt.kept_bytes"), 589824.0);
    QCOMPARE(r.figure("kept_ratio"), 9.0 / 81.0);
    QCOMPARE(r.figure("grad_max_abs_diff"), 0.0);  // the same operations on the same inputs
    QVERIFY(r.figure("grad_norm") > 0.0);
    QCOMPARE(r.figure("recompute_flops"), 536870912.0);
    QCOMPARE(r.figure("step_flops"), 3.0 * 536870912.0);
    QVERIFY(near(r.figure("recompute_fraction"), 1.0 / 3.0, 1e-12));
    QVERIFY(r.figure("full.peak_bytes") >= r.figure("full.kept_bytes"));
    QVERIFY(r.figure("ckpt.peak_bytes") >= r.figure("ckpt.kept_bytes"));
    QVERIFY(r.figure("ckpt.peak_bytes") < r.figure("full.peak_bytes"));
    // The timeline: the input, 8 forwards, 8 backwards; it ends with nothing but the last dx.
    QCOMPARE(r.series("no checkpointing").y.size(), size_t(17));
    QCOMPARE(r.series("no checkpointing").y[8], 5308416.0 / 1048576.0);
  }

  // 3 blocks, d = 4, batch 2: u = 2 * 4 * 4 = 32 bytes; (1 + 30) u = 992 and 4u = 128. The loss
  // is mean(x_3^2) of a forward, the same in both runs.
  void checkpointingSmall() {
    const LessonResult r = run("checkpointing", {{"blocks", 3}, {"d", 4}, {"batch", 2}});
    QCOMPARE(r.figure("full.kept_bytes"), 992.0);
    QCOMPARE(r.figure("ckpt.kept_bytes"), 128.0);
    QCOMPARE(r.figure("grad_max_abs_diff"), 0.0);
    QCOMPARE(r.figure("recompute_flops"), 3.0 * 2.0 * 2.0 * 2 * 4 * 16);
  }

  // 256 x 512 N(0, 0.02^2), row 7 x 50. The tensor's largest |w| is in the outlier row, so one scale
  // per tensor IS the outlier row's own scale: its error is the same both ways. That scale is about
  // 50 * 3.2 * 0.02 / 127 = 1.26 sigma, so the other rows' weights below half of it (|w| < 0.63
  // sigma, P = 0.47 for a normal) become 0 and their error is large (about 0.35); with a scale per
  // row (max of 512 normals about 3.2 sigma) the rounding error is s / sqrt(12) = 3.2 / 127 / 3.46
  // sigma = 0.0073 sigma. Storage: 131,072 int8 codes + 4 bytes, or + 256 * 4 = 132,096 bytes.
  void quantOutlierDefaults() {
    const LessonResult r = run("quant-outlier");
    QCOMPARE(r.figure("tensor.outlier_row_error"), r.figure("row.outlier_row_error"));
    const double ordinary_row = r.figure("row.ordinary_rows_error");
    QVERIFY2(ordinary_row > 0.005 && ordinary_row < 0.01, qPrintable(QString::number(ordinary_row)));
    const double zero_share = r.figure("tensor.ordinary_zero_share");
    QVERIFY2(zero_share > 0.42 && zero_share < 0.52, qPrintable(QString::number(zero_share)));
    const double ordinary_tensor = r.figure("tensor.ordinary_rows_error");
    QVERIFY2(ordinary_tensor > 0.25 && ordinary_tensor < 0.45, qPrintable(QString::number(ordinary_tensor)));
    // The product's error follows the weights' error (plus the inputs' 8-bit rounding).
    QVERIFY(r.figure("row.product_ordinary_error") < 0.02);
    QVERIFY(r.figure("tensor.product_ordinary_error") > 10 * r.figure("row.product_ordinary_error"));
    QCOMPARE(r.figure("bytes.fp32"), 524288.0);
    QCOMPARE(r.figure("bytes.int8_tensor"), 131076.0);
    QCOMPARE(r.figure("bytes.int8_row"), 132096.0);
    QCOMPARE(r.series("one scale per row").y.size(), size_t(256));
    QCOMPARE(r.series("one scale per tensor").y[7], r.figure("tensor.outlier_row_error"));
  }

  // Factor 1: no outlier, the scale per tensor is the largest row's, so every other row is at
  // least as coarse as with its own scale.
  void quantOutlierWithoutOutlier() {
    const LessonResult r = run("quant-outlier", {{"factor", 1}, {"rows", 16}, {"cols", 64}});
    QVERIFY(r.figure("tensor.ordinary_rows_error") >= r.figure("row.ordinary_rows_error"));
    QVERIFY(r.figure("tensor.ordinary_rows_error") < 0.02);
  }

  // The plot carries the group's weights: the scale, the error and the share of zeros recomputed
  // here from them with the formula of DOMAIN.md section 5 (s = fp16(max|w| / qmax), q =
  // clamp(rne(w / s), -qmax, qmax)). At 2 bits qmax = 1: every |w| < max/2 is 0.
  void groupQuantAgainstTheFormula() {
    const LessonResult r = run("group-quant");
    const std::vector<double>& w = r.series("weights").y;
    QCOMPARE(w.size(), size_t(32));
    double maxabs = 0.0;
    for (double v : w) maxabs = std::max(maxabs, std::fabs(v));
    for (int bits : {8, 4, 2}) {
      const double qmax = (1 << (bits - 1)) - 1;
      const double s = round_to(DType::F16, static_cast<float>(maxabs / qmax));
      double e = 0.0, n = 0.0;
      int zeros = 0;
      for (double v : w) {
        const double q = s * std::clamp(std::nearbyint(v / s), -qmax, qmax);
        e += (q - v) * (q - v);
        n += v * v;
        zeros += q == 0.0;
      }
      const std::string k = std::to_string(bits) + "bit";
      QVERIFY(near(r.figure(k + ".scale"), s, 1e-6));
      QVERIFY(near(r.figure(k + ".relative_error"), std::sqrt(e / n), 1e-4));
      QCOMPARE(r.figure(k + ".zero_share"), zeros / 32.0);
    }
    int below_half = 0;
    for (double v : w) below_half += std::fabs(v) < maxabs / 2;
    QVERIFY(std::fabs(r.figure("2bit.zero_share") - below_half / 32.0) <= 1.0 / 32.0);  // ties at max/2 aside
    QVERIFY(r.figure("8bit.relative_error") < r.figure("4bit.relative_error"));
    QVERIFY(r.figure("4bit.relative_error") < r.figure("2bit.relative_error"));
  }

  // softmax([9, 5, 4, -2, -3]): e^{z - 9} = 1, e^-4 = 0.01831564, e^-5 = 0.006737947, e^-11 =
  // 1.670170e-5, e^-12 = 6.144212e-6, sum 1.025076432: p = 0.9755370, 0.01786758, 0.006573117,
  // 1.629313e-5, 5.993907e-6.
  // At T = 4: z/4 - 2.25 = 0, -1, -1.25, -2.75, -3: 1, 0.3678794, 0.2865048, 0.06392786,
  // 0.04978707, sum 1.768099168: p = 0.5655791, 0.2080649, 0.1620411, 0.03615626, 0.02815853.
  // (fp32 softmax: agreement to about 1e-6 relative.)
  void distillationProbabilities() {
    const LessonResult r = run("distillation");
    const double p1[] = {0.9755370, 0.01786758, 0.006573117, 1.629313e-5, 5.993907e-6};
    const double p4[] = {0.5655791, 0.2080649, 0.1620411, 0.03615626, 0.02815853};
    for (int i = 0; i < 5; ++i) {
      const std::string k = ".p" + std::to_string(i + 1);
      QVERIFY2(near(r.figure("t_low" + k), p1[i], 1e-5), k.c_str());
      QVERIFY2(near(r.figure("t_high" + k), p4[i], 1e-5), k.c_str());
    }
  }

  // The backend's soft-loss gradient is T (p_s - p_t) / batch, the gradient of T^2 KL; KL's own is
  // that / T^2. For large T, p_s - p_t -> (dz - mean dz) / (C T), so T^2 KL's gradient levels off
  // (T = 8 and 16 within a few %) while KL's falls as 1 / T^2 (a quarter from 8 to 16).
  void distillationGradientAcrossT() {
    const LessonResult r = run("distillation");
    const LessonSeries& scaled = r.plot.series.at(0);
    const LessonSeries& plain = r.plot.series.at(1);
    QCOMPARE(scaled.y.size(), size_t(16));
    QCOMPARE(r.figure("grad_t2.t1"), r.figure("grad_kl.t1"));
    QVERIFY(near(r.figure("grad_kl.tmax") * 256.0, r.figure("grad_t2.tmax"), 1e-9));
    QVERIFY(near(scaled.y[15], scaled.y[7], 0.03));
    QVERIFY(near(plain.y[15] / plain.y[7], 0.25, 0.03));
  }

  void badInputsAreNamed() {
    const Lesson& acc = find_lesson("accumulate");
    QCOMPARE(error_of([&] { lesson_values(acc, {{"n", 0}}); }),
             QString("lesson accumulate: input 'n' (copies N): expected an integer in [1, 1e+06]"));
    QVERIFY(error_of([&] { lesson_values(acc, {{"n", 2.5}}); }).contains("expected an integer"));
    QVERIFY(error_of([&] { lesson_values(acc, {{"value", NAN}}); }).contains("input 'value'"));
    QVERIFY(error_of([&] { lesson_values(acc, {{"value", INFINITY}}); }).contains("[1e-12, 10000]"));
    QCOMPARE(error_of([&] { lesson_values(acc, {{"bits", 4}}); }),
             QString("lesson accumulate: unknown input 'bits'; the inputs are n, value"));
    QVERIFY(error_of([] { find_lesson("nope"); }).startsWith("unknown lesson 'nope'; the lessons are accumulate,"));
    QVERIFY(error_of([] { run("quant-outlier", {{"rows", 8}, {"outlier_row", 8}}); })
                .contains("input 'outlier_row' (outlier row): expected an integer in [0, rows - 1] = [0, 7]"));
    LessonValues v;
    QVERIFY(error_of([&] { set_lesson_value(acc, v, "n"); }).contains("expects key=value"));
    QVERIFY(error_of([&] { set_lesson_value(acc, v, "n=12abc"); }).contains("input 'n'"));
    QVERIFY(error_of([&] { set_lesson_value(acc, v, "n="); }).contains("input 'n'"));
    QVERIFY(error_of([&] { set_lesson_value(acc, v, "value=1e999"); }).contains("input 'value'"));
    set_lesson_value(acc, v, "n=250");
    QCOMPARE(v.at("n"), 250.0);
  }

  void jsonHasInputsFiguresAndPlot() {
    const Lesson& l = find_lesson("group-quant");
    const LessonValues v = lesson_values(l, {{"group", 16}});
    const LessonResult r = l.compute(v);
    const nlohmann::json j = lesson_json(l, v, r);
    QCOMPARE(j.at("lesson").get<std::string>(), std::string("group-quant"));
    QCOMPARE(j.at("inputs").at("group").get<int64_t>(), int64_t{16});
    QCOMPARE(j.at("inputs").at("std").get<double>(), 0.02);
    QCOMPARE(j.at("figures").size(), r.figures.size());
    for (const auto& f : r.figures) QCOMPARE(j.at("figures").at(f.key).get<double>(), f.value);
    QCOMPARE(j.at("plot").at("series").size(), size_t(4));
    QCOMPARE(j.at("plot").at("series").at(0).at("y").size(), size_t(16));
  }
};

QTEST_APPLESS_MAIN(TestLessons)
#include "test_lessons.moc"
