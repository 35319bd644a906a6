// The planner against the ledger on the CPU (issue 18's acceptance): for the lab's digits MLP and
// the char-gpt tiny preset, every precision (fp32, tf32, bf16, fp16, fp8) and every checkpoint
// policy (off, selective, every-block, every-k with k = 2), a one-step run of the lab's own model
// (train/plan_check.h's check_plan) measures weights, gradients, optimizer state and activations
// with the ledger, and the planner's prediction for that layout (DP = TP = PP = 1, the lab's
// count) must be within 2 % of each. The small and gpt2 presets are test_plan_small.cpp and
// test_plan_gpt2.cpp (slow); the same cases on CUDA are tests/gpu/test_cuda_plan.cpp.
#include <QtTest>

#include "plan_presets.h"

using namespace trainlab;
using namespace trainlab::plan_test;

Q_DECLARE_METATYPE(trainlab::plan_test::PresetCase)

class TestPlanPresets : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  int m_runs = 0;

 private slots:
  void presetWithinTwoPercent_data() {
    QTest::addColumn<PresetCase>("c");
    for (const std::string& p : kPrecisions) {
      PresetCase c{"digits-mlp", p};
      c.batch = 64;
      QTest::newRow(case_name(c).c_str()) << c;
    }
    for (const std::string& p : kPrecisions)
      for (const Policy& pol : kPolicies) {
        PresetCase c{"char-gpt-tiny", p, pol};
        c.batch = 4;
        QTest::newRow(case_name(c).c_str()) << c;
      }
  }
  void presetWithinTwoPercent() {
    QFETCH(PresetCase, c);
    const std::string dir = m_tmp.filePath(QString("run-%1").arg(++m_runs)).toStdString();
    std::string log;
    const std::string bad = check_preset(c, "cpu", dir, 0.02, &log);
    QVERIFY2(bad.empty(), bad.c_str());
  }
};

QTEST_APPLESS_MAIN(TestPlanPresets)
#include "test_plan_presets.moc"
