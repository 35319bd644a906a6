// Optimizer offload on the CPU (optim.offload cpu, optim/offload.h). The CPU backend's host memory
// is its device memory, so nothing is saved, but the path runs: host buffers from empty_host,
// gradients copied down, the update by the wrapped optimizer on CpuBackends of its own (parts on
// threads), weights copied up. What must hold:
//   - each step's loss equals a run without offload within 1e-6 relative (the same fp32 update:
//     in fact bit for bit), for char-gpt tiny in fp32 and bf16 (AdamW) and digits with SGD and Lion;
//   - the ledger: no optimizer bytes, the masters + state + staging as Host, equal to
//     plan/memory_model.h's prediction (which the planner also shows, Host outside the GPU's total);
//   - a checkpointed run resumes to the same losses as one run through;
//   - the combinations it cannot do are refused naming the option: 8-bit AdamW and Adafactor,
//     ZeRO, pruning and QAT, a mid-run precision change; an unknown value names the choices;
//   - trainlab-cli: train --offload cpu runs and says what offload does on the CPU; plan --offload
//     cpu prints the host bytes; --offload gpu is an error.
#include <QtTest>
#include <filesystem>

#include "cli_support.h"
#include "plan/memory_model.h"
#include "plan/planner.h"
#include "test_support.h"
#include "train/plan_check.h"
#include "train/run_checkpoint.h"
#include "train/trainer.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

struct Outcome {
  std::vector<double> losses;
  StepMetrics last;
  std::vector<std::string> notices;
};

int64_t cat(const MemoryBytes& m, MemCategory c) { return m.by_category[static_cast<size_t>(c)]; }

Outcome train(Config c, const std::string& dir) {
  std::filesystem::remove_all(dir);
  c.set("run.out", dir);
  Outcome o;
  TrainerCallbacks cb;
  cb.on_step = [&](const StepMetrics& m) {
    o.losses.push_back(m.loss);
    o.last = m;
  };
  cb.on_notice = [&](const std::string& n) { o.notices.push_back(n); };
  Trainer t(c, cb);
  const RunSummary s = t.run();
  if (s.status != "completed") throw Error("run ended " + s.status);
  return o;
}

Config tiny_gpt(const std::string& precision) {
  Config c;
  c.set("device.name", "cpu");
  c.set("model.name", "char-gpt");
  c.set("model.preset", "tiny");
  c.set("train.batch", "4");
  c.set("train.steps", "8");
  c.set("train.eval_every", "1000");
  c.set("train.seed", "1");
  c.set("precision.dtype", precision);
  c.set("run.save_weights", "false");
  return c;
}

std::string tmp(const std::string& name) { return QDir::tempPath().toStdString() + "/trainlab_offload_" + name; }

void compare_losses(const Outcome& a, const Outcome& b) {
  QCOMPARE(a.losses.size(), b.losses.size());
  QVERIFY(!a.losses.empty());
  for (size_t i = 0; i < a.losses.size(); ++i)
    QVERIFY2(std::fabs(a.losses[i] - b.losses[i]) <= 1e-6 * std::fabs(b.losses[i]),
             qPrintable(QString("step %1: %2 vs %3").arg(i + 1).arg(a.losses[i], 0, 'g', 17).arg(b.losses[i], 0, 'g', 17)));
}

}  // namespace

