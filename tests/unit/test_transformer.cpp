// The character transformer on the CPU: embedding gradients, a whole-model finite-difference
// check on a tiny config, gradient accumulation equivalence, the peer's tensor names, save/load,
// and a short run through the Trainer (run record with validation loss); pipeline stages
// (PipelineSlice) that together are the whole model bit for bit, micro-batches in flight in the
// order of each schedule's table.
// core headers first: optimizer.h has a member named `slots`, which Qt defines as a macro.
#include "backend/cpu_backend.h"
#include "data/text.h"
#include "dist/pipeline_schedule.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "train/run_record.h"
#include "train/trainer.h"
#include "tensor/dtype.h"
#include "train/training_step.h"
#include "util/paths.h"

#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

using namespace trainlab;

namespace {
CharGptConfig tiny_cfg() {
  CharGptConfig c;
  c.vocab = 11;
  c.layers = 2, c.heads = 2, c.dim = 8, c.context = 6;
  return c;
}

Tensor tokens_tensor(CpuBackend& be, const std::vector<int32_t>& v, int64_t B, int64_t T) {
  Tensor t = be.empty({B, T}, DType::I32, MemCategory::Activations);
  be.upload(t, v.data(), DType::I32);
  return t;
}

// Sum of per-token losses (softmax_xent over logits); fills gradients when `grad`.
double loss_sum(CpuBackend& be, CharGpt& m, const Tensor& x, const Tensor& y, bool grad) {
  Tensor logits = m.forward(be, x, grad);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
  be.softmax_xent(logits, y, grad ? &dl : nullptr, 1.0f, stats, false);
  if (grad) m.backward(be, dl, false);
  float st[2];
  be.download(stats, st, DType::F32);
  return st[0];
}

float bf16_round(float v) { return bf16_to_f32(f32_to_bf16(v)); }

std::vector<float> host(CpuBackend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}
// One optimizer step's forwards and backwards of `m` micro-batches (tokens xs[i], labels ys[i])
// through `stages` (a pipeline's, first to last) in the order of `table`'s lists, run in one
// process: a stage's next action runs once its input is there (the previous stage's output, the
// next stage's gradient). Returns the loss sum; the gradients accumulate in each stage.
double run_pipeline(CpuBackend& be, std::vector<std::unique_ptr<CharGpt>>& stages, const dist::PipelineTable& table,
                    const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, float mult) {
  const size_t p = stages.size(), m = xs.size();
  const int64_t B = xs[0].dim(0), T = xs[0].dim(1);
  std::vector<std::vector<Tensor>> act(p, std::vector<Tensor>(m)), grad(p, std::vector<Tensor>(m));
  std::vector<size_t> next(p, 0);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  auto copy_of = [&](const Tensor& t) {
    Tensor c = be.empty(t.shape(), t.dtype(), MemCategory::Activations);
    be.copy(t, c);
    return c;
  };
  bool first_loss = true;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t s = 0; s < p; ++s) {
      if (next[s] == table.actions[s].size()) continue;
      const dist::PipeAction& a = table.actions[s][next[s]];
      const size_t i = static_cast<size_t>(a.micro_batch);
      CharGpt& st = *stages[s];
      if (a.op == dist::PipeOp::Forward) {
        if (s > 0 && !act[s - 1][i].defined()) continue;
        st.select_slot(i);
        Tensor out = st.stage_forward(be, s == 0 ? xs[i] : act[s - 1][i], B, T, true);
        if (s + 1 < p) {
          act[s][i] = copy_of(out);
        } else {
          Tensor dl = be.empty(out.shape(), out.dtype(), MemCategory::Activations);
          be.softmax_xent(out, ys[i], &dl, mult, stats, !first_loss);
          first_loss = false;
          grad[s][i] = dl;
        }
      } else {
        if (!grad[s][i].defined()) continue;
        st.select_slot(i);
        Tensor dx = st.stage_backward(be, grad[s][i], i > 0);
        if (s > 0) grad[s - 1][i] = copy_of(dx);
        st.release_slot(i);
      }
      ++next[s];
      moved = true;
    }
  }
  for (size_t s = 0; s < p; ++s)
    if (next[s] != table.actions[s].size()) return NAN;  // stuck: the lists deadlock
  return host(be, stats)[0];
}

}  // namespace

