// Sensitivity and allocation (compress/sensitivity.h, compress/held_out.h): the Pareto-front
// knapsack finds the brute-force optimum of a small table under every kind of budget; on a digits
// MLP trained here, the allocation at 3 bits a weight is at least as accurate on the test split as
// uniform 3-bit per-channel quantization, and at 90% sparsity at least as accurate as uniform 90%
// magnitude pruning; the file `trainlab-cli allocate --out` writes evaluates with `trainlab-cli
// eval` to the reported figures; bad budgets are errors naming them.
// ctest-labels: unit;slow
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "backend/cpu_backend.h"
#include "cli_support.h"
#include "compress/held_out.h"
#include "compress/sensitivity.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "test_support.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace trainlab;
using trainlab::test::digits_config;

namespace {

// A table of three layers of different sizes with made-up losses (baseline 1.0).
SensitivityTable synthetic_table() {
  SensitivityTable t;
  t.options.bits = {2, 3, 4, 8};
  t.options.sparsities = {0.5, 0.9};
  t.options.granularity = QuantGranularity::Channel;
  t.baseline = {1.0, 0.9};
  const int64_t shapes[3][2] = {{8, 16}, {16, 32}, {4, 16}};
  const double bit_loss[3][4] = {{2.0, 1.3, 1.05, 1.0}, {1.2, 1.1, 1.02, 1.0}, {3.0, 1.5, 1.1, 1.0}};
  const double sp_loss[3][2] = {{1.1, 1.6}, {1.01, 1.2}, {1.4, 2.5}};
  for (int l = 0; l < 3; ++l) {
    LayerSensitivity L;
    L.name = "net." + std::to_string(2 * l) + ".weight";
    L.rows = shapes[l][0], L.cols = shapes[l][1];
    for (double v : bit_loss[l]) L.bits.push_back({v, 0.0});
    for (double v : sp_loss[l]) L.sparsity.push_back({v, 0.0});
    t.layers.push_back(L);
  }
  t.other_bytes = 100;
  return t;
}

}  // namespace

class TestAllocation : public QObject {
  Q_OBJECT
 private slots:
  void knapsackIsTheBruteForceOptimum() {
    const SensitivityTable t = synthetic_table();
    const int64_t n[3] = {128, 512, 64};
    // Bits: every combination of the 4 widths; the best predicted loss within 3 bits a weight.
    for (double budget : {2.0, 2.5, 3.0, 3.7, 5.0, 8.0}) {
      double best = 1e9;
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
          for (int c = 0; c < 4; ++c) {
            const int bits[3] = {t.options.bits[a], t.options.bits[b], t.options.bits[c]};
            if (bits[0] * n[0] + bits[1] * n[1] + bits[2] * n[2] > budget * 704 + 1e-9) continue;
            best = std::min(best, 1.0 + (t.layers[0].bits[a].loss - 1) + (t.layers[1].bits[b].loss - 1) +
                                      (t.layers[2].bits[c].loss - 1));
          }
      double predicted = 0;
      const auto choice = allocate_layers(t, {BudgetKind::Bits, budget}, &predicted);
      QCOMPARE(int(choice.size()), 3);
      QVERIFY2(std::fabs(predicted - best) < 1e-12, qPrintable(QString("budget %1: %2 vs %3").arg(budget).arg(predicted).arg(best)));
      int64_t used = 0;
      for (int l = 0; l < 3; ++l) used += choice[l].bits * n[l];
      QVERIFY(used <= budget * 704 + 1e-9);
    }
    // Sparsity: dense, 50% or 90% a layer; 80% overall keeps at most 141 of 704 weights.
    double predicted = 0;
    const auto sp = allocate_layers(t, {BudgetKind::Sparsity, 0.8}, &predicted);
    int64_t kept = 0;
    for (int l = 0; l < 3; ++l) kept += n[l] - std::llround(sp[l].sparsity * n[l]);
    QVERIFY(kept <= 704 - (std::llround(0.8 * 128) + std::llround(0.8 * 512) + std::llround(0.8 * 64)));
    QCOMPARE(sp[1].sparsity, 0.9);  // the big, insensitive layer carries the budget
    // Bytes: below the cheapest allocation is an error naming the budget; uniform is the widest that fits.
    QVERIFY_THROWS_EXCEPTION(Error, allocate_layers(t, {BudgetKind::Bytes, 150}));
    const auto u = uniform_allocation(t, {BudgetKind::Bytes, 100 + 704 + 2 * 28});  // 8 bits + fp16 scales
    QCOMPARE(u[0].bits, 8);
    QCOMPARE(uniform_allocation(t, {BudgetKind::Bits, 3.7})[2].bits, 3);
  }

