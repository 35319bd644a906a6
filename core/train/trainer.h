// Trainer: the training loop. Builds the backend, data, model and optimizer from a Config, runs
// optimizer steps, evaluates, writes the run record, and reports through callbacks with plain
// value structs. It can run on a worker thread: post() queues commands (pause, resume, stop,
// change a setting) that take effect at the next step boundary, and nothing it does throws
// across that boundary except setup errors from run() itself. With run.checkpoint_every it writes
// checkpoints (train/run_checkpoint.h) every N steps and when stopped; a Trainer given a resume
// folder continues that run from its last checkpoint.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "config/config.h"
#include "train/metrics.h"
#include "train/run_record.h"

namespace trainlab {

struct RunParts;
struct FinetuneOptions;

struct TrainerCallbacks {
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(const std::string&)> on_notice;  // one-line notices (device fallback, ...)
};

struct TrainerCommand {
  enum class Kind { Pause, Resume, Stop, Set } kind;
  std::string key;  // Set: a config key whose schema entry allows mid-run changes
  Json value;
};

class Trainer {
 public:
  explicit Trainer(Config config, TrainerCallbacks callbacks = {});
  // Continues the run in `resume_dir` from its last checkpoint: `config` is resume_config(resume_dir)
  // (train/run_checkpoint.h), with changes only to resume_settable_keys(). run() then checks the
  // checkpoint against it, cuts metrics.jsonl back to the checkpoint's step and appends from there.
  Trainer(Config config, TrainerCallbacks callbacks, std::string resume_dir);
  ~Trainer();

  // Runs to the end (or until stopped or diverged) and returns the summary; the summary is also
  // written to the run record. Throws Error for setup problems (bad data, a run folder that cannot
  // be used under the open mode's rules, unusable device) before any step runs. An Error after
  // that (a write of the record that fails: a full disk, a file size limit) ends the run with
  // status "failed", a message naming the path and the reason, the record written so far kept
  // and a failed summary attempted (the message says when that failed too). The run folder is
  // locked from setup until run() returns.
  RunSummary run();
  // How run() opens the run folder (train/run_record.h: New, Overwrite, Resume); New by default.
  void set_open_mode(RunOpenMode mode) { m_open_mode = mode; }

  // Thread-safe; applied at the next step boundary.
  void post(TrainerCommand c);
  void pause() { post({TrainerCommand::Kind::Pause, {}, {}}); }
  void resume() { post({TrainerCommand::Kind::Resume, {}, {}}); }
  void stop() { post({TrainerCommand::Kind::Stop, {}, {}}); }
  // Stops the run at the next step boundary like stop(), but only sets a lock-free flag: safe to
  // call from a signal handler (SIGINT, SIGTERM, SIGHUP in trainlab-cli), where locking the command
  // queue's mutex could deadlock.
  void request_stop() noexcept { m_stop_requested.store(true); }
  void set(const std::string& key, Json value) { post({TrainerCommand::Kind::Set, key, std::move(value)}); }

  const Config& config() const { return m_config; }
  // The run folder (known once run() has started; empty before).
  std::string run_dir() const;

 private:
  struct State;
  Config m_config;
  TrainerCallbacks m_callbacks;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<TrainerCommand> m_commands;
  std::atomic<bool> m_stop_requested{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "request_stop must be async-signal-safe");
  std::string m_run_dir;
  std::string m_resume_dir;  // empty: a new run
  RunOpenMode m_open_mode = RunOpenMode::New;
  std::unique_ptr<State> m_state;

  // Returns false when the run should stop. Blocks while paused.
  bool drain_commands(std::string& event);
  void apply_setting(const std::string& key, const Json& value, std::string& event);
  // run()'s parts: everything that can fail on bad input (before any step); one optimizer step
  // and its metrics; the compression metrics of a step; the summary, weights and run record.
  void setup();
  void check_adapter_run(const FinetuneOptions& fo) const;
  void calibrate_device();
  StepMetrics train_step(long step, std::string event);
  void compression_metrics();
  double measured_peak(double flops_per_s);
  void finish(RunSummary& sum, long steps, double last_loss);
  // The trainer's parts a checkpoint saves and restores (train/run_checkpoint.h).
  RunParts run_parts();
  // Checkpoints (train/run_checkpoint.h): restores the one of m_resume_dir and opens the record
  // (returns the steps already done); writes one after `steps` steps (a failure is a notice: the
  // run goes on and the previous checkpoint stays).
  long restore_checkpoint(double& last_loss);
  void write_checkpoint(long steps, double last_loss);
  // The summary's fields every ending fills; and the ending of a run that failed with `why`.
  void fill_summary(RunSummary& sum, long steps, double last_loss);
  void fail(RunSummary& sum, long steps, double last_loss, const std::string& why);
};

}  // namespace trainlab
