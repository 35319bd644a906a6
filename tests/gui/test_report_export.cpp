// Report export: PDF (pages, vector plots, the metric values in its text), self-contained HTML
// (embedded plot images, metric values, config differences) and the metrics CSV.
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include "gui_support.h"
#include "main_window.h"
#include "report.h"

using namespace trainlab::app;

class TestReportExport : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_a, m_b;

  QString test_acc_text(const QString& dir) {
    auto r = RunSeries::load(dir);
    return QString::number(100 * r.summary.value("test_accuracy", 0.0), 'f', 2);
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_report_export");
    const QString root = m_tmp.filePath("runs");
    m_a = gui_test::make_run(root, "r1-fp32", "fp32", 80, "alpha");
    m_b = gui_test::make_run(root, "r2-bf16", "bf16", 80, "beta");
  }

  void pdfReport() {
    const QString path = m_tmp.filePath("report.pdf");
    MainWindow w(m_tmp.filePath("runs"));
    QVERIFY(w.export_report({m_a, m_b}, path));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray pdf = f.readAll();
    QVERIFY(pdf.startsWith("%PDF"));
    // Summary page(s), 3 pages of plots (5 plots, two a page), config page(s).
    const int pages = pdf.count("/Type /Page\n") + pdf.count("/Type /Page\r") + pdf.count("/Type /Page ") +
                      pdf.count("/Type /Page/") + pdf.count("/Type /Page>");
    QVERIFY2(pages >= 5, qPrintable(QString("pages: %1").arg(pages)));
    const QString pdftotext = QStandardPaths::findExecutable("pdftotext");
    if (pdftotext.isEmpty()) QSKIP("pdftotext not installed: text content not checked");
    QProcess p;
    p.start(pdftotext, {path, "-"});
    QVERIFY(p.waitForFinished(30000));
    const QString text = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY(text.contains("TrainLab report"));
    QVERIFY(text.contains("alpha"));
    QVERIFY(text.contains("beta"));
    QVERIFY2(text.contains(test_acc_text(m_a)), qPrintable(test_acc_text(m_a)));
    QVERIFY(text.contains("precision.dtype"));
    QVERIFY(text.contains("Memory by category"));
    // Plot text (titles, axis labels) is vector text, not a bitmap.
    QVERIFY(text.contains("Throughput"));
    QVERIFY(text.contains("cross-entropy"));
  }

  void htmlReport() {
    const QString path = m_tmp.filePath("report.html");
    Report::from_dirs({m_a, m_b}).write(path);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(f.readAll());
    QVERIFY(html.startsWith("<!DOCTYPE html>"));
    // Loss, accuracy, throughput, memory: both runs keep one learning rate, which the loss plot's
    // title names instead of a plot of a flat line.
    QCOMPARE(html.count("<img class='plot'"), 4);
    QCOMPARE(html.count("data:image/svg+xml;base64,"), 4);
    QVERIFY(!html.contains("src='http"));  // self-contained
    QVERIFY(html.contains(test_acc_text(m_a) + " %"));
    QVERIFY(html.contains(test_acc_text(m_b) + " %"));
    QVERIFY(html.contains("Config differences"));
    QVERIFY(html.contains("precision.dtype"));
    QVERIFY(html.contains("measured peak"));
    // An embedded plot decodes to SVG.
    const int at = html.indexOf("base64,") + 7;
    const QByteArray svg = QByteArray::fromBase64(html.mid(at, html.indexOf('\'', at) - at).toLatin1());
    QVERIFY(svg.contains("<svg"));
  }

  void csvMetrics() {
    const QString path = m_tmp.filePath("metrics.csv");
    Report::from_dirs({m_a, m_b}).write(path);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly | QIODevice::Text));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 80 + 80);
    QVERIFY(lines[0].startsWith("run,step,epoch,loss"));
    QVERIFY(lines[1].startsWith("\"alpha\",1,"));
  }

  void badExportShowsError() {
    MainWindow w(m_tmp.filePath("runs"));
    QVERIFY(!w.export_report({m_a}, m_tmp.filePath("report.docx")));
    QCOMPARE(w.message_kind(), QString("error"));
    QVERIFY(!w.export_report({m_tmp.filePath("no-such-run")}, m_tmp.filePath("x.pdf")));
    QVERIFY(w.message_text().contains("no-such-run"));
  }
};

QTEST_MAIN(TestReportExport)
#include "test_report_export.moc"
