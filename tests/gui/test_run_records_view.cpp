// The window's readers of run records (issue 16): a diverged run's missing test metrics read "no
// value" in the runs table and the report (never 0), a hostile summary.json does not take the runs
// table down, the lines the reader skipped in metrics.jsonl reach the message bar and the report
// (every other row kept), and starting a run into a folder that holds one asks first.
#include <QApplication>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QtTest>
#include <fstream>
#include <sstream>

#include "gui_support.h"
#include "main_window.h"
#include "report.h"
#include "train/run_record.h"

using namespace trainlab::app;

namespace {

QString read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

void write_all(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(bytes);
}

// The runs table's text in column `header` of the row of `dir`.
QString cell(RunsPanel* runs, const QString& dir, const QString& header) {
  QTableWidget* t = runs->table();
  for (int c = 0; c < t->columnCount(); ++c) {
    if (t->horizontalHeaderItem(c)->text() != header) continue;
    for (int r = 0; r < t->rowCount(); ++r)
      if (t->item(r, c) && t->item(r, c)->data(Qt::UserRole).toString() == dir) return t->item(r, c)->text();
  }
  return "(no cell)";
}

// Answers the next modal message box with `button` (when one opens within 10 s); sets *seen.
void answer_next_dialog(QMessageBox::StandardButton button, bool* seen) {
  auto* timer = new QTimer;
  auto* tries = new int(0);
  QObject::connect(timer, &QTimer::timeout, [=] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      *seen = true;
      box->button(button)->click();
    } else if (++*tries < 200) {
      return;
    }
    timer->stop();
    timer->deleteLater();
    delete tries;
  });
  timer->start(50);
}

}  // namespace

class TestRunRecordsView : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString root() const { return m_tmp.filePath("runs"); }

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_run_records_view"); }

  void divergedRunShowsNoValue() {
    trainlab::Config c;
    c.set("device.name", "cpu");
    c.set("train.steps", "300");
    c.set("optim.name", "sgd");
    c.set("optim.lr", "10");  // the top of optim.lr's range: diverges
    const QString dir = QDir(root()).absoluteFilePath("diverged");
    c.set("run.out", dir.toStdString());
    trainlab::Trainer t(c);
    QCOMPARE(t.run().status, std::string("diverged"));
    RunsPanel runs;
    runs.set_root(root());
    QCOMPARE(cell(&runs, dir, "Test acc"), QString("no value"));
    QCOMPARE(cell(&runs, dir, "Test loss"), QString("no value"));
    const Report report = Report::from_dirs({dir});
    const QString html = report.summary_html(false);
    QVERIFY2(html.contains("no value") && !html.contains("0.00 %"), qPrintable(html.left(3000)));
    report.write(m_tmp.filePath("diverged.csv"));
    const QStringList rows = read_all(m_tmp.filePath("diverged.csv")).split('\n', Qt::SkipEmptyParts);
    QVERIFY2(!rows.last().contains("nan") && rows.last().contains(",,"), qPrintable(rows.last()));
  }

  void hostileSummaryKeepsTheTable() {
    const QString dir = gui_test::make_run(root(), "hostile", "fp32", 5);
    write_all(dir + "/summary.json", R"({"status": 7, "steps": 5, "test_accuracy": "high", "peak_bytes": []})");
    RunsPanel runs;
    runs.set_root(root());
    QCOMPARE(cell(&runs, dir, "Test acc"), QString("no value"));
    QCOMPARE(cell(&runs, dir, "Steps"), QString("5"));
    QTableWidget* t = runs.table();
    QString tip;
    for (int r = 0; r < t->rowCount(); ++r)
      if (t->item(r, 1) && t->item(r, 1)->data(Qt::UserRole).toString() == dir) tip = t->item(r, 1)->toolTip();
    QVERIFY2(tip.contains("field 'test_accuracy': expected a number or null; ignored"), qPrintable(tip));
    QVERIFY(Report::from_dirs({dir}).summary_html(false).contains("no value"));
  }

  void skippedLinesReachTheUser() {
    const QString dir = gui_test::make_run(root(), "bad-line", "fp32", 6);
    // The steps are in steps.bin; metrics.jsonl has the lines that carry more (step 1's first).
    QStringList lines = read_all(dir + "/metrics.jsonl").split('\n', Qt::SkipEmptyParts);
    QVERIFY(!lines.isEmpty());
    lines.insert(1, "{\"step\": 3, \"loss\": ???");
    write_all(dir + "/metrics.jsonl", (lines.join('\n') + '\n').toUtf8());
    const QString warning = dir + "/metrics.jsonl line 2: not valid JSON; skipped";
    MainWindow w(root());
    w.reopen(dir);
    QCOMPARE(w.message_kind(), QString("warning"));
    QVERIFY2(w.message_text().contains(warning), qPrintable(w.message_text()));
    QCOMPARE(w.primary_run()->size(), 6);
    const Report report = Report::from_dirs({dir});
    QCOMPARE(report.warnings(), QStringList{warning});
    QVERIFY(report.summary_html(false).contains(warning.toHtmlEscaped()));
  }

  void overwriteAsksFirst() {
    const QString dir = gui_test::make_run(root(), "reused", "fp32", 3);
    const QString before = read_all(dir + "/metrics.jsonl");
    MainWindow w(root());
    qobject_cast<QSpinBox*>(w.form()->editor("train.steps"))->setValue(4);
    qobject_cast<QLineEdit*>(w.form()->editor("run.out"))->setText(dir);
    bool asked = false;
    answer_next_dialog(QMessageBox::Cancel, &asked);
    QVERIFY(!w.start_run());
    QVERIFY(asked);
    QCOMPARE(read_all(dir + "/metrics.jsonl"), before);
    asked = false;
    answer_next_dialog(QMessageBox::Yes, &asked);
    QVERIFY(w.start_run());
    QVERIFY(asked);
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(w.live_run()->status(), QString("completed"));
    QCOMPARE(trainlab::load_run(dir.toStdString()).steps.size(), size_t(4));
  }
};

QTEST_MAIN(TestRunRecordsView)
#include "test_run_records_view.moc"
