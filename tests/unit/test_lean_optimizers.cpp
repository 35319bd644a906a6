// Lion, 8-bit AdamW and Adafactor (optim/lean_optimizers.h) on the CPU against single steps worked
// by hand and against references in double (backend.h states the numerics); the dynamic code maps;
// checkpoint state round trips; the state bytes of each against plan/memory_model.h's formula.
#include <QtTest>
#include <cmath>

#include "backend/backend.h"
#include "nn/parameter.h"
#include "optim/lean_optimizers.h"
#include "plan/memory_model.h"
#include "tensor/dynamic_map.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

Parameter make_param(Backend& be, const std::vector<float>& w, const Shape& shape, const std::string& name = "p") {
  Parameter p;
  p.name = name;
  p.shape = shape;
  p.master = upload_f32(be, w, p.shape, MemCategory::Weights);
  p.value = p.master;
  p.grad = be.empty(p.shape, DType::F32, MemCategory::Gradients);
  be.fill(p.grad, 0.0f);
  return p;
}

void set_scalars(Backend& be, float lr, int t) {
  StepScalars sc;
  sc.lr = lr;
  sc.step = static_cast<float>(t);
  be.set_step_scalars(sc);
}

bool close(double a, double b, double rel = 1e-6) { return std::fabs(a - b) <= rel * std::max(1.0, std::fabs(b)); }

// Adafactor in double for one [R, C] (factored when R, C >= 2) or vector parameter.
struct RefAdafactor {
  double lr, beta1, wd;
  bool relative;
  int64_t R, C;
  std::vector<double> w, row, col, v, m;
  int t = 0;
  void step(const std::vector<double>& g) {
    ++t;
    const double b = 1 - std::pow(t, -0.8), n = static_cast<double>(w.size());
    std::vector<double> u(w.size());
    if (R >= 2 && C >= 2) {
      std::vector<double> rs(R, 0.0), cs(C, 0.0);
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
          const double q = g[i * C + j] * g[i * C + j] + 1e-30;
          rs[i] += q / C;
          cs[j] += q / R;
        }
      double mean = 0;
      for (int64_t i = 0; i < R; ++i) mean += (row[i] = b * row[i] + (1 - b) * rs[i]) / R;
      for (int64_t j = 0; j < C; ++j) col[j] = b * col[j] + (1 - b) * cs[j];
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) u[i * C + j] = g[i * C + j] / std::sqrt(row[i] / mean * col[j]);
    } else {
      for (size_t e = 0; e < w.size(); ++e) u[e] = g[e] / std::sqrt(v[e] = b * v[e] + (1 - b) * (g[e] * g[e] + 1e-30));
    }
    double sq = 0, ws = 0;
    for (size_t e = 0; e < w.size(); ++e) sq += u[e] * u[e], ws += w[e] * w[e];
    const double clip = std::max(1.0, std::sqrt(sq / n));
    const double a = relative ? std::min(1e-2, 1 / std::sqrt(t)) * std::max(1e-3, std::sqrt(ws / n)) : lr;
    for (size_t e = 0; e < w.size(); ++e) {
      double up = u[e] / clip;
      if (beta1 > 0) up = m[e] = beta1 * m[e] + (1 - beta1) * up;
      w[e] = w[e] * (1 - a * wd) - a * up;
    }
  }
};

}  // namespace

