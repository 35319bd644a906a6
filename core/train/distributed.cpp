#include "train/distributed.h"

#include <cmath>

#include "dist/world.h"
#include "util/error.h"

namespace trainlab {

DistributedRun::DistributedRun(const Config& config)
    : m_place(dist::launch_info()), m_options(dist_options(config)) {
  if (m_place.launched() && m_options.ranks > 0 && m_options.ranks != m_place.size)
    throw dist::CollectiveError("dist.ranks is " + std::to_string(m_options.ranks) + " but " + m_place.launcher + " started " +
                std::to_string(m_place.size) + " rank" + (m_place.size > 1 ? "s" : "") +
                " (leave dist.ranks at 0 under a launcher, or make them agree)");
  if (!m_place.launched() && m_options.ranks > 1)
    throw Error("dist.ranks is " + std::to_string(m_options.ranks) +
                ", but this process was not started by a launcher: use trainlab-cli train --ranks " +
                std::to_string(m_options.ranks) + " (which starts them through mpirun), or mpirun -np " +
                std::to_string(m_options.ranks) + " trainlab-cli train ...");
  // ZeRO shards the optimizer state as ranges of the flat parameter order; 8-bit AdamW's blocks
  // and Adafactor's row and column averages are not ranges of it, and Lion is left out until its
  // shards have their test (issue 19). Refused rather than run with other numbers than one rank.
  const std::string optimizer = config.get_string("optim.name");
  if (zero_stage(m_options.strategy) > 0 && optimizer != "adamw" && optimizer != "sgd")
    throw Error(std::string("dist.strategy ") + dist_strategy_name(m_options.strategy) + " shards the optimizer state, "
                "which optim.name " + optimizer + " does not support: use dist.strategy ddp, or optim.name adamw or sgd");
  if (zero_stage(m_options.strategy) > 0 && config.get_string("optim.offload") != "none")
    throw Error(std::string("dist.strategy ") + dist_strategy_name(m_options.strategy) +
                " shards the masters and optimizer state that optim.offload cpu keeps in host memory: use "
                "dist.strategy ddp or optim.offload none");
  if (!active() && zero_stage(m_options.strategy) > 0)
    throw Error(std::string("dist.strategy ") + dist_strategy_name(m_options.strategy) +
                " shards the model over the ranks and needs at least 2 of them; this run has 1 (start it with "
                "--ranks N or mpirun -np N, or use dist.strategy ddp)");
}

DistributedRun::~DistributedRun() = default;

void DistributedRun::drop_model() { m_dp.reset(); }

std::string DistributedRun::device(const std::string& configured) const {
  return dist::rank_device(configured, m_place, m_options.transport);
}

void DistributedRun::connect(Backend& be, const Config& config, int64_t batch) {
  if (!active()) return;
  m_groups = std::make_unique<dist::ProcessGroups>(
      dist::make_world(m_place, be, m_options.timeout_s, m_options.transport), dist::ParallelDegrees{}, be);
  Json j = config.to_json();
  j.erase("run");  // the run record's folder and name are rank 0's business
  dist::check_same_config(m_groups->world(), j.dump());
  if (batch % m_place.size != 0)
    throw dist::CollectiveError("train.batch " + std::to_string(batch) + " does not split over the " +
                                std::to_string(m_place.size) +
                                " ranks: each rank computes an equal share of every batch (expected a multiple of " +
                                std::to_string(m_place.size) + ")");
}

void DistributedRun::attach(Backend& be, Model& model, TrainingStep& step, bool compressing) {
  if (!active()) return;
  if (compressing && zero_stage(m_options.strategy) > 0)
    throw dist::CollectiveError(std::string("quantization-aware training, pruning and distillation need every weight "
                                            "on every rank: use dist.strategy ddp, not ") +
                                dist_strategy_name(m_options.strategy));
  // The collectives run from host code between the model's units: a step is not one capturable unit.
  be.set_capture_enabled(false);
  step.set_ranks(m_place.size);
  m_dp = dist::DataParallel::create(m_options, m_groups->data_parallel(), be, model);
}

std::vector<int32_t> DistributedRun::local_indices(const std::vector<int32_t>& global, int micro_batches) const {
  if (!active()) return global;
  return dist::local_batch_indices(global, micro_batches, m_place.size, m_place.rank);
}

double clip_gradient(Backend& be, StepScalars& sc, double sum_squares, double clip) {
  const double norm = std::sqrt(sum_squares) * static_cast<double>(sc.grad_unscale);
  if (norm > clip) {
    sc.grad_unscale = static_cast<float>(static_cast<double>(sc.grad_unscale) * (clip / (norm + 1e-6)));
    be.set_step_scalars(sc);
  }
  return norm;
}

bool DistributedRun::step(Backend& be, TrainingStep& step, Optimizer& opt, LossScaler& scaler, int micro_batches,
                          double clip_norm, StepScalars& sc, std::optional<double>& grad_norm) {
  m_dp->begin_step(micro_batches);
  step.forward_backward();
  m_dp->finish_backward();
  const bool applied = !scaler.enabled() || scaler.update(m_dp->grads_finite());
  // The norm of the whole reduced gradient, the same on every rank: so is the clipping.
  if (applied && clip_norm > 0) grad_norm = clip_gradient(be, sc, m_dp->grad_sum_squares(), clip_norm);
  if (applied) m_dp->optimizer_step(opt);
  return applied;
}

void DistributedRun::sum(std::span<double> v) {
  if (active()) m_dp->sum(v);
}

bool DistributedRun::keep_going(bool go) {
  if (!active()) return go;
  double stop = go ? 0.0 : 1.0;
  m_groups->world().all_reduce_host(std::span<double>(&stop, 1), dist::HostReduce::Max);
  return stop == 0.0;
}

std::vector<RankStepMetrics> DistributedRun::rank_metrics(double step_s, const MemorySnapshot& mem) {
  if (!active()) return {};
  const dist::DistStepMetrics d = m_dp->take_metrics(step_s);
  constexpr size_t kFields = 5 + 2 * kMemCategoryCount;
  std::vector<double> mine{step_s, d.compute_s, d.comm_s, d.wait_s, static_cast<double>(d.bytes_sent)};
  for (int64_t b : mem.current) mine.push_back(static_cast<double>(b));
  for (int64_t b : mem.peak) mine.push_back(static_cast<double>(b));
  const std::vector<double> all = m_groups->world().all_gather_host(mine);
  std::vector<RankStepMetrics> out(static_cast<size_t>(m_place.size));
  for (size_t r = 0; r < out.size(); ++r) {
    const double* v = all.data() + r * kFields;
    RankStepMetrics& m = out[r];
    m.rank = static_cast<int>(r);
    m.step_ms = v[0] * 1e3;
    m.compute_ms = v[1] * 1e3;
    m.comm_ms = v[2] * 1e3;
    m.wait_ms = v[3] * 1e3;
    m.bytes_sent = static_cast<int64_t>(v[4]);
    for (size_t c = 0; c < kMemCategoryCount; ++c) {
      m.mem_current.by_category[c] = static_cast<int64_t>(v[5 + c]);
      m.mem_peak.by_category[c] = static_cast<int64_t>(v[5 + kMemCategoryCount + c]);
    }
  }
  return out;
}

dist::DataParallel* DistributedRun::sharded() const {
  return m_dp && zero_stage(m_options.strategy) > 0 ? m_dp.get() : nullptr;
}

std::string DistributedRun::root_text(const std::string& text) {
  if (!active()) return text;
  std::vector<uint8_t> bytes(text.begin(), text.end());
  m_groups->world().broadcast_host(bytes, 0);
  return std::string(bytes.begin(), bytes.end());
}

void DistributedRun::finish_training() {
  if (m_dp) m_dp->finish_training();
}

}  // namespace trainlab
