#include "trainer_worker.h"

#include <QCoreApplication>
#include <algorithm>
#include <new>

#include "rank_launch.h"

#include "util/error.h"

namespace trainlab::app {

void TrainerWorker::post(const TrainerCommand& c, quint64 run) {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_launched) {  // a run over several ranks: only a stop reaches its processes
    if (c.kind == TrainerCommand::Kind::Stop && run == m_run)
      m_stop_launched = true;
    else if (c.kind != TrainerCommand::Kind::Stop)
      emit notice("a run over several ranks takes no pause or mid-run change: its ranks would have to apply it "
                  "at the same step");
    return;
  }
  if (run == m_run && m_trainer)
    m_trainer->post(c);
  else if (run > m_run)
    m_early.emplace_back(run, c);
  // else: the run has ended (a Stop or Pause given as it finished); the next run must not see it
}

std::vector<StepMetrics> TrainerWorker::take_pending() {
  std::lock_guard<std::mutex> lock(m_mutex);
  std::vector<StepMetrics> out;
  out.swap(m_pending);
  m_signal_sent = false;
  return out;
}

void TrainerWorker::run(const QString& config_json, quint64 run, const QString& resume_dir) {
  QString status = "failed", message, run_dir;
  try {
    Config config = Config::from_json(Json::parse(config_json.toStdString()), "the window's settings");
    run_dir = QString::fromStdString(config.get_string("run.out"));
    TrainerCallbacks cb;
    cb.on_step = [this](const StepMetrics& m) {
      bool send = false;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.push_back(m);
        if (!m_signal_sent) send = m_signal_sent = true;
      }
      if (send) emit metrics_ready();
    };
    if (config.get_int("dist.ranks") > 1) {  // several ranks: processes, through the launcher
      if (!resume_dir.isEmpty())
        throw Error("a run over several ranks resumes from the command line: trainlab-cli train --resume DIR");
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_run = run;
        m_launched = true;
        m_stop_launched = false;
        for (auto& [for_run, c] : m_early)
          if (for_run == run && c.kind == TrainerCommand::Kind::Stop) m_stop_launched = true;
        m_early.clear();
      }
      const LaunchedRun r = run_through_launcher(config, cb.on_step, m_stop_launched);
      m_launched = false;
      emit finished(r.status, r.message, r.run_dir);
      return;
    }
    cb.on_notice = [this](const std::string& s) { emit notice(QString::fromStdString(s)); };
    Trainer trainer(config, cb, resume_dir.toStdString());
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_trainer = &trainer;
      m_run = run;
      for (auto& [for_run, c] : m_early)
        if (for_run == run) trainer.post(c);
      m_early.clear();
    }
    try {
      const RunSummary s = trainer.run();
      status = QString::fromStdString(s.status);
      message = QString::fromStdString(s.message);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_trainer = nullptr;
      throw;
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_trainer = nullptr;
    if (!trainer.run_dir().empty()) run_dir = QString::fromStdString(trainer.run_dir());
  } catch (const std::exception& e) {  // an Error's message; no library's raw text (util/error.h)
    message = QString::fromStdString(describe_exception(e, "training"));
  } catch (...) {
    message = "unexpected error (unknown exception)";
  }
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_run = std::max(m_run, run);  // also when setup failed: later commands for it are dropped
    m_early.clear();
  }
  emit finished(status, message, run_dir);
}

TrainingSession::TrainingSession(QObject* parent) : QObject(parent) {
  // No deleteLater on the thread's end: the worker must outlive every queued signal it sent, which
  // the GUI thread may still deliver (and which call take_pending()); ~TrainingSession deletes it.
  m_worker = std::make_unique<TrainerWorker>();
  m_worker->moveToThread(&m_thread);
  TrainerWorker* w = m_worker.get();
  connect(this, &TrainingSession::run_request, w, &TrainerWorker::run, Qt::QueuedConnection);
  connect(w, &TrainerWorker::metrics_ready, this, &TrainingSession::metrics_ready, Qt::QueuedConnection);
  connect(w, &TrainerWorker::notice, this, &TrainingSession::notice, Qt::QueuedConnection);
  connect(
      w, &TrainerWorker::finished, this,
      [this](const QString& st, const QString& msg, const QString& dir) {
        m_running = false;
        m_paused = false;
        emit finished(st, msg, dir);
      },
      Qt::QueuedConnection);
  m_thread.setObjectName("trainer");
  m_thread.start();
}

// The thread has ended when shutdown() returns, so deleting the worker here (it belongs to that
// thread) cannot race with anything it does.
TrainingSession::~TrainingSession() {
  shutdown();
  m_worker.reset();
}

bool TrainingSession::start(const Config& config) {
  if (m_running || m_shut_down) return false;
  m_running = true;
  m_paused = false;
  emit run_request(QString::fromStdString(config.to_json().dump()), ++m_run, QString());
  return true;
}

bool TrainingSession::start_resumed(const Config& config, const QString& dir) {
  if (m_running || m_shut_down || dir.isEmpty()) return false;
  m_running = true;
  m_paused = false;
  emit run_request(QString::fromStdString(config.to_json().dump()), ++m_run, dir);
  return true;
}

void TrainingSession::pause() {
  if (!m_running) return;
  m_paused = true;
  m_worker->post({TrainerCommand::Kind::Pause, {}, {}}, m_run);
}
void TrainingSession::resume() {
  if (!m_running) return;
  m_paused = false;
  m_worker->post({TrainerCommand::Kind::Resume, {}, {}}, m_run);
}
void TrainingSession::stop() {
  if (!m_running) return;
  m_worker->post({TrainerCommand::Kind::Stop, {}, {}}, m_run);
}
void TrainingSession::set(const std::string& key, const Json& value) {
  if (!m_running) return;
  m_worker->post({TrainerCommand::Kind::Set, key, value}, m_run);
}

void TrainingSession::shutdown() {
  if (m_shut_down) return;
  m_shut_down = true;
  if (m_running) m_worker->post({TrainerCommand::Kind::Stop, {}, {}}, m_run);
  // Quit from the worker thread's own queue, behind a run request it has not taken yet: a plain
  // quit() could end the thread's loop before that run begins, and the run would leave no record.
  QMetaObject::invokeMethod(m_worker.get(), [thread = &m_thread] { thread->quit(); }, Qt::QueuedConnection);
  m_thread.wait();
  // The worker's last signals (metrics, finished) are queued to this object: deliver them now, while
  // whoever listens still exists, rather than from a later event loop.
  QCoreApplication::sendPostedEvents(this, QEvent::MetaCall);
  m_running = false;
  m_paused = false;
}

}  // namespace trainlab::app
