// DistributedRun: the trainer's side of a run over several ranks (core/dist), kept out of the
// trainer's loop so that the loop calls it at a few fixed points:
//
//   DistributedRun(config)      where this process stands (the launcher's environment), the dist.*
//                               options, and the device this rank takes (cuda: its local rank's GPU)
//   connect(be, config, batch)  the world communicator and its process groups, then the checks
//                               every rank makes alike: the same config on every rank (a hash), a
//                               batch that splits over them
//   attach(be, model, step, ..) the DataParallel driver (DDP or ZeRO), the step's share of the batch
//   local_indices(idx, k)       this rank's part of the step's global batch
//   step(...)                   forward and backward, the reduction, the update (replaces the one-rank step)
//   sum(stats), keep_going(go)  the step's loss sums and the stop decision, agreed over the ranks
//   rank_metrics(...)           every rank's times, bytes and memory, for rank 0's record
//   finish_training()           every rank holds the whole model again
//   sharded(), root_text(...)   checkpoints: ZeRO's shards, the run folder rank 0 chose
//
// With one rank (no launcher, or one rank launched) none of this does anything: the run is the
// one-rank run, bit for bit. Only rank 0 writes the run record and prints.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "config/config.h"
#include "config/dist_options.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "dist/launch.h"
#include "dist/process_groups.h"
#include "dist/tensor_group.h"
#include "optim/loss_scaler.h"
#include "train/metrics.h"
#include "train/pipeline_executor.h"
#include "train/training_step.h"

namespace trainlab {

// Gradient clipping (optim.clip_norm): `sum_squares` is the sum of the squares of the whole
// gradient as stored (every rank's, in a run over several), so its norm as the optimizer sees it
// is sqrt(sum_squares) * sc.grad_unscale. Above `clip`, grad_unscale is scaled by clip / (norm +
// 1e-6) (PyTorch's clip_grad_norm_) and the scalars are set again. Returns the norm before.
double clip_gradient(Backend& be, StepScalars& sc, double sum_squares, double clip);

// dist.pp, dist.schedule, dist.virtual_stages, dist.stage_layers and the micro-batches
// (train.micro_batches or train.accumulate) against the model and `ranks` ranks: throws
// dist::CollectiveError naming the keys and values (dist.pp above model.layers, a stage_layers list
// of the wrong length, with a zero entry or the wrong sum, interleaved with model.layers not a
// multiple of dist.pp x dist.virtual_stages or micro-batches not a multiple of dist.pp, a model
// other than char-gpt, dist.tp x dist.pp not dividing the ranks). Returns the schedule's warning ("" for
// none): micro-batches below dist.pp under 1f1b or zb-h1 run, with a bubble that grows.
std::string check_pipeline_layout(const Config& config, const DistOptions& o, int ranks);

class DistributedRun {
 public:
  // Reads the launcher's environment and the dist.* keys; throws Error when dist.ranks disagrees
  // with the launcher or a launcher variable is malformed.
  explicit DistributedRun(const Config& config);
  ~DistributedRun();
  // Ends the data-parallel driver, which hooks the model: called before the model goes.
  void drop_model();

  bool active() const { return m_place.size > 1; }
  int rank() const { return m_place.rank; }
  int ranks() const { return m_place.size; }
  bool is_root() const { return m_place.rank == 0; }
  // Data-parallel replicas (ranks / (dist.tp x dist.pp)) and this rank's place among them
  // (rank = tp_rank + tp (dp_rank + dp pp_rank), dist/process_groups.h).
  int data_ranks() const { return m_place.size / (m_options.tp * m_options.pp); }
  int data_rank() const { return (m_place.rank / m_options.tp) % data_ranks(); }
  // The tensor-parallel group the model splits over (none with dist.tp 1); valid after connect.
  TensorParallel tensor_parallel() const;
  dist::Communicator* tensor_group() const { return m_tensor ? &m_tensor->comm() : nullptr; }
  // Pipeline parallelism (dist.pp > 1 over several ranks): this rank's stage (pp_rank = rank /
  // (tp x data replicas)) and its blocks, from dist.stage_layers or the balanced split.
  bool pipelined() const { return active() && m_options.pp > 1; }
  int stage() const { return m_place.rank / (m_options.tp * data_ranks()); }
  PipelineSlice pipeline_slice(const Config& config) const;
  // The executor of this stage's schedule (valid after attach with pipelined()), else null.
  PipelineExecutor* pipeline() const { return m_exec.get(); }
  // Collective: an evaluation's loss and accuracy, which only the last stage computed, on every
  // rank (no-op without a pipeline).
  void pipeline_result(double& loss, double& accuracy);
  // Collective over the world (pipelined runs): step `step`'s line of pipeline.jsonl
  // (train/pipeline_record.h), every stage's measured actions; on rank 0, null elsewhere.
  Json pipeline_timeline(long step);
  const DistOptions& options() const { return m_options; }
  // The device name this rank uses for the configured one (dist::rank_device).
  std::string device(const std::string& configured) const;

