// The backend's table of operations as callers see it: supports(Op, DType) answers what a backend
// can do (the CPU every operation it implements; a backend without an optional operation says no
// before it is called, and calling it anyway gives "<op> is not supported on <device>"), the
// matrix-product mode is an argument of each product (Tf32 rounds the operands, Fp8 computes as
// Native on a device without fp8 units), the device.* config keys reach DeviceOptions, and
// gather_rows checks its arguments the same way on every backend (backend_checks.h).
#include <QtTest>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "backend/backend_checks.h"
#include "backend/cpu_backend.h"
#include "config/config.h"
#include "config/device_options.h"

using namespace trainlab;

namespace {

constexpr Op kLastOp = Op::Adafactor;
std::vector<Op> all_ops() {
  std::vector<Op> ops;
  for (int i = 0; i <= static_cast<int>(kLastOp); ++i) ops.push_back(static_cast<Op>(i));
  return ops;
}

// A backend with only the mandatory operations (the pure virtual ones, done by a CpuBackend): what
// a new device's first build looks like. Its optional operations are the base class's defaults.
class MinimalBackend final : public Backend {
 public:
  DeviceInfo info() const override {
    DeviceInfo d = m_cpu.info();
    d.name = "minimal test device";
    return d;
  }
  using Backend::supports;  // the base's supports(Op, DType): this backend does not override it
  bool supports(DType t) const override { return t == DType::F32 || t == DType::I32; }
  Tensor empty(const Shape& s, DType t, MemCategory c) override { return m_cpu.empty(s, t, c); }
  void upload(Tensor& dst, const void* src, DType st) override { m_cpu.upload(dst, src, st); }
  void download(const Tensor& src, void* dst, DType dt) override { m_cpu.download(src, dst, dt); }
  void copy(const Tensor& src, Tensor& dst) override { m_cpu.copy(src, dst); }
  void fill(Tensor& t, float v) override { m_cpu.fill(t, v); }
  void set_step_scalars(const StepScalars& s) override { m_cpu.set_step_scalars(s); }
  void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta,
            MatmulMode mode) override {
    m_cpu.gemm(a, ta, b, tb, c, alpha, beta, mode);
  }
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y, Tensor* pre,
                      MatmulMode mode) override {
    m_cpu.linear_forward(x, w, bias, act, y, pre, mode);
  }
  void linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved, Tensor& dw,
                       Tensor* dbias, Tensor* dx, bool accumulate, MatmulMode mode) override {
    m_cpu.linear_backward(x, w, dy, act, saved, dw, dbias, dx, accumulate, mode);
  }
  void activation_forward(Activation act, const Tensor& x, Tensor& y) override { m_cpu.activation_forward(act, x, y); }
  void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) override {
    m_cpu.activation_backward(act, x, y, dy, dx);
  }
  void softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float mult, Tensor& stats,
                    bool acc) override {
    m_cpu.softmax_xent(logits, labels, dlogits, mult, stats, acc);
  }
  void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override { m_cpu.gather_rows(src, idx, dst); }
  void adamw_step(std::span<ParamSlot> p, const AdamWHyper& h) override { m_cpu.adamw_step(p, h); }
  void sgd_step(std::span<ParamSlot> p, const SgdHyper& h) override { m_cpu.sgd_step(p, h); }
  bool all_finite(std::span<const Tensor* const> t) override { return m_cpu.all_finite(t); }

 private:
  CpuBackend m_cpu{1};
};

bool mandatory(Op op) {
  return op == Op::Gemm || op == Op::LinearForward || op == Op::LinearBackward || op == Op::Activation ||
         op == Op::SoftmaxXent || op == Op::GatherRows || op == Op::AdamW || op == Op::Sgd;
}

std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}

