// DataParallel: the seam between the trainer and several ranks. The trainer calls it at fixed
// points of a step; the model calls it through ModelHooks (nn/model.h) while it runs:
//
//   begin_step(k)            before the step's k micro-batches (ZeRO-2/3: the gradient buffer returns)
//   grads_ready(first)       from the model's backward: a bucket whose gradients are all final is
//                            reduced at once, while the backward goes on (only in the k-th
//                            backward: with gradient accumulation the ranks reduce once a step)
//   before/after_unit        from the model: ZeRO-3 gathers a unit's parameters just in time (and
//                            prefetches the next one), and frees them after
//   finish_backward()        waits for every bucket (the exposed communication)
//   grads_finite()           the loss scaler's inf/NaN check, the same answer on every rank
//   grad_sum_squares()       clipping's global norm (squared), the same on every rank
//   optimizer_step(opt)      DDP: every parameter; ZeRO: this rank's shard, then the all-gather
//   finish_training()        every rank holds the whole model again (final evaluation, weights file)
//
// Buckets (PyTorch DDP's reducer) are ranges of the flat gradient buffer (nn/flat_params.h), made
// from the last parameter backwards (the order backward finishes them), each about dist.bucket_mb
// and never splitting a parameter. A ZeRO shard is one contiguous range of the flat layout
// (Megatron-LM's distributed optimizer): rank r owns [r S, (r+1) S) of the N elements, S = ceil(N/W)
// (the last one shorter), dist/shard.h's split, the one the planner predicts memory with; a
// bucket's reduce-scatter gives each rank the part of the bucket inside its shard.
//
// Memory (the rank's ledger): DDP keeps everything whole. ZeRO-1: the optimizer state of the shard
// (m, v), plus the reduced gradient shard as a communication buffer. ZeRO-2: the gradients are
// the shard between steps (the whole-model gradient buffer exists only from begin_step to
// finish_backward). ZeRO-3: the weights are the shard too; a unit's gathered parameters are a
// communication buffer for the time the unit runs. In 16-bit runs the fp32 masters are the
// shard from stage 1 on (optimizer memory, DeepSpeed's partitioned fp32 weights): each rank
// updates its shard of the masters and writes its shard of the 16-bit compute copy, which the
// ranks then all-gather (ZeRO-1/2: the whole copy is kept; ZeRO-3: it is the shard too).
//
// Every rank must make the same calls in the same order (the collectives are matched by order).
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/dist_options.h"
#include "dist/communicator.h"
#include "dist/shard.h"
#include "nn/model.h"
#include "optim/optimizer.h"

namespace trainlab::dist {

// A bucket: parameters [first_param, last_param) of the flat layout, elements [begin, end).
struct GradBucket {
  size_t first_param = 0, last_param = 0;
  int64_t begin = 0, end = 0;
};
// Buckets of about bucket_mb MiB of `element_bytes`-byte gradients, from the last parameter back.
std::vector<GradBucket> make_buckets(const FlatParams& flat, size_t element_bytes, double bucket_mb);

// This rank's part of a step's global batch indices (TrainingStep::set_indices' layout): of each
// of the `micro_batches` equal micro-batches, the rank-th of `ranks` equal slices. The caller
// checks that a micro-batch's samples divide by the ranks (a token window's indices then stay
// together); throws Error when the indices do not split evenly.
std::vector<int32_t> local_batch_indices(const std::vector<int32_t>& global, int micro_batches, int ranks, int rank);

// A step's communication figures (host clock): compute = the step's time minus the exposed
// communication (waits for gradient and parameter collectives after the work that could overlap
// them was done) and the waiting (the per-step host collectives: where the ranks wait for the
// slowest); bytes as Communicator::bytes_sent.
struct DistStepMetrics {
  double compute_s = 0.0, comm_s = 0.0, wait_s = 0.0;
  int64_t bytes_sent = 0;
};

class DataParallel : public ModelHooks {
 public:
  // For `model` (parameters in their run's format, flat) on `be`, over `comm` (every rank of the
  // data-parallel group). Installs itself as the model's hooks; ZeRO-3 keeps only the shard of
  // the weights from here on. Throws Error for a ZeRO stage on one rank.
  static std::unique_ptr<DataParallel> create(const DistOptions& o, Communicator& comm, Backend& be, Model& model);
  ~DataParallel() override;

  DistStrategy strategy() const { return m_strategy; }
  Communicator& comm() { return m_comm; }

  virtual void begin_step(int micro_batches);
  virtual void finish_backward() = 0;
  virtual bool grads_finite() = 0;
  // The sum of the squares of the whole reduced gradient (every rank's shard), the same on every
  // rank: gradient clipping's global norm.
  virtual double grad_sum_squares() = 0;
  virtual void optimizer_step(Optimizer& opt) = 0;
  virtual void finish_training() {}
  // Sums host values over the ranks (timed as waiting). `v` is replaced by the sums.
  void sum(std::span<double> v);
  // The figures since the last call, for a step that took `step_s` seconds.
  DistStepMetrics take_metrics(double step_s);

  void grads_ready(size_t first) override;
  // Tensor parallelism: parameters (flat order) that every rank of the tensor-parallel group holds
  // whole, left out of this rank's grad_sum_squares when `skip` says so (all but one rank of the
  // group count them), so that the sum over the whole world is the whole model's.
  void set_norm_skip(std::vector<bool> skip) { m_norm_skip = std::move(skip); }

  // Checkpoints (train/run_shards.h): the range of the flat layout whose fp32 masters and
  // optimizer state this rank keeps up to date (DDP: all of it; ZeRO: its shard), those values on
  // the host (state_range().size() each), and their return into a run that has not stepped yet or
  // is at a step boundary. restore_state is collective: ZeRO-1/2 gather the masters again.
  int64_t state_elements() const { return m_flat.numel(); }
  virtual ShardRange state_range() const { return {0, m_flat.numel()}; }
  virtual std::vector<float> master_state();
  virtual std::map<std::string, std::vector<float>> optimizer_state(const Optimizer& opt);
  virtual void restore_state(Optimizer& opt, const std::vector<float>& master,
                             const std::map<std::string, std::vector<float>>& optim);

 protected:
  DataParallel(DistStrategy s, Communicator& comm, Backend& be, Model& model, double bucket_mb);
  // Starts the reduction of bucket b (all-reduce or reduce-scatter).
  virtual CommHandle reduce_bucket(const GradBucket& b) = 0;
  // Starts every bucket not started yet whose parameters are all at positions >= first.
  void launch_ready(size_t first);
  // Waits for every started bucket (timed as communication).
  void wait_buckets();
  // Waits for h, timed as communication.
  void wait_comm(CommRequest& h);
  // Drives the collectives in flight (MPI progresses only inside its calls).
  void progress();

  DistStrategy m_strategy;
  Communicator& m_comm;
  Backend& m_be;
  Model& m_model;
  FlatParams m_flat;
  std::vector<GradBucket> m_buckets;
  std::vector<bool> m_started;
  std::vector<CommHandle> m_inflight;
  std::vector<bool> m_norm_skip;  // set_norm_skip (empty: count every parameter)
  bool counted(size_t i) const { return m_norm_skip.empty() || !m_norm_skip[i]; }
  int m_micro_batches = 1, m_backward = 0;
  double m_comm_s = 0.0, m_wait_s = 0.0;
  int64_t m_bytes_at_take = 0;
};

}  // namespace trainlab::dist
