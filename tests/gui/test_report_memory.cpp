// The report's memory table after a mid-run change: a digits run switched from fp32 to bf16 at
// step 11 is compared per segment (steps 1-10 against the fp32 prediction, 11-20 against the bf16
// one), so weights, gradients, optimizer state and activations read 100 % in both segments. (The
// table used to compare the peak over the whole run with the final config's prediction: 200 % for
// the weights, 169 % in total.)
#include <QRegularExpression>
#include <QtTest>

#include "gui_support.h"
#include "report.h"

using namespace trainlab::app;

class TestReportMemory : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString m_dir;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_report_memory");
    trainlab::Config c;
    c.set_json("train.steps", int64_t{20});
    c.set_json("train.eval_every", int64_t{10});
    c.set_json("device.name", std::string("cpu"));
    c.set_json("run.save_weights", false);
    m_dir = m_tmp.filePath("switch");
    c.set_json("run.out", m_dir.toStdString());
    trainlab::TrainerCallbacks cb;
    trainlab::Trainer* self = nullptr;
    cb.on_step = [&](const trainlab::StepMetrics& m) {
      if (m.step == 10) self->set("precision.dtype", std::string("bf16"));
    };
    trainlab::Trainer t(c, cb);
    self = &t;
    QCOMPARE(t.run().status, std::string("completed"));
  }

  void segmentsOfTheRun() {
    const RunSeries r = RunSeries::load(m_dir);
    QCOMPARE(r.memory_segments.size(), 2);
    QCOMPARE(r.memory_segments[0].first_step, 1.0);
    QCOMPARE(r.memory_segments[0].last_step, 10.0);
    QCOMPARE(r.memory_segments[1].first_step, 11.0);
    QCOMPARE(r.memory_segments[1].last_step, 20.0);
    QVERIFY(r.memory_segments[1].change.contains("bf16"));
    const size_t w = static_cast<size_t>(trainlab::MemCategory::Weights);
    QCOMPARE(r.memory_segments[0].predicted[w], 2.0 * r.memory_segments[1].predicted[w]);  // fp32, then bf16
  }

  // Every percentage of the four predicted categories is 100 % in the report.
  void reportComparesPerSegment() {
    const QString html = Report::from_dirs({m_dir}).summary_html(false);
    const int at = html.indexOf("Memory by category");
    QVERIFY(at >= 0);
    const QString table = html.mid(at, html.indexOf("</table>", at) - at);
    for (const char* cat : {"weights", "gradients", "optimizer", "activations"}) {
      const int row = table.indexOf(QString("<tr><td>%1</td>").arg(cat));
      QVERIFY2(row >= 0, cat);
      const QString cells = table.mid(row, table.indexOf("</tr>", row) - row);
      const auto it = QRegularExpression("\\(([0-9.]+) %\\)").globalMatch(cells);
      int n = 0;
      for (auto m = it; m.hasNext();) {
        const double pct = m.next().captured(1).toDouble();
        QVERIFY2(pct > 99.9 && pct < 100.1, qPrintable(QString("%1: %2 %").arg(cat).arg(pct)));
        ++n;
      }
      QCOMPARE(n, 2);  // one per segment
    }
    QVERIFY2(table.contains("steps 11&ndash;20 (dtype: fp32 -&gt; bf16)"), qPrintable(table));
  }
};

QTEST_MAIN(TestReportMemory)
#include "test_report_memory.moc"