class TestOffload : public QObject {
  Q_OBJECT
 private slots:
  void charGptMatchesWithoutOffload_data() {
    QTest::addColumn<QString>("precision");
    QTest::newRow("fp32") << "fp32";
    QTest::newRow("bf16") << "bf16";
  }
  void charGptMatchesWithoutOffload() {
    QFETCH(QString, precision);
    const Config base = tiny_gpt(precision.toStdString());
    Config off = base;
    off.set("optim.offload", "cpu");
    const Outcome a = train(base, tmp("base")), b = train(off, tmp("off"));
    compare_losses(b, a);
    // The ledger: the device's optimizer bytes (with the masters in 16-bit) are now Host bytes.
    QCOMPARE(cat(b.last.mem_current, MemCategory::Optimizer), int64_t{0});
    QVERIFY(cat(b.last.mem_current, MemCategory::Host) > cat(a.last.mem_current, MemCategory::Optimizer));
    QCOMPARE(cat(b.last.mem_current, MemCategory::Host), cat(b.last.mem_predicted, MemCategory::Host));
    QCOMPARE(cat(b.last.mem_predicted, MemCategory::Optimizer), int64_t{0});
    QCOMPARE(cat(a.last.mem_current, MemCategory::Host), int64_t{0});
    for (MemCategory c : {MemCategory::Weights, MemCategory::Gradients, MemCategory::Activations})
      QCOMPARE(cat(b.last.mem_current, c), cat(a.last.mem_current, c));
    bool said = false;
    for (const std::string& n : b.notices) said = said || n.find("no memory is saved") != std::string::npos;
    QVERIFY(said);
  }