class TestTransformer : public QObject {
  Q_OBJECT
 private slots:
  void peerNamesAndShapes() {
    CpuBackend be(1);
    CharGptConfig c = CharGptConfig::preset("tiny");
    CharGpt m(be, c, 1);
    QStringList names;
    for (Parameter* p : m.parameters()) names << QString::fromStdString(p->name);
    QCOMPARE(names.first(), QString("tok.weight"));
    QVERIFY(names.contains("blocks.1.qkv.weight"));
    QVERIFY(names.contains("blocks.0.out.bias"));
    QCOMPARE(names.last(), QString("head.weight"));
    QVERIFY(!names.contains("head.bias"));
    QCOMPARE(m.find_parameter("blocks.0.qkv.weight")->shape, (Shape{384, 128}));
    QCOMPARE(m.find_parameter("blocks.0.out.weight")->shape, (Shape{128, 512}));
    QCOMPARE(m.find_parameter("pos.weight")->shape, (Shape{64, 128}));
    // The peer's CharGPT(65, 2, 4, 128, 64) has 2*(4*128 + 12*128*128 + 9*128) + 65*128 + 64*128 + 2*128 + 65*128 parameters.
    QCOMPARE(m.parameter_count(), int64_t(2 * (4 * 128 + 12 * 128 * 128 + 9 * 128) + 65 * 128 + 64 * 128 + 2 * 128 + 65 * 128));
    CharGptConfig p = c;
    p.pad_vocab = true;
    CharGpt mp(be, p, 1);
    QCOMPARE(mp.find_parameter("tok.weight")->shape, (Shape{128, 128}));
    QCOMPARE(mp.find_parameter("head.weight")->shape, (Shape{128, 128}));
  }

