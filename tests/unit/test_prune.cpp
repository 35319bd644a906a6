// Pruning (DOMAIN.md section 5): masks survive AdamW and SGD updates (weight decay and momentum
// included), magnitude masks per layer and global, the cubic schedule's values at its steps, the
// 2:4 pattern, structured pruning == the masked dense model, and the trainer's pruning keys
// (gradual schedule events, prune now mid-run, lottery-ticket rewind).
#include <cmath>
#include <filesystem>
#include <random>

#include "backend/cpu_backend.h"
#include "compress/compression.h"
#include "compress/prune.h"
#include "io/safetensors.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "optim/lean_optimizers.h"
#include "optim/optimizer.h"
#include "train/trainer.h"

// After the core headers: Qt's `slots` macro would clash with Optimizer::slots.
#include <QtTest>

using namespace trainlab;

namespace {
std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}
}  // namespace

class TestPrune : public QObject {
  Q_OBJECT
 private slots:
  void masksSurviveUpdates() {
    for (int opt_kind = 0; opt_kind < 6; ++opt_kind) {
      CpuBackend be(1);
      Mlp mlp(be, {12, 20, 6}, Activation::ReLU, 1);
      auto ps = prunable_parameters(mlp);
      apply_masks(be, ps, magnitude_masks(download_masters(be, ps), 0.7, PruneScope::Layer));
      std::vector<std::vector<float>> masks;
      for (Parameter* p : ps) masks.push_back(host(be, p->mask));
      std::unique_ptr<Optimizer> opt;
      if (opt_kind == 0) opt = std::make_unique<AdamW>(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.5f});
      else if (opt_kind == 1) opt = std::make_unique<Sgd>(SgdHyper{0.9f, 0.1f, false});
      else if (opt_kind == 2) opt = std::make_unique<Sgd>(SgdHyper{0.9f, 0.1f, true});
      else if (opt_kind == 3) opt = std::make_unique<Lion>(LionHyper{0.9f, 0.99f, 0.1f}, DType::F32);
      else if (opt_kind == 4) opt = std::make_unique<AdamW8bit>(AdamWHyper{0.9f, 0.999f, 1e-8f, 0.5f}, 256, false);
      else opt = std::make_unique<Adafactor>(AdafactorHyper{0.9f, 0.1f});
      auto all = mlp.parameters();
      std::mt19937_64 rng(2);
      for (int step = 1; step <= 25; ++step) {
        StepScalars sc;
        sc.lr = 0.05f;
        sc.step = static_cast<float>(step);
        be.set_step_scalars(sc);
        for (Parameter* p : all) {  // large nonzero gradients everywhere, pruned weights included
          std::vector<float> g(static_cast<size_t>(p->numel()));
          for (auto& v : g) v = uniform_pm(rng, 3.0f) + 1.0f;
          be.upload(p->grad, g.data(), DType::F32);
        }
        opt->step(be, all);
        for (size_t i = 0; i < ps.size(); ++i) {
          const auto w = host(be, ps[i]->master);
          for (size_t j = 0; j < w.size(); ++j)
            if (masks[i][j] == 0.0f) QCOMPARE(w[j], 0.0f);
        }
      }
      // The survivors did move.
      const auto w = host(be, ps[0]->master);
      int nonzero = 0;
      for (float v : w) nonzero += v != 0.0f;
      QCOMPARE(nonzero, int(std::lround(0.3 * 12 * 20)));
    }
  }

  void magnitudeMasks() {
    std::vector<std::vector<float>> ws = {{0.1f, -0.5f, 0.3f, 0.0f}, {2.0f, -3.0f, 1.0f, 0.05f, 4.0f, -0.2f, 0.6f, 0.7f}};
    auto m = magnitude_masks(ws, 0.5, PruneScope::Layer);
    QCOMPARE(m[0], (std::vector<float>{0, 1, 1, 0}));
    QCOMPARE(m[1], (std::vector<float>{1, 1, 1, 0, 1, 0, 0, 0}));
    auto g = magnitude_masks(ws, 0.5, PruneScope::Global);  // 6 smallest of 12 go: the small layer empties
    QCOMPARE(g[0], (std::vector<float>{0, 0, 0, 0}));
    QCOMPARE(g[1], (std::vector<float>{1, 1, 1, 0, 1, 0, 1, 1}));
  }

  void cubicSchedule() {
    GradualSchedule s;
    s.start = 100;
    s.interval = 10;
    s.n = 4;
    s.initial = 0.1;
    s.final_sparsity = 0.9;
    QCOMPARE(s.sparsity_at(99), 0.0);
    QCOMPARE(s.sparsity_at(100), 0.1);
    QVERIFY(std::fabs(s.sparsity_at(110) - (0.9 - 0.8 * 0.421875)) < 1e-12);  // (1 - 1/4)^3
    QVERIFY(std::fabs(s.sparsity_at(115) - (0.9 - 0.8 * 0.421875)) < 1e-12);  // held between steps
    QVERIFY(std::fabs(s.sparsity_at(120) - (0.9 - 0.8 * 0.125)) < 1e-12);
    QVERIFY(std::fabs(s.sparsity_at(130) - (0.9 - 0.8 * 0.015625)) < 1e-12);
    QCOMPARE(s.sparsity_at(140), 0.9);
    QCOMPARE(s.sparsity_at(1000), 0.9);
    for (long t : {100L, 110L, 120L, 130L, 140L}) QVERIFY(s.is_pruning_step(t));
    for (long t : {99L, 105L, 150L, 90L}) QVERIFY(!s.is_pruning_step(t));
  }

  void twoFourPattern() {
    std::mt19937_64 rng(8);
    const int64_t rows = 6, cols = 32;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (auto& v : w) v = uniform_pm(rng, 1.0f);
    const auto m = mask_2_4(w, rows, cols);
    std::vector<float> pw(w.size());
    for (size_t i = 0; i < w.size(); ++i) pw[i] = w[i] * m[i];
    QVERIFY(is_2_4(pw, rows, cols));
    QVERIFY(!is_2_4(w, rows, cols));
    for (size_t b = 0; b < w.size(); b += 4) {
      int kept = 0;
      float min_kept = 1e9f, max_dropped = 0.0f;
      for (size_t j = b; j < b + 4; ++j) {
        if (m[j] != 0.0f) ++kept, min_kept = std::fmin(min_kept, std::fabs(w[j]));
        else max_dropped = std::fmax(max_dropped, std::fabs(w[j]));
      }
      QCOMPARE(kept, 2);
      QVERIFY(min_kept >= max_dropped);  // the 2 largest of each 4 along the input dimension
    }
  }

  void structuredEqualsMasked() {
    CpuBackend be(1);
    Mlp dense(be, {16, 32, 24, 5}, Activation::ReLU, 5);
    const StructuredPlan plan = plan_structured(be, dense, 0.5);
    QCOMPARE(plan.kept[0].size(), size_t(16));
    QCOMPARE(plan.kept[1].size(), size_t(12));
    auto small = build_structured(be, dense, plan);
    QCOMPARE(small->sizes(), (std::vector<int64_t>{16, 16, 12, 5}));
    apply_structured_masks(be, dense, plan);
    std::mt19937_64 rng(1);
    std::vector<float> hx(40 * 16);
    for (auto& v : hx) v = uniform_pm(rng, 1.0f);
    Tensor x = be.empty({40, 16}, DType::F32, MemCategory::Workspace);
    be.upload(x, hx.data(), DType::F32);
    const auto a = host(be, dense.forward(be, x, false));
    const auto b = host(be, small->forward(be, x, false));
    for (size_t i = 0; i < a.size(); ++i) QVERIFY2(std::fabs(a[i] - b[i]) <= 1e-5f * (1.0f + std::fabs(a[i])), qPrintable(QString::number(i)));
    QVERIFY(small->parameter_count() < dense.parameter_count());
  }

  void sparsityReport() {
    CpuBackend be(1);
    Mlp mlp(be, {8, 16, 4}, Activation::ReLU, 2);
    auto ps = prunable_parameters(mlp);
    apply_masks(be, ps, magnitude_masks(download_masters(be, ps), 0.75, PruneScope::Layer));
    const SparsityReport r = sparsity_report(be, mlp);
    QCOMPARE(r.layers.size(), size_t(2));
    QCOMPARE(r.layers[0].zeros, int64_t(96));
    QCOMPARE(r.layers[1].zeros, int64_t(48));
    QCOMPARE(r.sparsity(), 0.75);
    QCOMPARE(r.dense_bytes, int64_t((8 * 16 + 16 + 16 * 4 + 4) * 4));
    QCOMPARE(r.bitmap_bytes, int64_t(16 + 32 * 4 + 8 + 16 * 4 + (16 + 4) * 4));
  }

  // Through the trainer: the gradual schedule's events and final sparsity, prune now mid-run,
  // and lottery-ticket rewinding.
  void trainerPruning() {
    const std::string dir = (std::filesystem::temp_directory_path() / "trainlab_test_prune_run").string();
    std::filesystem::remove_all(dir);
    Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "60");
    c.set("model.name", "mlp");
    c.set("model.hidden", "[32]");
    c.set("run.out", dir);
    c.set("prune.method", "gradual");
    c.set("prune.start_step", "10");
    c.set("prune.interval", "5");
    c.set("prune.n_steps", "4");
    c.set("prune.sparsity", "0.8");
    std::vector<std::string> events(61);
    TrainerCallbacks cb;
    cb.on_step = [&](const StepMetrics& m) { events[static_cast<size_t>(m.step)] = m.event; };
    {
      Trainer t(c, cb);
      QCOMPARE(t.run().status, std::string("completed"));
    }
    QVERIFY(events[11].empty());  // t0 = step index 10 (metrics step 11): s_i = 0 prunes nothing
    QVERIFY2(events[16].find("gradual") != std::string::npos, events[16].c_str());  // 0.8 (1 - 0.75^3) = 46.25%
    QVERIFY(events[16].find("46.") != std::string::npos);
    QVERIFY(events[31].find("80.0%") != std::string::npos);
    QVERIFY(events[12].empty());
    CpuBackend be(1);
    auto m = load_model_file(be, dir + "/model.safetensors");
    const SparsityReport r = sparsity_report(be, *m);
    for (const auto& l : r.layers) QCOMPARE(l.zeros, std::llround(0.8 * static_cast<double>(l.numel)));

    // prune now, mid-run (each run into a fresh folder: a finished run's folder is refused)
    std::filesystem::remove_all(dir);
    c.set("prune.method", "none");
    Trainer* tp = nullptr;
    cb.on_step = [&](const StepMetrics& mm) {
      events[static_cast<size_t>(mm.step)] = mm.event;
      if (mm.step == 30) tp->set("prune.now", Json(0.5));
    };
    {
      Trainer t(c, cb);
      t.set_open_mode(RunOpenMode::Overwrite);  // the same folder, replacing the first run
      tp = &t;
      QCOMPARE(t.run().status, std::string("completed"));
    }
    QVERIFY2(events[31].find("prune now") != std::string::npos, events[31].c_str());
    m = load_model_file(be, dir + "/model.safetensors");
    QCOMPARE(sparsity_report(be, *m).sparsity(), 0.5);

    // lottery ticket: the survivors are back at their initial values right after the prune
    c.set("prune.method", "magnitude");
    c.set("prune.start_step", "30");
    c.set("prune.rewind", "true");
    c.set("prune.sparsity", "0.6");
    c.set("train.steps", "31");  // the prune happens before step index 30, then one update
    c.set("optim.lr", "1e-12");  // ... which moves nothing measurable
    c.set("optim.weight_decay", "0");
    std::filesystem::remove_all(dir);
    {
      Trainer t(c);
      t.set_open_mode(RunOpenMode::Overwrite);
      QCOMPARE(t.run().status, std::string("completed"));
    }
    Mlp init(be, {64, 32, 10}, Activation::ReLU, 1);  // the seeded initialisation (train.seed = 1)
    m = load_model_file(be, dir + "/model.safetensors");
    auto ip = init.parameters(), mp = m->parameters();
    for (size_t i = 0; i < ip.size(); ++i) {
      const auto a = host(be, ip[i]->master), b = host(be, mp[i]->master);
      for (size_t j = 0; j < a.size(); ++j)
        if (b[j] != 0.0f) QVERIFY(std::fabs(a[j] - b[j]) < 1e-6f);
    }
    std::filesystem::remove_all(dir);
  }

  // Dense vs 2:4-masked vs structurally pruned: only the smaller dense model is faster.
  void speedMeasurement() {
    CpuBackend be(1);
    Mlp dense(be, {64, 256, 256, 10}, Activation::ReLU, 1);
    const double t_dense = time_forward_ms(be, dense, 1024, 9);
    auto small = build_structured(be, dense, plan_structured(be, dense, 0.75));
    const double t_small = time_forward_ms(be, *small, 1024, 9);
    QVERIFY(t_dense > 0.0 && t_small > 0.0);
    QVERIFY2(t_small < t_dense, qPrintable(QString("%1 vs %2 ms").arg(t_small).arg(t_dense)));
  }
};

QTEST_APPLESS_MAIN(TestPrune)
#include "test_prune.moc"