  void digitsOtherOptimizers_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("precision");
    QTest::newRow("sgd fp32") << "sgd" << "fp32";
    QTest::newRow("lion bf16") << "lion" << "bf16";
    QTest::newRow("adamw fp16") << "adamw" << "fp16";  // loss scaling: skipped steps skip the host update too
  }
  void digitsOtherOptimizers() {
    QFETCH(QString, name);
    QFETCH(QString, precision);
    Config base = digits_config("", 20);
    base.set("optim.name", name.toStdString());
    base.set("precision.dtype", precision.toStdString());
    base.set("run.save_weights", "false");
    Config off = base;
    off.set("optim.offload", "cpu");
    const Outcome a = train(base, tmp("base")), b = train(off, tmp("off"));
    compare_losses(b, a);
    QCOMPARE(cat(b.last.mem_current, MemCategory::Host), cat(b.last.mem_predicted, MemCategory::Host));
  }

  // A checkpoint holds the host state (Optimizer::save_state through the offloaded optimizer's
  // views); the resumed run continues with the same numbers.
  void resumeContinuesTheSameRun() {
    Config c = tiny_gpt("bf16");
    c.set("optim.offload", "cpu");
    c.set("run.checkpoint_every", "4");
    const Outcome whole = train(c, tmp("whole"));
    const std::string dir = tmp("resumed");
    std::filesystem::remove_all(dir);
    c.set("run.out", dir);
    Trainer* self = nullptr;
    TrainerCallbacks stop_at_6;
    stop_at_6.on_step = [&](const StepMetrics& m) {
      if (m.step == 6) self->stop();
    };
    Trainer part(c, stop_at_6);
    self = &part;
    QCOMPARE(part.run().status, std::string("stopped"));
    std::vector<double> rest;
    TrainerCallbacks cb;
    cb.on_step = [&](const StepMetrics& m) { rest.push_back(m.loss); };
    Trainer t(resume_config(dir), cb, dir);
    QCOMPARE(t.run().status, std::string("completed"));
    // From the last checkpoint (a stopped run writes one at its last step): steps 7 and 8.
    QCOMPARE(rest.size(), size_t{2});
    for (size_t i = 0; i < rest.size(); ++i) QCOMPARE(rest[i], whole.losses[6 + i]);
  }

  void refusedCombinations_data() {
    QTest::addColumn<QString>("sets");
    QTest::addColumn<QString>("expected");
    QTest::newRow("adamw8bit") << "optim.name=adamw8bit" << "optim.name adamw8bit is not supported with offload";
    QTest::newRow("adafactor") << "optim.name=adafactor" << "optim.name adafactor is not supported with offload";
    QTest::newRow("zero1") << "dist.strategy=zero1" << "that optim.offload cpu keeps in host memory";
    QTest::newRow("pruning") << "prune.method=magnitude" << "optim.offload cpu does not combine with prune.method";
    QTest::newRow("qat") << "quant.mode=qat" << "optim.offload cpu does not combine with quant.mode qat";
  }
  void refusedCombinations() {
    QFETCH(QString, sets);
    QFETCH(QString, expected);
    std::filesystem::remove_all(tmp("refused"));
    Config c = digits_config(tmp("refused"), 2);
    c.set("optim.offload", "cpu");
    const QString key = sets.section('=', 0, 0), value = sets.section('=', 1);
    c.set(key.toStdString(), value.toStdString());
    const std::string e = error_of([&] { Trainer(c).run(); });
    QVERIFY2(e.find(expected.toStdString()) != std::string::npos, e.c_str());
  }

  void unknownValueNamesTheChoices() {
    Config c;
    const std::string e = error_of([&] { c.set("optim.offload", "gpu"); });
    QVERIFY2(e.find("optim.offload") != std::string::npos && e.find("cpu") != std::string::npos, e.c_str());
  }

  void midRunPrecisionChangeIsRefused() {
    std::filesystem::remove_all(tmp("midrun"));
    Config c = digits_config(tmp("midrun"), 30);
    c.set("optim.offload", "cpu");
    std::vector<std::string> notices;
    TrainerCallbacks cb;
    Trainer* self = nullptr;
    cb.on_step = [&](const StepMetrics& m) {
      if (m.step == 2) self->post({TrainerCommand::Kind::Set, "precision.dtype", Json("bf16")});
    };
    cb.on_notice = [&](const std::string& n) { notices.push_back(n); };
    Trainer t(c, cb);
    self = &t;
    QCOMPARE(t.run().status, std::string("completed"));
    bool refused = false;
    for (const std::string& n : notices)
      refused = refused || n.find("'precision.dtype' cannot change mid-run with optim.offload cpu") != std::string::npos;
    QVERIFY(refused);
  }

  // The planner: masters and state leave the GPU's total for Host; ZeRO is refused with offload.
  void plannerMovesMastersAndStateToHost() {
    PlanSetup s;
    s.model = plan_model_preset("char-gpt-gpt2", "model");
    resolve_plan_setup(s, "bf16", "adamw", "h200");
    const PlanResult on_gpu = plan_layout(s, Layout{});
    s.offload = true;
    const PlanResult off = plan_layout(s, Layout{});
    const int64_t n = on_gpu.params_total;
    auto at = [](const MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; };
    QCOMPARE(at(on_gpu.per_gpu, MemCategory::Optimizer), 12 * n);
    QCOMPARE(at(off.per_gpu, MemCategory::Optimizer), int64_t{0});
    QCOMPARE(at(off.per_gpu, MemCategory::Host), offload_host_bytes(n, 2, 8 * n));
    QCOMPARE(at(off.per_gpu, MemCategory::Host), (4 + 8 + 2 + 2) * n);
    QCOMPARE(off.per_gpu_total, on_gpu.per_gpu_total - 12 * n);
    s.gpus = 2;
    const std::string e = error_of([&] { plan_layout(s, Layout{2, 1, 1, 1}); });
    QVERIFY2(e.find("--offload cpu") != std::string::npos, e.c_str());
  }

  void cli() {
    const std::string dir = tmp("cli");
    std::filesystem::remove_all(dir);
    CliResult r = run_cli({"train", "--device", "cpu", "--steps", "3", "--offload", "cpu", "--out", q(dir)}, 120000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2((r.out + r.err).contains("no memory is saved"), qPrintable(r.out + r.err));
    r = run_cli({"train", "--device", "cpu", "--steps", "3", "--offload", "gpu", "--out", q(dir + "2")}, 60000);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("optim.offload"), qPrintable(r.err));
    r = run_cli({"plan", "--model", "char-gpt-gpt2", "--offload", "cpu"}, 60000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("host (offload)"), qPrintable(r.out));
    r = run_cli({"plan", "--model", "char-gpt-gpt2", "--offload", "disk"}, 60000);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("--offload 'disk': expected none or cpu"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestOffload)
#include "test_offload.moc"
