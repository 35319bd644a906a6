// Compression in the window: a run that prunes (one-shot magnitude, 50 %) with QAT (4 bits)
// reports sparsity and bits per weight on its metrics lines; the "Sparsity and bits" plot appears
// only for such runs and draws them; reports carry the values (HTML table, CSV columns), and for a run
// that switched QAT and pruning on mid-run the table names the switches, not just the start's "none".
#include <QFile>
#include <QtTest>
#include <cmath>
#include <qcustomplot.h>

#include "gui_support.h"
#include "plot_panel.h"
#include "report.h"

using namespace trainlab;
using namespace trainlab::app;

class TestCompressionPlots : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_pruned, m_plain;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_compression_plots");
    QVERIFY(m_tmp.isValid());
    Config c;
    c.set_json("train.steps", int64_t{40});
    c.set_json("train.eval_every", int64_t{20});
    c.set_json("device.name", std::string("cpu"));
    c.set_json("run.save_weights", false);
    c.set_json("prune.method", std::string("magnitude"));
    c.set_json("prune.sparsity", 0.5);
    c.set_json("prune.start_step", int64_t{10});
    c.set_json("quant.mode", std::string("qat"));
    c.set_json("quant.bits", int64_t{4});
    c.set_json("run.name", std::string("pruned"));
    m_pruned = m_tmp.filePath("pruned");
    c.set_json("run.out", m_pruned.toStdString());
    Trainer t(c);
    QCOMPARE(QString::fromStdString(t.run().status), QString("completed"));
    m_plain = gui_test::make_run(m_tmp.path(), "plain", "fp32", 20, "plain");
  }

  // A run started without compression and switched to 4-bit QAT and 50 % pruning at step 11: its
  // compression table read "none" twice beside 50 % and 4 bits (config.json keeps the start values).
  void reportNamesMidRunCompression() {
    Config c;
    c.set_json("train.steps", int64_t{20});
    c.set_json("device.name", std::string("cpu"));
    c.set_json("run.save_weights", false);
    const QString dir = m_tmp.filePath("switched");
    c.set_json("run.out", dir.toStdString());
    TrainerCallbacks cb;
    Trainer* self = nullptr;
    cb.on_step = [&](const StepMetrics& m) {
      if (m.step != 10) return;
      self->set("quant.mode", std::string("qat"));
      self->set("prune.now", 0.5);
    };
    Trainer t(c, cb);
    self = &t;
    QCOMPARE(QString::fromStdString(t.run().status), QString("completed"));
    const QString html = Report::from_dirs({dir}).summary_html(false);
    const int at = html.indexOf("<h2>Compression</h2>");
    QVERIFY(at >= 0);
    const QString table = html.mid(at, html.indexOf("</table>", at) - at);
    QVERIFY2(table.contains("none<br>step 11: prune.now = 0.5"), qPrintable(table));
    QVERIFY2(table.contains("none<br>step 11: quant.mode = qat"), qPrintable(table));
  }

  void metricsCarrySparsityAndBits() {
    const RunSeries r = RunSeries::load(m_pruned);
    QVERIFY(r.has_sparsity());
    QVERIFY(r.has_bits());
    QCOMPARE(r.sparsity.size(), 40);
    QCOMPARE(r.sparsity.front(), 0.0);  // before prune.start_step
    // One-shot pruning of half the linear weights: 50 % from then on (ties may add a few).
    QVERIFY2(std::fabs(r.sparsity.back() - 50.0) < 0.5, qPrintable(QString::number(r.sparsity.back())));
    QCOMPARE(r.bits.back(), 4.0);
    const RunSeries plain = RunSeries::load(m_plain);
    QVERIFY(!plain.has_sparsity());
    QVERIFY(!plain.has_bits());
  }

  void plotAppearsOnlyWhenCompressing() {
    PlotPanel p;
    p.resize(1100, 800);
    p.show();
    auto plain = std::make_shared<RunSeries>(RunSeries::load(m_plain));
    p.set_runs({plain});
    QVERIFY(!p.plot(PlotKind::Compression)->isVisible());
    auto pruned = std::make_shared<RunSeries>(RunSeries::load(m_pruned));
    p.set_runs({pruned});
    QVERIFY(p.plot(PlotKind::Compression)->isVisible());
    QCPGraph* sp = p.graph(PlotKind::Compression, "sparsity %");
    QVERIFY(sp);
    QCOMPARE(sp->dataCount(), 40);
    QVERIFY(std::fabs(sp->data()->at(39)->value - 50.0) < 0.5);
    QCPGraph* bits = p.graph(PlotKind::Compression, "bits/weight");
    QVERIFY(bits);
    QCOMPARE(bits->valueAxis(), p.plot(PlotKind::Compression)->yAxis2);
    QCOMPARE(bits->data()->at(39)->value, 4.0);
    // The pruning step is a marker like any mid-run change.
    QVERIFY(p.marker_count(PlotKind::Compression) >= 1);
  }

  void reportsIncludeCompression() {
    const QString html = m_tmp.filePath("r.html"), csv = m_tmp.filePath("r.csv");
    Report::from_dirs({m_pruned, m_plain}).write(html);
    Report::from_dirs({m_pruned}).write(csv);
    QFile h(html);
    QVERIFY(h.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(h.readAll());
    QVERIFY(text.contains("<h2>Compression</h2>"));
    QVERIFY(text.contains("alt='Sparsity and bits'"));
    const RunSeries r = RunSeries::load(m_pruned);
    QVERIFY2(text.contains(QString::number(r.sparsity.back(), 'f', 2) + " %"), "final sparsity in the table");
    QFile c(csv);
    QVERIFY(c.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(c.readAll()).split('\n', Qt::SkipEmptyParts);
    QVERIFY(lines.front().contains(",sparsity,bits_per_weight,"));
    const QStringList cols = lines.front().split(',');
    const QStringList last = lines.back().split(',');
    QCOMPARE(last[cols.indexOf("bits_per_weight")], QString("4"));
    QVERIFY(std::fabs(last[cols.indexOf("sparsity")].toDouble() - 50.0) < 0.5);
  }
};

QTEST_MAIN(TestCompressionPlots)
#include "test_compression_plots.moc"
