#include "trainer_worker.h"

#include <new>

#include "rank_launch.h"

#include "util/error.h"

namespace trainlab::app {

void TrainerWorker::post(const TrainerCommand& c) {
  if (m_launched) {  // a run over several ranks: only a stop reaches its processes
    if (c.kind == TrainerCommand::Kind::Stop)
      m_stop_launched = true;
    else
      emit notice("a run over several ranks takes no pause or mid-run change: its ranks would have to apply it "
                  "at the same step");
    return;
  }
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_trainer)
    m_trainer->post(c);
  else
    m_early.push_back(c);
}

std::vector<StepMetrics> TrainerWorker::take_pending() {
  std::lock_guard<std::mutex> lock(m_mutex);
  std::vector<StepMetrics> out;
  out.swap(m_pending);
  m_signal_sent = false;
  return out;
}

void TrainerWorker::run(const QString& config_json) {
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
      m_launched = true;
      m_stop_launched = false;
      const LaunchedRun r = run_through_launcher(config, cb.on_step, m_stop_launched);
      m_launched = false;
      emit finished(r.status, r.message, r.run_dir);
      return;
    }
    cb.on_notice = [this](const std::string& s) { emit notice(QString::fromStdString(s)); };
    Trainer trainer(config, cb);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_trainer = &trainer;
      for (auto& c : m_early) trainer.post(c);
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
  } catch (const std::bad_alloc&) {
    message = "out of memory: the run needs more memory than the device has. Lower train.batch, the model's "
              "hidden sizes, or choose a 16-bit precision.";
  } catch (const Error& e) {
    message = QString::fromStdString(e.what());
  } catch (const std::exception& e) {
    const QString what = QString::fromLocal8Bit(e.what());
    message = what.contains("out of memory", Qt::CaseInsensitive)
                  ? "out of memory (" + what + "): lower train.batch or the model size, or choose a 16-bit precision."
                  : "unexpected error: " + what;
  } catch (...) {
    message = "unexpected error (unknown exception)";
  }
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_early.clear();
  }
  emit finished(status, message, run_dir);
}

TrainingSession::TrainingSession(QObject* parent) : QObject(parent) {
  m_worker = new TrainerWorker;
  m_worker->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(this, &TrainingSession::run_request, m_worker, &TrainerWorker::run, Qt::QueuedConnection);
  connect(m_worker, &TrainerWorker::metrics_ready, this, &TrainingSession::metrics_ready, Qt::QueuedConnection);
  connect(m_worker, &TrainerWorker::notice, this, &TrainingSession::notice, Qt::QueuedConnection);
  connect(
      m_worker, &TrainerWorker::finished, this,
      [this](const QString& st, const QString& msg, const QString& dir) {
        m_running = false;
        m_paused = false;
        emit finished(st, msg, dir);
      },
      Qt::QueuedConnection);
  m_thread.setObjectName("trainer");
  m_thread.start();
}

TrainingSession::~TrainingSession() { shutdown(); }

bool TrainingSession::start(const Config& config) {
  if (m_running) return false;
  m_running = true;
  m_paused = false;
  emit run_request(QString::fromStdString(config.to_json().dump()));
  return true;
}

void TrainingSession::pause() {
  if (!m_running) return;
  m_paused = true;
  m_worker->post({TrainerCommand::Kind::Pause, {}, {}});
}
void TrainingSession::resume() {
  if (!m_running) return;
  m_paused = false;
  m_worker->post({TrainerCommand::Kind::Resume, {}, {}});
}
void TrainingSession::stop() {
  if (!m_running) return;
  m_worker->post({TrainerCommand::Kind::Stop, {}, {}});
}
void TrainingSession::set(const std::string& key, const Json& value) {
  if (!m_running) return;
  m_worker->post({TrainerCommand::Kind::Set, key, value});
}

void TrainingSession::shutdown() {
  if (!m_thread.isRunning()) return;
  if (m_running) m_worker->post({TrainerCommand::Kind::Stop, {}, {}});
  m_thread.quit();
  m_thread.wait();
}

}  // namespace trainlab::app
