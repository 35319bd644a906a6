// Plain value structs the trainer reports (to the CLI, the app's worker thread and the run
// record), and their JSON forms as written to metrics.jsonl and summary.json.
#pragma once
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/calibration.h"
#include "config/config.h"
#include "train/system_monitor.h"

namespace trainlab {

struct MemoryBytes {
  std::array<int64_t, kMemCategoryCount> by_category{};
  int64_t total() const;
  Json to_json() const;
};

// One rank's figures of a step of a run over several ranks (core/dist): host-clock seconds split
// into compute, exposed communication (waits for gradient and parameter collectives after the
// work that overlaps them) and waiting (the per-step host collectives, where ranks wait for the
// slowest), the bytes it sent (ring model, dist/communicator.h), and its own memory ledger.
// A pipeline stage's part of a rank's step (dist.pp > 1; train/pipeline_executor.h), milliseconds:
// computing forwards and backwards, waiting for received activations and gradients, the rest
// (posting sends, copies, the last wait for the sends), the measured bubble (1 - compute / step of
// the stage) beside the schedule's idle fraction at unit costs (dist::simulate) and its closed form
// (dist::pipeline_bubble).
struct RankPipelineMetrics {
  int stage = 0;
  double forward_ms = 0, backward_ms = 0, recv_wait_ms = 0, other_ms = 0;
  double bubble = 0, simulated_bubble = 0, formula_bubble = 0;
  Json to_json() const;
  static RankPipelineMetrics from_json(const Json& j);
};

struct RankStepMetrics {
  int rank = 0;
  double step_ms = 0.0, compute_ms = 0.0, comm_ms = 0.0, wait_ms = 0.0;
  int64_t bytes_sent = 0;
  MemoryBytes mem_current, mem_peak;
  MemoryBytes mem_predicted;  // plan/memory_model.h's predict_rank_memory for this rank
  std::optional<RankPipelineMetrics> pipeline;  // "pipeline" (only in a pipelined run)
  Json to_json() const;
  static RankStepMetrics from_json(const Json& j);
};

struct StepMetrics {
  long step = 0;         // optimizer step, from 1
  long total_steps = 0;
  double epoch = 0.0;    // fractional epochs completed
  // NaN (written as null: no value) when the step could not compute it: a diverged step's loss is
  // not finite, and then its accuracy (over NaN or infinite logits) means nothing either.
  double loss = 0.0;     // mean training loss of the step's samples
  double train_accuracy = 0.0;
  double lr = 0.0;
  double loss_scale = 1.0;
  long skipped_steps = 0;
  bool skipped = false;  // this step's update was skipped (fp16 overflow)
  double samples_per_s = 0.0;
  double step_ms = 0.0;
  double wall_s = 0.0;
  // Model FLOPs utilisation against the device's measured peak of the format (backend/calibration.h;
  // the datasheet's where calibration is off), and against the datasheet (GPUs that have one).
  double mfu = 0.0;
  double mfu_datasheet = 0.0;
  std::string precision;
  MemoryBytes mem_current, mem_peak, mem_predicted;
  int64_t device_used_bytes = 0, device_total_bytes = 0, runtime_context_bytes = 0;
  std::optional<double> val_loss, val_accuracy;
  // Compression, present only when pruning or QAT is configured (or was switched on mid-run):
  // sparsity = % of the prunable weights that are masked to zero (all layers together);
  // bits_per_weight = the QAT bits of the quantized weights (their mean when layers differ),
  // else the bits of the compute format that stores the weights (32, 16).
  std::optional<double> sparsity, bits_per_weight;
  std::optional<double> grad_norm;  // with optim.clip_norm: the gradient's global L2 norm before clipping
  std::optional<SystemSample> system;  // CPU / GPU utilisation and more, on about one step a second
  std::string event;      // marker label when a setting changed at this step
  std::vector<KernelTime> kernel_times;
  // The device's measured roofs (peak FLOP/s per precision, bandwidth) on the first line of a run
  // and on lines with kernel times: what the roofline places the kernels against.
  std::optional<Calibration> roofline;
  std::vector<RankStepMetrics> ranks;  // runs over several ranks: every rank's, in rank order
  Json to_json() const;
  // The inverse of to_json, for lines read back from metrics.jsonl. A missing field takes its
  // default and null a number's "no value" (NaN); a line without a whole-number "step", or with a
  // field of the wrong type or out of range, throws Error naming the field.
  static StepMetrics from_json(const Json& j);
};

// A run's per-rank time split over its steps (every rank's RankStepMetrics, added up), kept by the
// trainer for summary.json and rebuilt from metrics.jsonl by the app's readers. A run's first step
// (its warm-up: allocations, the first collectives) is left out; a resumed run adds the steps it
// trained after the resume. Means are per step.
//   compute fraction of a rank = compute / step time (its exposed communication and waiting the rest)
//   efficiency_estimate = sum of every rank's compute / sum of every rank's step time: the scaling
//     efficiency the run would have against one rank if one rank computed the whole global batch N
//     times as long as a rank computes its 1/N (no communication, no imbalance). An estimate from
//     one run; `trainlab-cli bench --case scaling --ranks N` measures it (docs/DISTRIBUTED.md).
struct RankTimeTotals {
  int rank = 0;
  long steps = 0;
  double step_ms = 0.0, compute_ms = 0.0, comm_ms = 0.0, wait_ms = 0.0, bytes_sent = 0.0;  // sums
};
struct DistTimeTotals {
  std::vector<RankTimeTotals> ranks;  // in rank order
  // Adds a step's ranks (a step without ranks, or the run's step 1, adds nothing).
  void add(const StepMetrics& m);
  long steps() const { return ranks.empty() ? 0 : ranks.front().steps; }
  // NaN before any step was added.
  double efficiency_estimate() const;
  // {"steps", "efficiency_estimate", "ranks": [{rank, step_ms, compute_ms, comm_ms, wait_ms,
  // bytes_sent} as means per step]}; null before any step was added.
  Json to_json() const;
};

struct RunSummary {
  std::string status = "completed";  // completed | stopped | diverged | failed
  std::string message;
  long steps = 0;
  double epochs = 0.0;
  int64_t params = 0;
  // NaN, written as null (no value), where the run could not compute one: no finite training loss,
  // no test evaluation (a diverged or failed run).
  double final_train_loss = std::nan("");
  double test_accuracy = std::nan("");
  double test_loss = std::nan("");
  double samples_per_s = 0.0;
  double wall_s = 0.0;
  long skipped_steps = 0;
  MemoryBytes peak_bytes;
  std::string device, precision, run_dir;
  int ranks = 1;             // ranks that trained (core/dist); the figures above are rank 0's
  std::string dist_strategy; // dist.strategy when ranks > 1
  std::string dist_layout;   // dist_layout_text (config/dist_options.h) when ranks > 1
  DistTimeTotals dist_times; // ranks > 1: summary.json's "dist_times"
  Json to_json() const;
};

}  // namespace trainlab
