// The trainer on a worker thread. TrainerWorker lives on a QThread and runs one Trainer at a time;
// its step callback appends StepMetrics to a mutex-guarded buffer and sends one queued signal per
// batch of steps (coalesced), so the GUI thread takes them in bulk and is never flooded. Commands
// (pause, resume, stop, set key) are thread-safe and go straight to Trainer::post(); each names the
// run it is for, so one given just as a run ends never reaches the next run. A config with
// dist.ranks > 1 runs as processes through the launcher instead (rank_launch.h), followed through
// its run record.
//
// Lifetimes: TrainingSession owns the worker and deletes it only after the thread has ended, and
// shutdown() stops the run, waits for its record and delivers the worker's last queued signals, so
// nothing the worker sent can reach an object that is gone.
#pragma once
#include <QObject>
#include <QString>
#include <QThread>
#include <QVector>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "train/trainer.h"

namespace trainlab::app {

class TrainerWorker : public QObject {
  Q_OBJECT
 public:
  // Thread-safe. `run` is the number TrainingSession::start gave the run the command is for: a
  // command for a run that has not begun waits for its trainer, one for a run that has ended is
  // dropped.
  void post(const TrainerCommand& c, quint64 run);
  std::vector<StepMetrics> take_pending();

 public slots:
  // On the worker thread. With a resume_dir, continues that run from its checkpoint
  // (config_json is then resume_config(resume_dir)'s, train/run_checkpoint.h).
  void run(const QString& config_json, quint64 run, const QString& resume_dir = {});

 signals:
  void metrics_ready();
  void notice(const QString& text);
  // status: completed | stopped | diverged | failed
  void finished(const QString& status, const QString& message, const QString& run_dir);

 private:
  std::mutex m_mutex;
  Trainer* m_trainer = nullptr;
  quint64 m_run = 0;  // the run begun last (0: none)
  std::vector<std::pair<quint64, TrainerCommand>> m_early;  // for runs not begun yet
  // A run over several ranks (dist.ranks > 1) runs as processes through the launcher
  // (rank_launch.h); a Stop command sets the flag it polls.
  std::atomic<bool> m_launched{false}, m_stop_launched{false};
  std::vector<StepMetrics> m_pending;
  bool m_signal_sent = false;
};

// Owned by the GUI thread: starts runs on the worker thread and forwards commands.
class TrainingSession : public QObject {
  Q_OBJECT
 public:
  explicit TrainingSession(QObject* parent = nullptr);
  ~TrainingSession() override;

  // Starts a run (returns false when one is already running, or after shutdown()).
  bool start(const Config& config);
  // Continues the run in `dir` from its last checkpoint, with config = resume_config(dir) (returns
  // false when a run is already running).
  bool start_resumed(const Config& config, const QString& dir);
  bool running() const { return m_running; }
  bool paused() const { return m_paused; }
  void pause();
  void resume();
  void stop();
  void set(const std::string& key, const Json& value);
  std::vector<StepMetrics> take_pending() { return m_worker->take_pending(); }
  // Used on exit; the session starts no run afterwards. Stops the run (one that was requested but
  // has not begun yet begins, meets the stop at its first step and writes its record), waits until
  // the worker thread has ended, then delivers what the worker queued: when it returns, the
  // run's record is written, finished() has been emitted and running() is false.
  void shutdown();

 signals:
  void metrics_ready();
  void notice(const QString& text);
  void finished(const QString& status, const QString& message, const QString& run_dir);
  void run_request(const QString& config_json, quint64 run, const QString& resume_dir);

 private:
  QThread m_thread;
  std::unique_ptr<TrainerWorker> m_worker;  // after m_thread: deleted first, once the thread ended
  quint64 m_run = 0;                        // the number of the run started last
  bool m_running = false;
  bool m_paused = false;
  bool m_shut_down = false;
};

}  // namespace trainlab::app
