// The trainer on a worker thread. TrainerWorker lives on a QThread and runs one Trainer at a time;
// its step callback appends StepMetrics to a mutex-guarded buffer and sends one queued signal per
// batch of steps (coalesced), so the GUI thread takes them in bulk and is never flooded. Commands
// (pause, resume, stop, set key) are thread-safe and go straight to Trainer::post().
#pragma once
#include <QObject>
#include <QString>
#include <QThread>
#include <QVector>
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
  // On the worker thread. With a resume_dir, continues that run from its checkpoint
  // (config_json is then resume_config(resume_dir)'s, train/run_checkpoint.h).
  void run(const QString& config_json, const QString& resume_dir = {});

 signals:
  void metrics_ready();
  void notice(const QString& text);
  // status: completed | stopped | diverged | failed
  void finished(const QString& status, const QString& message, const QString& run_dir);

 private:
  std::mutex m_mutex;
  Trainer* m_trainer = nullptr;
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
  // Blocks until the worker finishes (stops a running trainer first). Used on exit.
  void shutdown();

 signals:
  void metrics_ready();
  void notice(const QString& text);
  void finished(const QString& status, const QString& message, const QString& run_dir);
  void run_request(const QString& config_json, const QString& resume_dir);

 private:
  QThread m_thread;
  TrainerWorker* m_worker = nullptr;
  bool m_running = false;
  bool m_paused = false;
};

}  // namespace trainlab::app