  // Collective. Throws CollectiveError when the ranks' configs differ or `batch` (the global
  // micro-batch) does not divide by the ranks.
  void connect(Backend& be, const Config& config, int64_t batch);
  // What connect chose that the user should hear of (empty: nothing), for rank 0 to show.
  // (Also the pipeline schedule's warning: train.micro_batches below dist.pp under 1f1b.)
  std::string notice() const {
    return m_notice + (m_notice.empty() || m_pipeline_warning.empty() ? "" : "\n") + m_pipeline_warning;
  }
  // This rank's samples of each micro-batch of `batch` (the ranks of a tensor-parallel group share them).
  int64_t local_batch(int64_t batch) const { return batch / data_ranks(); }
  // Collective. The data-parallel driver for `model`, which `step` trains; `compressing` (QAT,
  // pruning, distillation) needs every weight on every rank, which only ddp keeps.
  void attach(Backend& be, Model& model, TrainingStep& step, bool compressing);

  std::vector<int32_t> local_indices(const std::vector<int32_t>& global, int micro_batches) const;
  // One optimizer step of this rank (forward and backward of its micro-batches, the reduction,
  // the loss scaler's global check, clipping to `clip_norm` by the global norm (> 0; `sc` are the
  // step's scalars, `grad_norm` receives the norm), the update). Returns whether the update was
  // applied.
  bool step(Backend& be, TrainingStep& step, Optimizer& opt, LossScaler& scaler, int micro_batches, double clip_norm,
            StepScalars& sc, std::optional<double>& grad_norm);
  // Sums over the ranks (a step's loss and accuracy sums).
  void sum(std::span<double> v);
  // Whether every rank goes on (false as soon as one rank stops).
  bool keep_going(bool go);
  // Every rank's figures of a step of `step_s` seconds, with each rank's own predicted memory
  // (`predicted`: this rank's), empty with one rank.
  std::vector<RankStepMetrics> rank_metrics(double step_s, const MemorySnapshot& mem,
                                            const std::array<int64_t, kMemCategoryCount>& predicted);
  void finish_training();
  // Collective over the tensor-parallel group: the whole model (every parameter's master values
  // gathered from the group's shards) as a one-rank model on `be`; with a pipeline, over the world:
  // every stage's parameters gathered into the whole model on rank 0 (null on the other ranks);
  // null without either.
  std::unique_ptr<Model> whole_model(Backend& be, Model& model);
  // The data-parallel driver when it shards the masters and optimizer state (ZeRO), else null:
  // checkpoints then go by shard (train/run_shards.h).
  dist::DataParallel* sharded() const;
  // Collective: rank 0's `text` on every rank (`text` itself with one rank).
  std::string root_text(const std::string& text);

 private:
  dist::LaunchInfo m_place;
  DistOptions m_options;
  std::unique_ptr<dist::ProcessGroups> m_groups;  // ranks = dist.tp x data replicas x dist.pp
  std::unique_ptr<dist::CommTensorGroup> m_tensor;  // the model's tensor-parallel collectives (tp > 1)
  std::unique_ptr<dist::DataParallel> m_dp;
  std::unique_ptr<PipelineExecutor> m_exec;  // dist.pp > 1: this stage's schedule
  double m_simulated_bubble = 0, m_formula_bubble = 0;  // the schedule's idle fraction (unit costs)
  int64_t m_tp_bytes_at_take = 0;
  std::string m_notice;  // connect's word for the user (dist.transport auto chose MPI staging)
  std::string m_pipeline_warning;  // the schedule's note (pipeline_warning), "" for none
};

}  // namespace trainlab
