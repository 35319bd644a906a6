// Resume in the runs table: enabled only for a stopped or interrupted run that has a checkpoint
// (run.checkpoint_every), it continues the run through the same worker as Start, and the finished
// run has every step once with the losses of an uninterrupted run.
#include <QTableWidget>
#include <QToolButton>
#include <QtTest>
#include <string>

#include "gui_support.h"
#include "main_window.h"
#include "train/run_checkpoint.h"
#include "train/run_record.h"

using namespace trainlab::app;

namespace {

// A digits run of 60 steps with a checkpoint every 10, into `dir`, stopped after `stop_at` steps
// (0: not stopped).
trainlab::RunSummary digits_run(const QString& dir, long stop_at, long checkpoint_every = 10) {
  trainlab::Config c;
  c.set_json("device.name", std::string("cpu"));
  c.set_json("train.steps", static_cast<int64_t>(60));
  c.set_json("train.eval_every", static_cast<int64_t>(20));
  c.set_json("run.save_weights", false);
  c.set_json("run.checkpoint_every", static_cast<int64_t>(checkpoint_every));
  c.set_json("run.out", dir.toStdString());
  trainlab::Trainer* self = nullptr;
  trainlab::TrainerCallbacks cb;
  cb.on_step = [&](const trainlab::StepMetrics& m) {
    if (m.step == stop_at) self->stop();
  };
  trainlab::Trainer t(c, cb);
  self = &t;
  return t.run();
}

// Every step of the record as the readers see it (steps.bin merged with metrics.jsonl).
std::vector<trainlab::Json> metrics(const QString& dir) {
  std::vector<trainlab::Json> out;
  for (const trainlab::StepMetrics& m : trainlab::load_run(dir.toStdString()).steps) out.push_back(m.to_json());
  return out;
}

}  // namespace

class TestResumeRun : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_root, m_stopped, m_completed, m_no_checkpoint, m_reference;

  bool button_enabled_for(MainWindow& w, const QString& dir) {
    w.runs()->table()->clearSelection();
    w.runs()->select_dir(dir);
    return w.runs()->resume_button()->isEnabled();
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_resume_run");
    QVERIFY(m_tmp.isValid());
    m_root = m_tmp.filePath("runs");
    m_stopped = m_root + "/20260101-000000-stopped";
    m_completed = m_root + "/20260101-000100-completed";
    m_no_checkpoint = m_root + "/20260101-000200-no-checkpoint";
    m_reference = m_tmp.filePath("reference");
    QCOMPARE(QString::fromStdString(digits_run(m_stopped, 25).status), QString("stopped"));
    QCOMPARE(QString::fromStdString(digits_run(m_completed, 0).status), QString("completed"));
    QCOMPARE(QString::fromStdString(digits_run(m_no_checkpoint, 25, 0).status), QString("stopped"));
    QCOMPARE(QString::fromStdString(digits_run(m_reference, 0).status), QString("completed"));
  }

  void resumeOnlyWhereACheckpointCanContinue() {
    MainWindow w(m_root);
    QCOMPARE(w.runs()->rows().size(), 3);
    QVERIFY(w.runs()->resume_button());
    QVERIFY(button_enabled_for(w, m_stopped));
    QVERIFY(!button_enabled_for(w, m_completed));     // nothing left to run
    QVERIFY(!button_enabled_for(w, m_no_checkpoint));  // run.checkpoint_every was 0
    QVERIFY(w.runs()->resumable(m_stopped));
    QVERIFY(!w.runs()->resumable(m_completed));
    // Asked anyway (e.g. from code), the window says why and starts nothing.
    QVERIFY(!w.resume_run(m_no_checkpoint));
    QVERIFY(!w.running());
    QVERIFY2(w.message_text().contains("has no checkpoint"), qPrintable(w.message_text()));
  }

  void resumeContinuesTheRun() {
    MainWindow w(m_root);
    w.show();
    w.runs()->table()->clearSelection();
    w.runs()->select_dir(m_stopped);
    QTest::mouseClick(w.runs()->resume_button(), Qt::LeftButton);
    QVERIFY(w.running());
    QVERIFY(!w.start_button()->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    auto run = w.live_run();
    QVERIFY(run);
    QCOMPARE(run->dir, m_stopped);
    QCOMPARE(run->size(), 60);  // the 25 steps kept plus the 35 it ran
    QCOMPARE(run->status(), QString("completed"));
    const auto a = metrics(m_reference), b = metrics(m_stopped);
    QCOMPARE(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      QCOMPARE(b[i].at("step").get<long>(), static_cast<long>(i + 1));
      QCOMPARE(b[i].at("loss").get<double>(), a[i].at("loss").get<double>());
    }
    // The controls hold the run's settings but not its folder: Start makes a new run.
    QCOMPARE(QString::fromStdString(w.form()->value("run.out").get<std::string>()), QString());
    QVERIFY(!button_enabled_for(w, m_stopped));
  }
};

QTEST_MAIN(TestResumeRun)
#include "test_resume_run.moc"
