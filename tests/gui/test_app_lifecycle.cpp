// The window survives its user while a run trains: closing it (at many different moments, paused,
// while compressing), cancelling the close, stopping and starting quickly, commands that arrive
// after a run has ended, destroying it, and closing it while the text panel generates. Each close
// must stop the run, leave its record ("stopped", weights kept) and leave nothing of a worker for
// the event loop to touch afterwards.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <QTimer>
#include <QtTest>
#include <memory>

#include "gui_support.h"
#include "main_window.h"
#include "text_panel.h"

using namespace trainlab::app;

namespace {

// Answers the close question ("A run is training. Stop it and quit?") with `button` when it shows,
// from inside its own event loop, as a user would.
class BoxAnswerer {
 public:
  explicit BoxAnswerer(QMessageBox::StandardButton button) {
    m_timer.setInterval(5);
    QObject::connect(&m_timer, &QTimer::timeout, [this, button] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box || !box->button(button)) return;
      ++m_answered;
      box->button(button)->click();
    });
    m_timer.start();
  }
  int answered() const { return m_answered; }

 private:
  QTimer m_timer;
  int m_answered = 0;
};

trainlab::Json read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return trainlab::Json::parse(f.readAll().toStdString(), nullptr, false);
}

// Whether a thread of this process has this name (Linux: /proc/self/task/*/comm).
bool thread_named(const QByteArray& name) {
  for (const QFileInfo& t : QDir("/proc/self/task").entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    QFile f(t.absoluteFilePath() + "/comm");
    if (f.open(QIODevice::ReadOnly) && f.readAll().trimmed() == name) return true;
  }
  return false;
}

QString summary_status(const QString& dir) {
  const trainlab::Json s = read_json(dir + "/summary.json");
  return s.is_object() ? QString::fromStdString(s.value("status", std::string())) : QString("(no summary)");
}

}  // namespace

