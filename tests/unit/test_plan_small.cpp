// ctest-labels: slow
// The planner against the ledger for the char-gpt small preset on the CPU (6 layers, width 384,
// 6 heads, a 256-token window, 10.8 M parameters): every precision and every checkpoint policy, one
// step of batch 1 each, within 2 % per category as tests/unit/test_plan_presets.cpp holds digits
// and tiny (about 20 s on 2 idle cores: fp8's products are emulated on the CPU).
#include <QtTest>

#include "plan_presets.h"

using namespace trainlab;
using namespace trainlab::plan_test;

Q_DECLARE_METATYPE(trainlab::plan_test::PresetCase)

class TestPlanSmall : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  int m_runs = 0;

 private slots:
  void smallWithinTwoPercent_data() {
    QTest::addColumn<PresetCase>("c");
    for (const std::string& p : kPrecisions)
      for (const Policy& pol : kPolicies) {
        PresetCase c{"char-gpt-small", p, pol};
        QTest::newRow(case_name(c).c_str()) << c;
      }
  }
  void smallWithinTwoPercent() {
    QFETCH(PresetCase, c);
    const std::string bad = check_preset(c, "cpu", m_tmp.filePath(QString("run-%1").arg(++m_runs)).toStdString(), 0.02);
    QVERIFY2(bad.empty(), bad.c_str());
  }
};

QTEST_APPLESS_MAIN(TestPlanSmall)
#include "test_plan_small.moc"