  void digitsAllocationBeatsUniform() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    Trainer(digits_config(dir, 0, 10)).run();
    const std::string path = dir + "/model.safetensors";
    const SafeTensorsFile f = read_safetensors(path);
    const Config c = weights_config(f, path);
    CpuBackend be(1);
    for (const AllocationBudget& budget : {AllocationBudget{BudgetKind::Bits, 3.0}, AllocationBudget{BudgetKind::Sparsity, 0.9}}) {
      AllocateRequest r;
      r.budget = budget;
      r.out = tmp.path().toStdString() + (budget.kind == BudgetKind::Bits ? "/bits.safetensors" : "/sparse.safetensors");
      const nlohmann::json j = allocation_report(be, f, path, c, r);
      const double allocated = j.at("allocated_test").at("accuracy"), uniform = j.at("uniform_test").at("accuracy");
      const double kept = j.at("kept") == "uniform" ? uniform : allocated;
      qInfo("%s: allocated %.4f (held-out %.4f), uniform %.4f (held-out %.4f), fp32 %.4f, kept %s", budget.label().c_str(),
            allocated, j.at("allocated_held_out").at("accuracy").get<double>(), uniform,
            j.at("uniform_held_out").at("accuracy").get<double>(), j.at("fp32_test").at("accuracy").get<double>(),
            j.at("kept").get<std::string>().c_str());
      QVERIFY2(kept >= uniform, qPrintable(QString("%1: %2 < uniform %3").arg(budget.label().c_str()).arg(kept).arg(uniform)));
      if (budget.kind == BudgetKind::Bits) QVERIFY(j.at("average_bits").get<double>() <= 3.0 + 1e-9);
      else QVERIFY(j.at("sparsity").get<double>() >= 0.9 - 1e-3);
      // The file evaluates with `trainlab-cli eval` to the kept allocation's test figures.
      const auto e = trainlab::test::run_cli({"eval", "--weights", QString::fromStdString(r.out), "--device", "cpu"}, 120000);
      QVERIFY2(e.code == 0, qPrintable(trainlab::test::describe(e)));
      const auto ej = nlohmann::json::parse(e.out.toStdString());
      QVERIFY(std::fabs(ej.at("test_accuracy").get<double>() - kept) < 1e-9);
    }
    // The CLI: sensitivity prints a table; allocate's errors name the budget.
    const QString w = QString::fromStdString(path);
    const auto s = trainlab::test::run_cli({"sensitivity", "--weights", w, "--bits", "2,4,8", "--sparsities", "0.5,0.9"}, 120000);
    QVERIFY2(s.code == 0 && s.out.contains("net.0.weight") && s.out.contains("4-bit"), qPrintable(trainlab::test::describe(s)));
    const QString out = tmp.filePath("x.safetensors");
    const auto none = trainlab::test::run_cli({"allocate", "--weights", w, "--out", out}, 60000);
    QVERIFY(none.code != 0 && none.err.contains("needs one budget"));
    const auto two = trainlab::test::run_cli({"allocate", "--weights", w, "--out", out, "--budget-bits", "3", "--budget-sparsity", "0.5"}, 60000);
    QVERIFY(two.code != 0 && two.err.contains("excludes"));
    const auto low = trainlab::test::run_cli({"allocate", "--weights", w, "--out", out, "--budget-bits", "1"}, 60000);
    QVERIFY(low.code != 0 && low.err.contains("--budget-bits"));
    const auto tiny = trainlab::test::run_cli({"allocate", "--weights", w, "--out", out, "--budget-bytes", "1000"}, 60000);
    QVERIFY2(tiny.code != 0 && tiny.err.contains("below what the cheapest options take"), qPrintable(tiny.err));
    const auto badbits = trainlab::test::run_cli({"sensitivity", "--weights", w, "--bits", "2,9"}, 60000);
    QVERIFY(badbits.code != 0 && badbits.err.contains("--bits"));
  }
};

QTEST_APPLESS_MAIN(TestAllocation)
#include "test_allocation.moc"