class TestAppLifecycle : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

  // A digits run on the CPU into `dir` that would train far longer than any test waits.
  static void configure(MainWindow& w, const QString& dir, long steps, bool compress = false) {
    trainlab::Config c = w.form()->config();
    c.set_json("train.steps", static_cast<int64_t>(steps));
    c.set_json("train.eval_every", static_cast<int64_t>(100));
    c.set_json("device.name", std::string("cpu"));
    c.set_json("run.out", dir.toStdString());
    if (compress) {  // gradual pruning and 4-bit QAT: the trainer's compression hooks run every step
      c.set_json("prune.method", std::string("gradual"));
      c.set_json("prune.interval", static_cast<int64_t>(2));
      c.set_json("quant.mode", std::string("qat"));
    }
    w.form()->set_config(c);
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_app_lifecycle");
    QVERIFY(m_tmp.isValid());
  }

  // Closing the window while a run trains asks; "Yes" stops the run at its next step, writes its
  // record as "stopped" with its weights, and only then lets the window go. 20 closes, each at a
  // different moment: before the worker has begun, during setup, between steps, while paused, while
  // pruning and quantizing. Afterwards the event loop runs (as the app's does after a close) and the
  // window is destroyed: nothing the worker sent may reach freed objects.
  void closeWhileTrainingStopsAndKeepsTheRecord() {
    const int moments_ms[] = {0, 0, 1, 2, 3, 5, 8, 12, 20, 30, 45, 60, 80, 100, 130, 170, 220, 300, 400, 600};
    for (int i = 0; i < 20; ++i) {
      const QString dir = m_tmp.filePath(QString("close/%1").arg(i));
      auto w = std::make_unique<MainWindow>(m_tmp.filePath("close"));
      w->show();
      configure(*w, dir, 1000000, i % 5 == 4);
      QVERIFY(w->start_run());
      if (moments_ms[i] > 0) QTest::qWait(moments_ms[i]);
      if (i % 4 == 3) w->toggle_pause();
      BoxAnswerer yes(QMessageBox::Yes);
      const bool closed = w->close();
      const QString where = QString("close %1 after %2 ms").arg(i).arg(moments_ms[i]);
      QVERIFY2(closed, qPrintable(where));
      QVERIFY2(yes.answered() == 1, qPrintable(where + ": the close did not ask"));
      QVERIFY2(!w->running(), qPrintable(where + ": the session still says a run trains"));
      QVERIFY2(summary_status(dir) == "stopped", qPrintable(where + ": " + summary_status(dir)));
      QVERIFY2(QFile::exists(dir + "/model.safetensors"), qPrintable(where + ": no weights"));
      QTest::qWait(30);  // the queued signals of the worker, if any were left
      QVERIFY(!w->running());
      w.reset();
      QTest::qWait(5);
    }
  }

  // "Cancel" keeps the window and the run: it goes on training.
  void cancelledCloseKeepsTraining() {
    const QString dir = m_tmp.filePath("cancel/run");
    MainWindow w(m_tmp.filePath("cancel"));
    w.show();
    configure(w, dir, 1000000);
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() >= 3, 30000);
    {
      BoxAnswerer cancel(QMessageBox::Cancel);
      QVERIFY(!w.close());
      QCOMPARE(cancel.answered(), 1);
    }
    QVERIFY(w.isVisible());
    QVERIFY(w.running());
    const int steps = w.live_run()->size();
    QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() > steps + 3, 30000);
    w.stop_run();
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);
    QCOMPARE(summary_status(dir), QString("stopped"));
  }

  // Stop then start again at once, five times, at different points of a run; a second start while
  // one trains is refused. Every run ends with its own record.
  void stopAndStartQuickly() {
    MainWindow w(m_tmp.filePath("quick"));
    w.show();
    for (int i = 0; i < 5; ++i) {
      const QString dir = m_tmp.filePath(QString("quick/%1").arg(i));
      configure(w, dir, 1000000);
      QVERIFY(w.start_run());
      QVERIFY(!w.start_run());  // starting twice
      QVERIFY(w.running());
      if (i % 2 == 1) QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() >= i, 30000);
      w.stop_run();
      QVERIFY(!w.start_run());  // still stopping
      QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);
      QCOMPARE(summary_status(dir), QString("stopped"));
      QCOMPARE(w.live_run()->dir, dir);
    }
  }

  // A Pause or Stop given after the worker finished a run, but before the window heard of it, must
  // not carry over to the next run: that run would stop at once, or hang paused while the window
  // says it trains.
  void lateCommandsDoNotReachTheNextRun() {
    MainWindow w(m_tmp.filePath("late"));
    w.show();
    const QString first = m_tmp.filePath("late/first");
    configure(w, first, 5);
    QVERIFY(w.start_run());
    // Block the GUI thread (no events) until the worker has written the whole record and returned.
    QElapsedTimer t;
    t.start();
    while (summary_status(first) != "completed" && t.elapsed() < 60000) QThread::msleep(10);
    QCOMPARE(summary_status(first), QString("completed"));
    QThread::msleep(500);
    QVERIFY(w.running());  // the finished signal is still queued
    w.toggle_pause();
    w.stop_run();
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 30000);

    const QString second = m_tmp.filePath("late/second");
    configure(w, second, 40);
    QVERIFY(w.start_run());
    QVERIFY(!w.session()->paused());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QCOMPARE(summary_status(second), QString("completed"));
    QCOMPARE(w.live_run()->size(), 40);
  }

  // Destroying the window (not closing it) while a run trains also stops the run and keeps its
  // record before the window's parts go.
  void destroyWhileTraining() {
    const QString dir = m_tmp.filePath("destroy/run");
    {
      MainWindow w(m_tmp.filePath("destroy"));
      w.show();
      configure(w, dir, 1000000);
      QVERIFY(w.start_run());
      QTRY_VERIFY_WITH_TIMEOUT(w.live_run()->size() >= 2, 30000);
    }
    QCOMPARE(summary_status(dir), QString("stopped"));
    QVERIFY(QFile::exists(dir + "/model.safetensors"));
    QTest::qWait(20);
  }

  // Closing the window while the text panel generates: the generation stops after its token and
  // its thread ends before the window is gone (it must not run on while the app exits); its
  // result finds no panel.
  void closeWhileGeneratingText() {
    trainlab::Config c;
    c.set("model.name", "char-gpt");
    c.set("train.steps", "2");
    c.set("train.batch", "8");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("text/cg");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    auto w = std::make_unique<MainWindow>(m_tmp.filePath("text"));
    w->reopen(dir);
    auto* tokens = w->text_panel()->findChild<QSpinBox*>();
    QVERIFY(tokens);
    tokens->setValue(tokens->maximum());  // 100000 characters: a minute or more on the CPU
    QVERIFY(w->text_panel()->generate());
    QTRY_VERIFY_WITH_TIMEOUT(thread_named("text generation"), 10000);
    QElapsedTimer t;
    t.start();
    w.reset();
    QVERIFY2(t.elapsed() < 5000, qPrintable(QString("the window waited %1 ms for the generation").arg(t.elapsed())));
    // The OS thread is gone at once (no events processed meanwhile); before, it went on for a minute.
    for (int i = 0; i < 50 && thread_named("text generation"); ++i) QThread::msleep(10);
    QVERIFY(!thread_named("text generation"));
    QTest::qWait(20);
  }
};

QTEST_MAIN(TestAppLifecycle)
#include "test_app_lifecycle.moc"
