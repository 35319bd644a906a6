// The trainer on a worker thread. TrainerWorker lives on a QThread and runs one Trainer at a time;
// its step callback appends StepMetrics to a mutex-guarded buffer and sends one queued signal per
// batch of steps (coalesced), so the GUI thread takes them in bulk and is never flooded. Commands
// (pause, resume, stop, set key) are thread-safe and go straight to Trainer::post(). A config with
// dist.ranks > 1 runs as processes through the launcher instead (rank_launch.h), followed through
// its run record.
#pragma once
#include <QObject>
#include <QString>
#include <QThread>
#include <QVector>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "train/trainer.h"

namespace trainlab::app {

class TrainerWorker : public QObject {
  Q_OBJECT
 public:
  // Thread-safe. Commands given before the trainer exists are queued and delivered to it.
  void post(const TrainerCommand& c);
  std::vector<StepMetrics> take_pending();

 public slots:
  void run(const QString& config_json);  // on the worker thread

 signals:
  void metrics_ready();
  void notice(const QString& text);
  // status: completed | stopped | diverged | failed
  void finished(const QString& status, const QString& message, const QString& run_dir);

 private:
  std::mutex m_mutex;
  Trainer* m_trainer = nullptr;
  // A run over several ranks (dist.ranks > 1) runs as processes through the launcher
  // (rank_launch.h); a Stop command sets the flag it polls.
  std::atomic<bool> m_launched{false}, m_stop_launched{false};
  std::vector<TrainerCommand> m_early;
  std::vector<StepMetrics> m_pending;
  bool m_signal_sent = false;
};

// Owned by the GUI thread: starts runs on the worker thread and forwards commands.
class TrainingSession : public QObject {
  Q_OBJECT
 public:
  explicit TrainingSession(QObject* parent = nullptr);
  ~TrainingSession() override;

  // Starts a run (returns false when one is already running).
  bool start(const Config& config);
  bool running() const { return m_running; }
  bool paused() const { return m_paused; }
  void pause();
  void resume();
  void stop();
  void set(const std::string& key, const Json& value);
  std::vector<StepMetrics> take_pending() { return m_worker->take_pending(); }
  // Blocks until the worker finishes (stops a running trainer first). Used on exit.
  void shutdown();

 signals:
  void metrics_ready();
  void notice(const QString& text);
  void finished(const QString& status, const QString& message, const QString& run_dir);
  void run_request(const QString& config_json);

 private:
  QThread m_thread;
  TrainerWorker* m_worker = nullptr;
  bool m_running = false;
  bool m_paused = false;
};

}  // namespace trainlab::app
