// accumulate and small-values: what the number formats of tensor/dtype.h do to sums and to small
// values. Every rounding is tensor/dtype.h's round_to (RNE, subnormals, saturation as the formats).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "lessons/lesson.h"
#include "tensor/dtype.h"

namespace trainlab {

namespace {

struct Format {
  DType type;
  const char* key;    // figure prefix
  const char* label;  // table / legend text
};

const Format kAccumulators[] = {{DType::F32, "fp32", "fp32"},
                                {DType::BF16, "bf16", "bf16"},
                                {DType::F16, "fp16", "fp16"},
                                {DType::F8E4M3, "e4m3", "fp8 E4M3"},
                                {DType::F8E5M2, "e5m2", "fp8 E5M2"}};

constexpr int kPlotPoints = 400;

// acc_i = round(acc_{i-1} + round(value)) in `type`, the addition in fp32 (as every op of the lab).
// Once an addition leaves the accumulator unchanged, every later one does too (the same two
// operands), so the loop stops there and the curve stays flat.
void accumulate(const Format& f, int64_t n, double value, LessonResult& r, LessonSeries& curve) {
  const float v = round_to(f.type, static_cast<float>(value));
  float acc = 0.0f;
  int64_t stall = 0;
  const int64_t stride = std::max<int64_t>(1, n / kPlotPoints);
  curve.x.push_back(0.0);
  curve.y.push_back(0.0);
  for (int64_t i = 1; i <= n; ++i) {
    if (stall == 0) {
      const float next = round_to(f.type, acc + v);
      if (next == acc) stall = i;
      acc = next;
    }
    if (i % stride == 0 || i == n) {
      curve.x.push_back(static_cast<double>(i));
      curve.y.push_back(acc);
    }
  }
  const std::string k = f.key, l = f.label;
  const double exact = static_cast<double>(n) * value;
  r.figures.push_back({k + ".stored_value", l + ": the value as stored", v});
  r.figures.push_back({k + ".sum", l + ": the sum after N additions", acc});
  r.figures.push_back({k + ".relative_error", l + ": |sum - N value| / (N value)", std::fabs(acc - exact) / exact});
  r.figures.push_back({k + ".stall_step", l + ": the first addition that changes nothing (0: none)",
                       static_cast<double>(stall)});
  r.figures.push_back({k + ".stalled_at", l + ": the sum it stalls at", stall ? static_cast<double>(acc) : NAN});
}

LessonResult compute_accumulate(const LessonValues& in) {
  const auto n = static_cast<int64_t>(in.at("n"));
  const double value = in.at("value");
  LessonResult r;
  r.figures.push_back({"exact", "N value, exactly", static_cast<double>(n) * value});
  r.plot = {"The accumulator after each addition", "additions", "accumulator", false, false, {}};
  for (const Format& f : kAccumulators) {
    LessonSeries curve{f.label, {}, {}};
    accumulate(f, n, value, r, curve);
    r.plot.series.push_back(std::move(curve));
  }
  r.plot.series.push_back({"exact", {0.0, static_cast<double>(n)}, {0.0, static_cast<double>(n) * value}, true});
  return r;
}

// The value v takes stored in fp16, in bf16, and in fp16 after scaling by 2^k (then unscaled in
// fp32, as a loss scaler does): the stored values and their relative errors against fp32's v.
struct Stored {
  double fp16, bf16, scaled;
};

Stored store(double value, int k) {
  const float v = static_cast<float>(value);
  const float scale = std::ldexp(1.0f, k);
  return {round_to(DType::F16, v), round_to(DType::BF16, v), round_to(DType::F16, v * scale) / scale};
}

double relative_error(double stored, double v) { return std::fabs(stored - v) / std::fabs(v); }

LessonResult compute_small_values(const LessonValues& in) {
  const int k = static_cast<int>(in.at("k"));
  LessonResult r;
  for (const char* key : {"v1", "v2", "v3"}) {
    const double v = static_cast<float>(in.at(key));
    const Stored s = store(v, k);
    const std::string p = key, l = "v = " + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    }();
    r.figures.push_back({p + ".value", l + ": in fp32", v});
    r.figures.push_back({p + ".fp16", l + ": in fp16", s.fp16});
    r.figures.push_back({p + ".fp16_error", l + ": fp16 relative error", relative_error(s.fp16, v)});
    r.figures.push_back({p + ".bf16", l + ": in bf16", s.bf16});
    r.figures.push_back({p + ".bf16_error", l + ": bf16 relative error", relative_error(s.bf16, v)});
    r.figures.push_back({p + ".fp16_scaled", l + ": fp16 after x 2^k, then / 2^k", s.scaled});
    r.figures.push_back({p + ".fp16_scaled_error", l + ": scaled fp16 relative error", relative_error(s.scaled, v)});
  }
  // The relative error over 10^-12 .. 10^5 (log-spaced): where each flushes to zero (error 1),
  // where it is subnormal (error grows) and where it overflows (infinite: not drawn).
  r.plot = {"Relative error of a stored value", "value", "relative error", true, true, {}};
  LessonSeries f16{"fp16", {}, {}}, b16{"bf16", {}, {}}, sc{"fp16 x 2^k", {}, {}};
  for (int i = 0; i <= 340; ++i) {
    const double v = static_cast<float>(std::pow(10.0, -12.0 + i * 0.05));
    const Stored s = store(v, k);
    for (auto [series, stored] : {std::pair{&f16, s.fp16}, std::pair{&b16, s.bf16}, std::pair{&sc, s.scaled}}) {
      series->x.push_back(v);
      series->y.push_back(relative_error(stored, v));
    }
  }
  r.plot.series = {f16, b16, sc};
  return r;
}

}  // namespace

Lesson accumulate_lesson() {
  Lesson l;
  l.name = "accumulate";
  l.title = "Accumulating in a low-precision format";
  l.text =
      "N copies of a small value are added one at a time into an accumulator kept in each format (each "
      "addition in fp32, its result rounded to the format). Once half a unit in the last place of the sum "
      "exceeds the value, an addition rounds back to the same sum: the accumulator stalls. fp16 and bf16 "
      "stall long before the exact sum, fp8 at once; this is why the lab accumulates in fp32.";
  l.inputs = {{"n", "copies N", "how many copies are added", 10000, 1, 1000000, true},
              {"value", "value", "the value added each time", 1e-4, 1e-12, 1e4, false}};
  l.compute = compute_accumulate;
  return l;
}

Lesson small_values_lesson() {
  Lesson l;
  l.name = "small-values";
  l.title = "Small values in fp16 and bf16, and loss scaling";
  l.text =
      "Gradients are often tiny. fp16 has 5 exponent bits: below 6.1e-5 it is subnormal and loses precision, "
      "below 3e-8 a value becomes 0. bf16 has fp32's 8 exponent bits, so small values keep 8 bits of "
      "precision. Loss scaling multiplies by 2^k before storing in fp16 and divides afterwards, moving small "
      "values into fp16's normal range (too large a k overflows to infinity).";
  l.inputs = {{"v1", "value 1", "a value to store", 1e-3, 1e-20, 6e4, false},
              {"v2", "value 2", "a value to store", 1e-6, 1e-20, 6e4, false},
              {"v3", "value 3", "a value to store", 1e-8, 1e-20, 6e4, false},
              {"k", "scale exponent k", "the loss scale is 2^k", 16, 0, 40, true}};
  l.compute = compute_small_values;
  return l;
}

}  // namespace trainlab