class TestLeanOptimizers : public QObject {
  Q_OBJECT
 private slots:
  // bitsandbytes' maps: 256 sorted values; signed: 127 negatives, 0 at 127, 1 at 255, the most
  // negative -0.99296875 (the midpoint of linspace(0.1, 1, 65)'s last interval: -1 is not a code);
  // unsigned: 0 at 0, 1 at 255, the smallest positive 1e-6 * 0.325.
  void dynamicMaps() {
    const DynamicMap& s = dynamic_map_signed();
    const DynamicMap& u = dynamic_map_unsigned();
    for (size_t i = 1; i < 256; ++i) {
      QVERIFY(s[i - 1] < s[i]);
      QVERIFY(u[i - 1] < u[i]);
    }
    QCOMPARE(s[127], 0.0f);
    QCOMPARE(s[255], 1.0f);
    QVERIFY(close(s[0], -0.99296875, 1e-7));
    QCOMPARE(u[0], 0.0f);
    QCOMPARE(u[255], 1.0f);
    QVERIFY(close(u[1], 1e-6 * 0.325, 1e-5));  // linspace(0.1, 1, 3): midpoints 0.325, 0.775
    QVERIFY(close(s[128], 1e-6 * 0.55, 1e-5));  // linspace(0.1, 1, 2): midpoint 0.55
    // Nearest entry, ties to the lower index; out of range to the ends.
    QCOMPARE(int(dynamic_quantize(s, 0.0f)), 127);
    QCOMPARE(int(dynamic_quantize(s, 1.0f)), 255);
    QCOMPARE(int(dynamic_quantize(s, -1.0f)), 0);
    QCOMPARE(int(dynamic_quantize(s, 2.0f)), 255);
    for (float x : {0.3f, -0.004f, 0.77f, 1e-5f}) {
      const int q = dynamic_quantize(s, x);
      for (int k = 0; k < 256; ++k) QVERIFY(std::fabs(s[q] - x) <= std::fabs(s[k] - x));
    }
    const float mid = 0.5f * (u[200] + u[201]);
    QCOMPARE(int(dynamic_quantize(u, mid)), mid - u[200] <= u[201] - mid ? 200 : 201);
  }

