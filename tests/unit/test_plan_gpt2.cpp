// ctest-labels: slow
// The planner against the ledger for the char-gpt gpt2 preset on the CPU (12 layers, width 768,
// 12 heads, 85.9 M parameters): one step of batch 1 at the preset's full 1024-token window in fp32
// without checkpointing, and one in bf16 checkpointing every 2 blocks on a 128-token window (the
// same layers, heads and width; a 128-row position embedding), each within 2 % per category as
// tests/unit/test_plan_presets.cpp and test_plan_small.cpp hold the smaller presets for every
// precision and policy. About 35 s on 2 idle cores (the full-length step is 6e11 FLOPs);
// tests/gpu/test_cuda_plan.cpp runs every precision and policy of gpt2 at full length on CUDA.
#include <QtTest>

#include "plan_presets.h"

using namespace trainlab;
using namespace trainlab::plan_test;

Q_DECLARE_METATYPE(trainlab::plan_test::PresetCase)

class TestPlanGpt2 : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  int m_runs = 0;

 private slots:
  void gpt2WithinTwoPercent_data() {
    QTest::addColumn<PresetCase>("c");
    PresetCase full{"char-gpt-gpt2", "fp32", kPolicies[0]};
    QTest::newRow(case_name(full).c_str()) << full;
    PresetCase half{"char-gpt-gpt2", "bf16", kPolicies[3]};
    half.seq = 128;
    QTest::newRow(case_name(half).c_str()) << half;
  }
  void gpt2WithinTwoPercent() {
    QFETCH(PresetCase, c);
    std::string log;
    const std::string bad = check_preset(c, "cpu", m_tmp.filePath(QString("run-%1").arg(++m_runs)).toStdString(), 0.02, &log);
    qInfo("%s", log.c_str());
    QVERIFY2(bad.empty(), bad.c_str());
  }
};

QTEST_APPLESS_MAIN(TestPlanGpt2)
#include "test_plan_gpt2.moc"