  void embeddingGradient() {
    CpuBackend be(1);
    const int64_t V = 5, D = 3, T = 4, B = 2;
    std::vector<float> tok(V * D), pos(T * D), g(B * T * D);
    for (size_t i = 0; i < tok.size(); ++i) tok[i] = 0.1f * i;
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = -0.05f * i;
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * (i % 7) - 0.02f;
    std::vector<int32_t> ix{1, 3, 3, 0, 4, 1, 1, 2};
    Tensor tt = be.empty({V, D}, DType::F32, MemCategory::Weights), tp = be.empty({T, D}, DType::F32, MemCategory::Weights);
    be.upload(tt, tok.data(), DType::F32);
    be.upload(tp, pos.data(), DType::F32);
    Tensor idx = be.empty({B * T}, DType::I32, MemCategory::Activations);
    be.upload(idx, ix.data(), DType::I32);
    Tensor out = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
    be.embedding_forward(tt, tp, idx, T, out);
    auto o = host(be, out);
    for (int64_t i = 0; i < B * T; ++i)
      for (int64_t j = 0; j < D; ++j) QCOMPARE(o[i * D + j], tok[ix[i] * D + j] + pos[(i % T) * D + j]);
    // The objective sum(out * g) is linear: its gradient is exact, check it element by element.
    Tensor dout = be.empty({B * T, D}, DType::F32, MemCategory::Activations);
    be.upload(dout, g.data(), DType::F32);
    Tensor dt = be.empty({V, D}, DType::F32, MemCategory::Gradients), dp = be.empty({T, D}, DType::F32, MemCategory::Gradients);
    be.embedding_backward(dout, idx, T, dt, dp, false);
    auto dtv = host(be, dt), dpv = host(be, dp);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t j = 0; j < D; ++j) {
        double ref = 0;
        for (int64_t i = 0; i < B * T; ++i)
          if (ix[i] == v) ref += g[i * D + j];
        QVERIFY(std::fabs(dtv[v * D + j] - ref) < 1e-6);
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j) {
        double ref = 0;
        for (int64_t b = 0; b < B; ++b) ref += g[(b * T + t) * D + j];
        QVERIFY(std::fabs(dpv[t * D + j] - ref) < 1e-6);
      }
  }

  // The vectorised GELU (erfc and exp polynomials) against libm in double: 1e-6 relative for
  // |x| <= 5; in the far tail (|GELU| < 3e-6) the fp32 exponent argument limits it to 1e-9 absolute.
  void geluMatchesErfForm() {
    CpuBackend be(2);
    const int64_t n = 2401;
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i) xs[i] = -12.0f + 0.01f * static_cast<float>(i);
    Tensor x = be.empty({n}, DType::F32, MemCategory::Activations), y = be.empty({n}, DType::F32, MemCategory::Activations);
    Tensor g = be.empty({n}, DType::F32, MemCategory::Activations), ones = be.empty({n}, DType::F32, MemCategory::Activations);
    be.upload(x, xs.data(), DType::F32);
    be.fill(ones, 1.0f);
    be.gelu_forward(x, y);
    be.gelu_backward(x, ones, g);
    auto yv = host(be, y), gv = host(be, g);
    for (int64_t i = 0; i < n; ++i) {
      const double v = xs[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      const double ref = v * cdf, dref = cdf + v * pdf;
      // fp32 with polynomial erfc/exp: within 1e-5 relative (+1e-7 absolute) whether or not the
      // compiler contracts the polynomial into FMAs (the unoptimised sanitizer build does not).
      QVERIFY2(std::fabs(yv[i] - ref) <= 1e-5 * std::fabs(ref) + 1e-7, qPrintable(QString("gelu(%1)").arg(v)));
      QVERIFY2(std::fabs(gv[i] - dref) <= 1e-5 * std::fabs(dref) + 1e-7, qPrintable(QString("gelu'(%1)").arg(v)));
    }
  }

  // The residual added before the one rounding of a linear layer's output, out of place and in place.
  void fusedResidual() {
    CpuBackend be(1);
    std::mt19937 g(21);
    const int64_t m = 37, k = 24, n = 40;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto vec = [&](int64_t len) {
      std::vector<float> v(static_cast<size_t>(len));
      for (auto& e : v) e = u(g);
      return v;
    };
    auto tensor = [&](Shape s, const std::vector<float>& v, DType dt) {
      Tensor t = be.empty(s, dt, MemCategory::Activations);
      be.upload(t, v.data(), DType::F32);
      return t;
    };
    for (DType dt : {DType::F32, DType::BF16}) {
      Tensor x = tensor({m, k}, vec(m * k), dt), w = tensor({n, k}, vec(n * k), dt), b = tensor({n}, vec(n), dt);
      Tensor r = tensor({m, n}, vec(m * n), dt), y = be.empty({m, n}, dt, MemCategory::Activations);
      Tensor y32 = be.empty({m, n}, DType::F32, MemCategory::Activations);
      be.linear_forward_residual(x, w, &b, r, y, MatmulMode::Native);
      be.linear_forward(x, w, &b, Activation::None, y32, nullptr, MatmulMode::Native);  // fp32: unrounded
      auto yv = host(be, y), pv = host(be, y32), rv = host(be, r);
      for (size_t i = 0; i < yv.size(); ++i) {
        const float want = dt == DType::F32 ? pv[i] + rv[i] : bf16_round(pv[i] + rv[i]);
        QVERIFY2(yv[i] == want, qPrintable(QString("residual element %1: %2 vs %3").arg(i).arg(yv[i]).arg(want)));
      }
      be.linear_forward_residual(x, w, &b, y, y, MatmulMode::Native);  // in place
      auto y2 = host(be, y);
      for (size_t i = 0; i < yv.size(); ++i) {
        const float want = dt == DType::F32 ? pv[i] + yv[i] : bf16_round(pv[i] + yv[i]);
        QVERIFY2(y2[i] == want, "in-place residual");
      }
    }
  }

  void wholeModelFiniteDifferences() {
    CpuBackend be(1);
    CharGpt m(be, tiny_cfg(), 3);
    const int64_t B = 2, T = 6;
    std::mt19937 g(9);
    std::vector<int32_t> xs(B * T), ys(B * T);
    for (auto& v : xs) v = static_cast<int32_t>(g() % 11);
    for (auto& v : ys) v = static_cast<int32_t>(g() % 11);
    Tensor x = tokens_tensor(be, xs, B, T);
    Tensor y = be.empty({B * T}, DType::I32, MemCategory::Activations);
    be.upload(y, ys.data(), DType::I32);
    loss_sum(be, m, x, y, true);
    const float h = 1e-2f;
    int checked = 0;
    for (Parameter* p : m.parameters()) {
      auto grad = host(be, p->grad);
      auto w = host(be, p->master);
      // A few elements of every tensor (all of the small ones).
      const size_t n = w.size(), stride = std::max<size_t>(1, n / 6);
      for (size_t i = 0; i < n; i += stride) {
        auto set = [&](float v) {
          auto c = w;
          c[i] = v;
          be.upload(p->master, c.data(), DType::F32);
        };
        set(w[i] + h);
        const double lp = loss_sum(be, m, x, y, false);
        set(w[i] - h);
        const double lm = loss_sum(be, m, x, y, false);
        set(w[i]);
        const double fd = (lp - lm) / (2 * h);
        QVERIFY2(std::fabs(grad[i] - fd) < 3e-3 + 2e-2 * std::fabs(fd),
                 qPrintable(QString("%1[%2]: analytic %3, finite difference %4")
                                .arg(QString::fromStdString(p->name)).arg(i).arg(grad[i]).arg(fd)));
        ++checked;
      }
    }
    QVERIFY(checked > 100);
  }

  void accumulationEquivalence() {
    // Batch 4 in one micro-batch == 2 micro-batches of 2 (loss scaled by 1/k), to rounding.
    const std::string path = find_resource("data/tinyshakespeare.txt");
    TextCorpus c = load_text_corpus(path, 0.1, 1);
    std::vector<std::vector<float>> grads[2];
    for (int run = 0; run < 2; ++run) {
      CpuBackend be(1);
      CharGptConfig cfg = tiny_cfg();
      cfg.vocab = c.vocab();
      CharGpt m(be, cfg, 5);
      AdamW opt(AdamWHyper{});
      Tensor toks = be.empty({static_cast<int64_t>(c.train.tokens.size())}, DType::I32, MemCategory::Workspace);
      be.upload(toks, c.train.tokens.data(), DType::I32);
      const int64_t T = 6;
      TrainingStep step(be, m, opt, toks, run == 0 ? 4 : 2, T, run == 0 ? 1 : 2);
      std::vector<int32_t> idx;
      for (int64_t w = 0; w < 4; ++w)
        for (int64_t t = 0; t < T; ++t) idx.push_back(static_cast<int32_t>(1000 * w + 17 + t));
      step.set_indices(idx);
      step.forward_backward();
      for (Parameter* p : m.parameters()) grads[run].push_back(host(be, p->grad));
    }
    for (size_t i = 0; i < grads[0].size(); ++i)
      for (size_t j = 0; j < grads[0][i].size(); ++j)
        QVERIFY2(std::fabs(grads[0][i][j] - grads[1][i][j]) < 1e-6 + 1e-4 * std::fabs(grads[0][i][j]), "accumulated gradient");
  }

  // Stages of 3 blocks cut [2, 1] and [1, 1, 1]: each parameter the whole model's, and one step of
  // 4 micro-batches under each schedule (several micro-batches' activations in flight) gives the
  // one-rank accumulated loss and gradients bit for bit, with and without dropout.
  void pipelineStagesAreTheWholeModel_data() {
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("stages");
    QTest::addColumn<double>("dropout");
    QTest::newRow("gpipe 2") << "gpipe" << 2 << 0.0;
    QTest::newRow("1f1b 2") << "1f1b" << 2 << 0.0;
    QTest::newRow("1f1b 3 dropout") << "1f1b" << 3 << 0.2;
    QTest::newRow("gpipe 2 dropout") << "gpipe" << 2 << 0.2;
  }
  void pipelineStagesAreTheWholeModel() {
    QFETCH(QString, schedule);
    QFETCH(int, stages);
    QFETCH(double, dropout);
    CpuBackend be(1);
    CharGptConfig cfg = tiny_cfg();
    cfg.layers = 3;
    cfg.dropout = dropout;
    CharGpt whole(be, cfg, 9);
    const std::vector<std::pair<int64_t, int64_t>> cuts =
        stages == 2 ? std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}}
                    : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {2, 3}};
    std::vector<std::unique_ptr<CharGpt>> parts;
    std::map<std::string, Parameter*> by_name;
    for (Parameter* p : whole.parameters()) by_name[p->name] = p;
    size_t held = 0;
    for (const auto& [first, last] : cuts) {
      parts.push_back(std::make_unique<CharGpt>(be, cfg, 9, TensorParallel{}, PipelineSlice{first, last, first == 0, last == 3}));
      for (Parameter* p : parts.back()->parameters()) {
        QVERIFY2(host(be, p->master) == host(be, by_name.at(p->name)->master), p->name.c_str());
        ++held;
      }
    }
    QCOMPARE(held, by_name.size());
    const int m = 4;
    const int64_t B = 2, T = 6;
    std::mt19937 g(4);
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < m; ++i) {
      std::vector<int32_t> x(B * T), y(B * T);
      for (auto& v : x) v = static_cast<int32_t>(g() % 11);
      for (auto& v : y) v = static_cast<int32_t>(g() % 11);
      xs.push_back(tokens_tensor(be, x, B, T));
      Tensor yt = be.empty({B * T}, DType::I32, MemCategory::Activations);
      be.upload(yt, y.data(), DType::I32);
      ys.push_back(yt);
    }
    const float mult = 1.0f / static_cast<float>(m * B * T);
    for (int step = 0; step < 2; ++step) {  // the second step's dropout masks are new ones
      Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
      for (int i = 0; i < m; ++i) {
        Tensor logits = whole.forward(be, xs[static_cast<size_t>(i)], true);
        Tensor dl = be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
        be.softmax_xent(logits, ys[static_cast<size_t>(i)], &dl, mult, stats, i > 0);
        whole.backward(be, dl, i > 0);
      }
      const auto kind = dist::pipeline_schedule_from_name(schedule.toStdString(), "schedule");
      const double loss = run_pipeline(be, parts, dist::build_schedule(kind, stages, m), xs, ys, mult);
      QCOMPARE(loss, static_cast<double>(host(be, stats)[0]));
      for (auto& part : parts)
        for (Parameter* p : part->parameters())
          QVERIFY2(host(be, p->grad) == host(be, by_name.at(p->name)->grad), (p->name + " gradient").c_str());
    }
  }

  void saveAndLoad() {
    CpuBackend be(1);
    CharGptConfig cfg = tiny_cfg();
    cfg.chars = "abcdefghijk";
    CharGpt a(be, cfg, 7), b(be, cfg, 8);
    const std::string path = QDir::tempPath().toStdString() + "/trainlab_test_chargpt.safetensors";
    save_model_weights(be, a, Config(), path);
    load_model_weights(be, b, path);
    std::vector<int32_t> xs{1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5};
    Tensor x = tokens_tensor(be, xs, 2, 6);
    auto la = host(be, a.forward(be, x, false));
    auto lb = host(be, b.forward(be, x, false));
    QCOMPARE(la, lb);
    std::filesystem::remove(path);
  }

  void trainsThroughTheTrainer() {
    const std::string dir = QDir::tempPath().toStdString() + "/trainlab_test_chargpt_run";
    std::filesystem::remove_all(dir);
    Config c;
    c.set("model.name", "char-gpt");
    c.set("model.layers", "1");
    c.set("model.dim", "32");
    c.set("model.heads", "2");
    c.set("model.context", "16");
    c.set("train.batch", "8");
    c.set("train.steps", "30");
    c.set("train.eval_every", "10");
    c.set("train.eval_windows", "16");
    c.set("optim.lr", "0.003");
    c.set("device.name", "cpu");
    c.set("run.out", dir);
    Trainer t(c);
    RunSummary s = t.run();
    QCOMPARE(QString::fromStdString(s.status), QString("completed"));
    QVERIFY(s.test_loss < std::log(65.0));  // learnt something in 30 steps
    LoadedRun r = load_run(dir);
    QCOMPARE(int(r.steps.size()), 30);
    QVERIFY(r.steps[9].val_loss.has_value());
    QVERIFY(!r.steps[8].val_loss.has_value());
    QVERIFY(r.steps[0].mem_predicted.by_category[static_cast<size_t>(MemCategory::Activations)] > 0);
    QVERIFY(std::filesystem::exists(dir + "/model.safetensors"));
    std::filesystem::remove_all(dir);
  }
};

QTEST_APPLESS_MAIN(TestTransformer)
#include "test_transformer.moc"