  // w = {1, -2, 0.5}, g = {0.5, -0.25, 0}, lr 0.1, wd 0.01, b1 0.9, b2 0.99, m = 0:
  //   c = 0.1 g -> sign {+1, -1, 0}; w = w * 0.999 - 0.1 sign = {0.899, -1.898, 0.4995};
  //   m = 0.01 g = {0.005, -0.0025, 0}.
  // Step 2, g = {-0.5, -0.25, 1}: c = 0.9 m + 0.1 g = {-0.0455, -0.02725, 0.1}: sign {-1, -1, +1};
  //   w = {0.899 * 0.999 + 0.1, -1.898 * 0.999 + 0.1, 0.4995 * 0.999 - 0.1}.
  void lionByHand() {
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {1.0f, -2.0f, 0.5f}, {3});
    Lion opt(LionHyper{0.9f, 0.99f, 0.01f}, DType::F32);
    std::vector<Parameter*> ps{&p};
    std::vector<float> g{0.5f, -0.25f, 0.0f};
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.1f, 1);
    opt.step(*be, ps);
    std::vector<float> w = download_f32(*be, p.master), m = download_f32(*be, p.m);
    QVERIFY(close(w[0], 0.899) && close(w[1], -1.898) && close(w[2], 0.4995));
    QVERIFY(close(m[0], 0.005) && close(m[1], -0.0025) && m[2] == 0.0f);
    QCOMPARE(p.m.category(), MemCategory::Optimizer);
    g = {-0.5f, -0.25f, 1.0f};
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.1f, 2);
    opt.step(*be, ps);
    w = download_f32(*be, p.master);
    QVERIFY(close(w[0], 0.899 * 0.999 + 0.1) && close(w[1], -1.898 * 0.999 + 0.1) && close(w[2], 0.4995 * 0.999 - 0.1));
  }

  // bf16 momentum: stored rounded (RNE) after every step, 2 bytes a parameter.
  void lionBf16State() {
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {1.0f, 1.0f}, {2});
    Lion opt(LionHyper{0.9f, 0.99f, 0.0f}, DType::BF16);
    std::vector<Parameter*> ps{&p};
    const std::vector<float> g{0.3f, -0.7f};
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.01f, 1);
    opt.step(*be, ps);
    QCOMPARE(p.m.dtype(), DType::BF16);
    const std::vector<float> m = download_f32(*be, p.m);
    QCOMPARE(m[0], round_to(DType::BF16, (1.0f - 0.99f) * 0.3f));
    QCOMPARE(m[1], round_to(DType::BF16, (1.0f - 0.99f) * -0.7f));
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), int64_t{4});
  }

  // From zero state, step 1 uses the fp32 m, v: the weights equal AdamW's first step exactly
  // (w = w (1 - lr wd) - lr g / (|g| + eps)); then m is stored as codes of m / max|m| and the
  // absmax. Step 2 dequantizes: m = map[code] absmax, and the update uses those.
  void adamw8bitByHand() {
    auto be = create_backend("cpu");
    const std::vector<float> w0{1.0f, -2.0f, 0.5f, 0.25f};
    Parameter p = make_param(*be, w0, {4});
    AdamW8bit opt(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.01f}, 256, false);
    std::vector<Parameter*> ps{&p};
    std::vector<float> g{0.5f, -0.25f, 0.125f, -1.0f};
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.1f, 1);
    opt.step(*be, ps);
    std::vector<float> w = download_f32(*be, p.master);
    for (size_t i = 0; i < 4; ++i) QVERIFY(close(w[i], w0[i] * 0.999 - 0.1 * (g[i] > 0 ? 1 : -1), 1e-6));
    // Saved state: m_code at the parameter's offsets, absmax at the start of its range.
    auto st = opt.save_state(*be, ps);
    QCOMPARE(st.size(), size_t{4});
    const DynamicMap& sm = dynamic_map_signed();
    const DynamicMap& um = dynamic_map_unsigned();
    const float m_abs = (1.0f - 0.9f) * 1.0f, v_abs = (1.0f - 0.999f) * 1.0f;
    QVERIFY(close(st["m_absmax"][0], m_abs) && close(st["v_absmax"][0], v_abs));
    QCOMPARE(st["m_code"][3], 0.0f);    // m = -max: the most negative code
    QCOMPARE(st["v_code"][3], 255.0f);  // v = max: 1
    QCOMPARE(st["m_code"][0], float(dynamic_quantize(sm, 0.05f / 0.1f)));
    QCOMPARE(st["v_code"][1], float(dynamic_quantize(um, 0.0625f)));
    // Step 2 with g = 0: m = 0.9 map[code] absmax, v = 0.999 map[code] absmax.
    g.assign(4, 0.0f);
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.1f, 2);
    opt.step(*be, ps);
    const std::vector<float> w2 = download_f32(*be, p.master);
    for (size_t i = 0; i < 4; ++i) {
      const double m = 0.9 * sm[static_cast<size_t>(st["m_code"][i])] * st["m_absmax"][0];
      const double v = 0.999 * um[static_cast<size_t>(st["v_code"][i])] * st["v_absmax"][0];
      const double want = w[i] * 0.999 - (0.1 / (1 - 0.81)) * m / (std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + 1e-8);
      QVERIFY2(close(w2[i], want, 1e-5), qPrintable(QString("w[%1] %2, expected %3").arg(i).arg(w2[i]).arg(want)));
    }
  }

  // Over 40 steps of a noisy quadratic, 8-bit AdamW stays close to AdamW (blocks of 256 over
  // 1000 elements: 4 blocks, the last short), and stable_embedding keeps an embedding in fp32.
  void adamw8bitTracksAdamw() {
    auto be = create_backend("cpu");
    const std::vector<float> w0 = random_vector(1000, 5);
    Parameter a = make_param(*be, w0, {1000}), b = make_param(*be, w0, {1000}), e = make_param(*be, w0, {10, 100});
    e.embedding = true;
    AdamW ref(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.0f});
    AdamW8bit q(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.0f}, 256, true);
    std::vector<Parameter*> pa{&a}, pb{&b, &e};
    for (int t = 1; t <= 40; ++t) {
      const std::vector<float> w = download_f32(*be, a.master), noise = random_vector(1000, 50 + t, -0.1f, 0.1f);
      std::vector<float> g(1000);
      for (size_t i = 0; i < g.size(); ++i) g[i] = w[i] + noise[i];  // d/dw of w^2 / 2, noisy
      for (Parameter* p : {&a, &b, &e}) be->upload(p->grad, g.data(), DType::F32);
      set_scalars(*be, 0.01f, t);
      ref.step(*be, pa);
      q.step(*be, pb);
    }
    const std::vector<float> wa = download_f32(*be, a.master), wb = download_f32(*be, b.master),
                             we = download_f32(*be, e.master);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < wa.size(); ++i) diff += (wa[i] - wb[i]) * (wa[i] - wb[i]), norm += wa[i] * wa[i];
    QVERIFY2(std::sqrt(diff / norm) < 0.02, qPrintable(QString("relative difference %1").arg(std::sqrt(diff / norm))));
    QCOMPARE(we, wa);  // the stable embedding: exactly AdamW
    QVERIFY(e.m.defined() && !b.m.defined());
  }

  // A [2, 2] matrix at t = 1 (beta2_1 = 0): g = [[1, 2], [3, 4]], u = g^2: row = [2.5, 12.5],
  // col = [5, 10], mean(row) = 7.5; v_hat = row_i col_j / 7.5 = [[5/3, 10/3], [25/3, 50/3]];
  // U = g / sqrt(v_hat) = [0.774597, 1.095445, 1.039230, 0.979796], RMS 0.979796 < 1: no clip;
  // w = 1 - 0.1 U.
  void adafactorByHand() {
    auto be = create_backend("cpu");
    Parameter p = make_param(*be, {1.0f, 1.0f, 1.0f, 1.0f}, {2, 2});
    Adafactor opt(AdafactorHyper{});
    std::vector<Parameter*> ps{&p};
    const std::vector<float> g{1.0f, 2.0f, 3.0f, 4.0f};
    be->upload(p.grad, g.data(), DType::F32);
    set_scalars(*be, 0.1f, 1);
    opt.step(*be, ps);
    const std::vector<float> w = download_f32(*be, p.master);
    const double U[4] = {0.774597, 1.095445, 1.039230, 0.979796};
    for (int i = 0; i < 4; ++i) QVERIFY2(close(w[i], 1.0 - 0.1 * U[i], 1e-6), qPrintable(QString::number(w[i], 'g', 9)));
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), int64_t{4 * (2 + 2)});
    auto st = opt.save_state(*be, ps);
    QCOMPARE(st["v"], (std::vector<float>{2.5f, 12.5f, 5.0f, 10.0f}));
  }

  // Several steps against double: a factored [6, 5] matrix and a vector, with and without beta1,
  // relative step size and weight decay; an update with RMS > 1 is clipped.
  void adafactorSeveralSteps_data() {
    QTest::addColumn<double>("beta1");
    QTest::addColumn<bool>("relative");
    QTest::newRow("plain") << 0.0 << false;
    QTest::newRow("beta1") << 0.9 << false;
    QTest::newRow("relative") << 0.0 << true;
  }
  void adafactorSeveralSteps() {
    QFETCH(double, beta1);
    QFETCH(bool, relative);
    auto be = create_backend("cpu");
    const std::vector<float> w0 = random_vector(30, 7), v0 = random_vector(5, 8);
    Parameter a = make_param(*be, w0, {6, 5}, "a"), b = make_param(*be, v0, {5}, "b");
    AdafactorHyper h;
    h.beta1 = static_cast<float>(beta1);
    h.weight_decay = 0.1f;
    h.relative_step = relative;
    Adafactor opt(h);
    RefAdafactor ra{0.05, beta1, 0.1, relative, 6, 5, {w0.begin(), w0.end()}, std::vector<double>(6), std::vector<double>(5), {}, std::vector<double>(30)};
    RefAdafactor rb{0.05, beta1, 0.1, relative, 1, 5, {v0.begin(), v0.end()}, {}, {}, std::vector<double>(5), std::vector<double>(5)};
    std::vector<Parameter*> ps{&a, &b};
    for (int t = 1; t <= 5; ++t) {
      std::vector<float> ga = random_vector(30, 100 + t), gb = random_vector(5, 200 + t);
      if (t == 3) ga[0] = 40.0f;  // one large gradient: the factored update's RMS exceeds 1 and is clipped
      be->upload(a.grad, ga.data(), DType::F32);
      be->upload(b.grad, gb.data(), DType::F32);
      set_scalars(*be, 0.05f, t);
      opt.step(*be, ps);
      ra.step({ga.begin(), ga.end()});
      rb.step({gb.begin(), gb.end()});
    }
    const std::vector<float> wa = download_f32(*be, a.master), wb = download_f32(*be, b.master);
    for (size_t i = 0; i < wa.size(); ++i) QVERIFY2(close(wa[i], ra.w[i], 1e-5), qPrintable(QString("a[%1]").arg(i)));
    for (size_t i = 0; i < wb.size(); ++i) QVERIFY2(close(wb[i], rb.w[i], 1e-5), qPrintable(QString("b[%1]").arg(i)));
  }

  // save_state then load_state into a fresh optimizer: the next step is bit-identical.
  void stateRoundTrips_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"lion", "adamw8bit", "adafactor"}) QTest::newRow(n) << n;
  }
  void stateRoundTrips() {
    QFETCH(QString, name);
    auto be = create_backend("cpu");
    OptimizerOptions o;
    o.name = name.toStdString();
    o.block_size = 256;
    o.stable_embedding = true;
    o.adafactor_beta1 = 0.9;
    const std::vector<float> w0 = random_vector(600, 9), e0 = random_vector(40, 10);
    Parameter a = make_param(*be, w0, {20, 30}, "a"), e = make_param(*be, e0, {40}, "e");
    Parameter a2 = make_param(*be, w0, {20, 30}, "a"), e2 = make_param(*be, e0, {40}, "e");
    e.embedding = e2.embedding = true;
    auto one = make_optimizer(o), two = make_optimizer(o);
    std::vector<Parameter*> p1{&a, &e}, p2{&a2, &e2};
    QVERIFY(one->save_state(*be, p1).empty());  // before the first step: nothing
    for (int t = 1; t <= 3; ++t) {
      const std::vector<float> ga = random_vector(600, 300 + t), ge = random_vector(40, 400 + t);
      be->upload(a.grad, ga.data(), DType::F32);
      be->upload(e.grad, ge.data(), DType::F32);
      set_scalars(*be, 0.01f, t);
      one->step(*be, p1);
    }
    be->upload(a2.master, download_f32(*be, a.master).data(), DType::F32);
    be->upload(e2.master, download_f32(*be, e.master).data(), DType::F32);
    const auto saved = one->save_state(*be, p1);
    two->load_state(*be, p2, saved);
    QCOMPARE(two->save_state(*be, p2), saved);
    const std::vector<float> ga = random_vector(600, 500), ge = random_vector(40, 501);
    for (Parameter* p : {&a, &a2}) be->upload(p->grad, ga.data(), DType::F32);
    for (Parameter* p : {&e, &e2}) be->upload(p->grad, ge.data(), DType::F32);
    set_scalars(*be, 0.01f, 4);
    one->step(*be, p1);
    two->step(*be, p2);
    QCOMPARE(download_f32(*be, a2.master), download_f32(*be, a.master));
    QCOMPARE(download_f32(*be, e2.master), download_f32(*be, e.master));
    // A bad code is named.
    if (name == "adamw8bit") {
      auto bad = saved;
      bad["m_code"][0] = 3.5f;
      const std::string err = error_of([&] { two->load_state(*be, p2, bad); });
      QVERIFY2(err.find("m_code") != std::string::npos && err.find("0..255") != std::string::npos, err.c_str());
    }
  }

  // The ledger's optimizer bytes after the first step are plan/memory_model.h's formula, for a
  // transformer-like list of matrices and vectors, an embedding among them.
  void ledgerMatchesTheFormula_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("lion_state");
    QTest::addColumn<bool>("stable");
    QTest::addColumn<double>("beta1");
    QTest::newRow("adamw") << "adamw" << "fp32" << false << 0.0;
    QTest::newRow("lion fp32") << "lion" << "fp32" << false << 0.0;
    QTest::newRow("lion bf16") << "lion" << "bf16" << false << 0.0;
    QTest::newRow("adamw8bit") << "adamw8bit" << "fp32" << false << 0.0;
    QTest::newRow("adamw8bit stable") << "adamw8bit" << "fp32" << true << 0.0;
    QTest::newRow("adafactor") << "adafactor" << "fp32" << false << 0.0;
    QTest::newRow("adafactor beta1") << "adafactor" << "fp32" << false << 0.9;
  }
  void ledgerMatchesTheFormula() {
    QFETCH(QString, name);
    QFETCH(QString, lion_state);
    QFETCH(bool, stable);
    QFETCH(double, beta1);
    auto be = create_backend("cpu");
    OptimizerOptions o;
    o.name = name.toStdString();
    o.lion_state = lion_state.toStdString();
    o.stable_embedding = stable;
    o.adafactor_beta1 = beta1;
    std::vector<Parameter> ps;
    ps.reserve(4);
    const std::vector<Shape> shapes{{65, 32}, {96, 32}, {96}, {5000}};
    for (const Shape& s : shapes) ps.push_back(make_param(*be, std::vector<float>(shape_numel(s), 0.5f), s));
    ps[0].embedding = true;
    std::vector<Parameter*> list;
    for (Parameter& p : ps) list.push_back(&p);
    auto opt = make_optimizer(o);
    set_scalars(*be, 0.01f, 1);
    opt->step(*be, list);
    QCOMPARE(be->ledger().current(MemCategory::Optimizer), optimizer_state_bytes(o, param_shape_infos(list)));
  }
};

QTEST_APPLESS_MAIN(TestLeanOptimizers)
#include "test_lean_optimizers.moc"