float tf32_rounded(float f) {  // 10 mantissa bits, ties to even (finite f)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

class TestBackendOps : public QObject {
  Q_OBJECT
 private slots:
  void everyOpHasItsOwnName() {
    std::set<std::string> names;
    for (Op op : all_ops()) {
      const std::string n = op_name(op);
      QVERIFY2(!n.empty() && n != "?", qPrintable("op " + QString::number(static_cast<int>(op)) + " has no name"));
      QVERIFY2(names.insert(n).second, qPrintable(QString::fromStdString("two ops are called " + n)));
    }
    QCOMPARE(std::string(matmul_mode_name(MatmulMode::Native)), std::string("native"));
    QCOMPARE(std::string(matmul_mode_name(MatmulMode::Tf32)), std::string("tf32"));
    QCOMPARE(std::string(matmul_mode_name(MatmulMode::Fp8)), std::string("fp8"));
  }

  // The CPU implements every operation but token decoding (CharGptGenerator decodes there without
  // the backend), for every float format; gemm_i8 on int8 operands; gather_rows in any format.
  void cpuSupportsEveryOpItImplements() {
    CpuBackend cpu(1);
    for (Op op : all_ops()) {
      for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2}) {
        const bool want = op != Op::Decode && op != Op::GemmI8;
        QVERIFY2(cpu.supports(op, t) == want,
                 qPrintable(QString("cpu supports(%1, %2)").arg(op_name(op)).arg(dtype_name(t))));
      }
      QCOMPARE(cpu.supports(op, DType::I8), op == Op::GemmI8 || op == Op::GatherRows);
    }
  }

  // A backend without an optional operation says so when asked; the caller skips it without
  // calling (no exception to catch, no message to match). Calling it anyway names the op and device.
  void refusalIsAskedNotCaught() {
    MinimalBackend be;
    for (Op op : all_ops()) {
      QCOMPARE(be.supports(op, DType::F32), mandatory(op));
      QVERIFY(!be.supports(op, DType::BF16));  // a format the device does not have: no op runs in it
    }
    QVERIFY(be.supports(Op::GatherRows, DType::I32));
    // The caller's side: ask, then run or skip.
    Tensor w = be.empty({4, 8}, DType::F32, MemCategory::Weights), c = be.empty({4, 4}, DType::F32, MemCategory::Workspace);
    be.fill(w, 0.5f);
    int ran = 0, skipped = 0;
    for (Op op : {Op::FakeQuantize, Op::Gemm}) {
      if (!be.supports(op, DType::F32)) {
        ++skipped;
        continue;
      }
      be.gemm(w, false, w, true, c, 1.0f, 0.0f, MatmulMode::Native);
      ++ran;
    }
    QCOMPARE(host(be, c), std::vector<float>(16, 2.0f));  // 8 x 0.5 x 0.5
    QCOMPARE(ran, 1);
    QCOMPARE(skipped, 1);
    // An unasked call fails with a message a user can act on.
    try {
      be.fake_quantize(w, w, 4, 8);
      QFAIL("fake_quantize ran on a backend that does not support it");
    } catch (const Error& e) {
      QCOMPARE(std::string(e.what()), std::string("fake_quantize is not supported on minimal test device"));
    }
  }

  // Tf32 is an argument of the product: operands rounded to tf32 first (here checked against a
  // Native product of operands rounded beforehand, bit for bit); Native right after is unaffected;
  // Fp8 on the CPU (no fp8 units) is Native.
  void matmulModeIsAnArgument() {
    CpuBackend be(1);
    std::mt19937 g(3);
    std::normal_distribution<float> nd;
    const int64_t m = 9, k = 37, n = 11;
    std::vector<float> xv(m * k), wv(n * k);
    for (auto& v : xv) v = nd(g);
    for (auto& v : wv) v = nd(g);
    auto make = [&](const std::vector<float>& v, Shape s) {
      Tensor t = be.empty(s, DType::F32, MemCategory::Workspace);
      be.upload(t, v.data(), DType::F32);
      return t;
    };
    std::vector<float> xr = xv, wr = wv;
    for (auto& v : xr) v = tf32_rounded(v);
    for (auto& v : wr) v = tf32_rounded(v);
    const Tensor x = make(xv, {m, k}), w = make(wv, {n, k}), x_r = make(xr, {m, k}), w_r = make(wr, {n, k});
    Tensor y = be.empty({m, n}, DType::F32, MemCategory::Workspace);
    auto linear = [&](const Tensor& a, const Tensor& b, MatmulMode mode) {
      be.linear_forward(a, b, nullptr, Activation::None, y, nullptr, mode);
      return host(be, y);
    };
    auto product = [&](const Tensor& a, const Tensor& b, MatmulMode mode) {
      be.gemm(a, false, b, true, y, 1.0f, 0.0f, mode);
      return host(be, y);
    };
    const auto native = linear(x, w, MatmulMode::Native);
    const auto tf32 = linear(x, w, MatmulMode::Tf32);
    QCOMPARE(tf32, linear(x_r, w_r, MatmulMode::Native));
    QVERIFY(tf32 != native);
    QCOMPARE(linear(x, w, MatmulMode::Native), native);
    QCOMPARE(linear(x, w, MatmulMode::Fp8), native);
    QCOMPARE(product(x, w, MatmulMode::Tf32), product(x_r, w_r, MatmulMode::Native));
    QCOMPARE(product(x, w, MatmulMode::Native), native);
  }

  void peaksAreKeyedByFormatAndMode() {
    DeviceInfo d;
    QCOMPARE(d.peak_for(DType::F32, MatmulMode::Native), 0.0);  // unknown (the CPU)
    d.peak_tflops = {{DType::F32, MatmulMode::Native, 60.0}, {DType::F32, MatmulMode::Tf32, 500.0},
                     {DType::BF16, MatmulMode::Native, 1000.0}, {DType::F8E4M3, MatmulMode::Fp8, 2000.0}};
    QCOMPARE(d.peak_for(DType::F32, MatmulMode::Native), 60.0);
    QCOMPARE(d.peak_for(DType::F32, MatmulMode::Tf32), 500.0);
    QCOMPARE(d.peak_for(DType::BF16, MatmulMode::Tf32), 1000.0);  // tf32 does not apply to bf16
    QCOMPARE(d.peak_for(DType::F8E4M3, MatmulMode::Fp8), 2000.0);
    QCOMPARE(d.peak_for(DType::F16, MatmulMode::Native), 0.0);
  }

  void deviceKeysReachDeviceOptions() {
    const DeviceOptions defaults = device_options(Config());
    QVERIFY(defaults.fp32_gemm == Fp32Math::Native);
    QVERIFY(!defaults.lt_autotune);
    QVERIFY(defaults.attention_wgmma);
    Config c;
    c.set("device.fp32_gemm", "bf16x9");
    c.set("device.lt_autotune", "true");
    c.set("device.attention_wgmma", "false");
    const DeviceOptions o = device_options(c);
    QVERIFY(o.fp32_gemm == Fp32Math::Bf16x9);
    QVERIFY(o.lt_autotune);
    QVERIFY(!o.attention_wgmma);
    QVERIFY_THROWS_EXCEPTION(Error, c.set("device.fp32_gemm", "split6"));
    QVERIFY_THROWS_EXCEPTION(Error, fp32_math_from_name("fast"));
    for (Fp32Math m : {Fp32Math::Native, Fp32Math::Bf16x9, Fp32Math::Auto})
      QVERIFY(fp32_math_from_name(fp32_math_name(m)) == m);
    // create_backend takes them (the CPU has none of these choices).
    auto be = create_backend("cpu", o);
    QVERIFY(be->info().kind == DeviceKind::Cpu);
  }

  // One argument check for every backend (backend_checks.h): formats, shapes, row counts.
  void gatherRowsChecks() {
    CpuBackend be(1);
    Tensor src = be.empty({5, 3}, DType::F32, MemCategory::Workspace);
    Tensor idx = be.empty({2}, DType::I32, MemCategory::Workspace);
    Tensor dst = be.empty({2, 3}, DType::F32, MemCategory::Workspace);
    QCOMPARE(gather_rows_row_bytes(src, idx, dst), size_t(12));
    auto message = [&](const Tensor& s, const Tensor& i, const Tensor& d) -> std::string {
      try {
        gather_rows_row_bytes(s, i, d);
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    };
    const Tensor fidx = be.empty({2}, DType::F32, MemCategory::Workspace);
    QCOMPARE(message(src, fidx, dst), std::string("gather_rows: indices must be int32"));
    const Tensor bdst = be.empty({2, 3}, DType::BF16, MemCategory::Workspace);
    QCOMPARE(message(src, idx, bdst), std::string("gather_rows: source and destination formats differ"));
    const Tensor wide = be.empty({2, 4}, DType::F32, MemCategory::Workspace);
    QCOMPARE(message(src, idx, wide), std::string("gather_rows: destination [2, 4] does not fit 2 rows of [5, 3]"));
    // The CPU also checks each index's value as it reads it.
    const int32_t bad[2] = {1, 5};
    be.upload(idx, bad, DType::I32);
    QVERIFY_THROWS_EXCEPTION(Error, be.gather_rows(src, idx, dst));
  }
};

QTEST_APPLESS_MAIN(TestBackendOps)
#include "test_backend_ops.moc"
