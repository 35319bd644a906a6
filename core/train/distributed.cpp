#include "train/distributed.h"

#include <cmath>
#include <cstring>
#include <map>

#include "config/compress_options.h"
#include "config/train_options.h"
#include "dist/pipeline_schedule.h"
#include "dist/world.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

namespace {

// dist.tp and dist.sequence_parallel against the model and the ranks: every rank finds the same,
// so each is a CollectiveError (rank 0 reports it). `ranks` is the job's size (1 unlaunched).
void check_tensor_parallel(const Config& config, const DistOptions& o, int ranks) {
  const int t = o.tp;
  const std::string tp = "dist.tp " + std::to_string(t);
  if (o.sequence_parallel && t == 1)
    throw dist::CollectiveError("dist.sequence_parallel splits the tokens over the tensor-parallel ranks, but dist.tp is "
                                "1: set dist.tp to 2 or more, or dist.sequence_parallel false");
  if (t == 1) return;
  const ModelOptions m = model_options(config);
  if (m.name != "char-gpt")
    throw dist::CollectiveError(tp + " splits a transformer's blocks over ranks; model.name " + m.name +
                                " has none (tensor parallelism runs for char-gpt; use dist.tp 1 with " + m.name + ")");
  if (ranks % t != 0)
    throw dist::CollectiveError(tp + " does not divide the " + std::to_string(ranks) + " rank" + (ranks > 1 ? "s" : "") +
                                ": the ranks are dist.tp x data-parallel replicas (start " + std::to_string(t) +
                                ", " + std::to_string(2 * t) + ", ... ranks with --ranks)");
  CharGptConfig c = CharGptConfig::preset(m.preset);
  if (m.heads > 0) c.heads = m.heads;
  if (m.dim > 0) c.dim = m.dim;
  if (m.context > 0) c.context = m.context;
  // Whole heads on each rank; the widths d and 4d then divide too (d is heads x head width).
  if (c.heads % t != 0)
    throw dist::CollectiveError(tp + " does not divide model.heads " + std::to_string(c.heads) +
                                (c.dim % t != 0 ? " nor the hidden width model.dim " + std::to_string(c.dim) : "") +
                                ": each tensor-parallel rank computes heads / tp whole heads and an equal share of "
                                "the hidden width's columns (use a dist.tp that divides model.heads)");
  if (o.sequence_parallel && c.context % t != 0)
    throw dist::CollectiveError("dist.sequence_parallel splits each window of model.context " +
                                std::to_string(c.context) + " tokens over " + tp +
                                " ranks: the context must be a multiple of dist.tp");
  const CompressOptions co = compress_options(config);
  if (co.quant.qat() || co.prune.method != "none" || !co.distill.teacher.empty())
    throw dist::CollectiveError(tp + ": quantization-aware training, pruning and distillation need every weight whole "
                                "on a rank; they run with dist.tp 1");
  const std::string opt = config.get_string("optim.name");
  if (opt != "adamw" && opt != "sgd" && opt != "lion")
    throw dist::CollectiveError(tp + ": optim.name " + opt + " keeps state over blocks or rows and columns of a whole "
                                "matrix, which a split matrix does not have; use adamw, sgd or lion");
  if (config.get_string("optim.offload") != "none")
    throw dist::CollectiveError(tp + " with optim.offload " + config.get_string("optim.offload") +
                                ": the offloaded update is not split; use optim.offload none");
}

// What trainlab-cli train drives of a layout that check_pipeline_layout accepts: one chunk a
// rank under gpipe or 1f1b, without tensor parallelism, ZeRO or checkpoints (CollectiveErrors).
void check_pipeline_training(const Config& config, const DistOptions& o) {
  const std::string pp = "dist.pp " + std::to_string(o.pp);
  if (o.schedule != "gpipe" && o.schedule != "1f1b")
    throw dist::CollectiveError(pp + " with dist.schedule " + o.schedule + ": trainlab-cli train runs the schedules "
                                "gpipe and 1f1b (trainlab-cli plan --schedule " + o.schedule + " --print-schedule "
                                "draws this one); use dist.schedule 1f1b");
  if (o.tp > 1)
    throw dist::CollectiveError("dist.tp " + std::to_string(o.tp) + " x " + pp + ": tensor parallelism within "
                                "pipeline stages does not train yet; use dist.tp 1 or dist.pp 1");
  if (zero_stage(o.strategy) > 0)
    throw dist::CollectiveError(pp + " with dist.strategy " + dist_strategy_name(o.strategy) +
                                ": the stages' replicas reduce their gradients with ddp only; use dist.strategy ddp");
  if (config.get_int("run.checkpoint_every") > 0)
    throw dist::CollectiveError(pp + ": a pipelined run writes no checkpoints yet (it cannot be resumed); set "
                                "run.checkpoint_every 0");
}

}  // namespace

std::string check_pipeline_layout(const Config& config, const DistOptions& o, int ranks) {
  const int p = o.pp, v = o.virtual_stages;
  const std::string pp = "dist.pp " + std::to_string(p);
  if (p == 1 && v == 1 && o.stage_layers.empty()) return "";
  const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(o.schedule, "dist.schedule");
  const ModelOptions mo = model_options(config);
  if (mo.name != "char-gpt")
    throw dist::CollectiveError(pp + " splits a transformer's blocks into pipeline stages; model.name " + mo.name +
                                " has none (pipeline parallelism runs for char-gpt; use dist.pp 1 with " + mo.name + ")");
  if (v > 1 && kind != dist::PipelineSchedule::Interleaved)
    throw dist::CollectiveError("dist.virtual_stages " + std::to_string(v) + ": only dist.schedule interleaved splits a " +
                                "rank's blocks into chunks; " + o.schedule + " needs 1");
  const int m = micro_batches(config);
  if (kind == dist::PipelineSchedule::Interleaved && m % p != 0)
    throw dist::CollectiveError("dist.schedule interleaved sends the micro-batches round the " + std::to_string(p) +
                                " stages in groups of " + std::to_string(p) + ": train.micro_batches " +
                                std::to_string(m) + " must be a multiple of " + pp);
  CharGptConfig c = CharGptConfig::preset(mo.preset);
  if (mo.layers > 0) c.layers = mo.layers;
  try {
    dist::stage_layer_split(kind, c.layers, p, v, o.stage_layers);
    dist::validate_pipeline(kind, p, m, v);
  } catch (const dist::CollectiveError&) {
    throw;
  } catch (const Error& e) {
    throw dist::CollectiveError(e.what());
  }
  if (ranks % (o.tp * p) != 0)
    throw dist::CollectiveError("dist.tp " + std::to_string(o.tp) + " x " + pp + " = " + std::to_string(o.tp * p) +
                                " does not divide the " + std::to_string(ranks) + " rank" + (ranks > 1 ? "s" : "") +
                                ": the ranks are dist.tp x data-parallel replicas x dist.pp (start " +
                                std::to_string(o.tp * p) + ", " + std::to_string(2 * o.tp * p) + ", ... ranks with --ranks)");
  const CompressOptions co = compress_options(config);
  if (co.quant.qat() || co.prune.method != "none" || !co.distill.teacher.empty())
    throw dist::CollectiveError(pp + ": quantization-aware training, pruning and distillation need every weight on a "
                                "rank; they run with dist.pp 1");
  if (config.get_string("optim.offload") != "none")
    throw dist::CollectiveError(pp + " with optim.offload " + config.get_string("optim.offload") +
                                ": the offloaded update is not split into stages; use optim.offload none");
  const std::string w = dist::pipeline_warning(kind, p, m, v);
  return w.empty() ? w : "dist.schedule " + o.schedule + " with " + pp + " and train.micro_batches " + std::to_string(m) + ": " + w;
}

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
  const int job_ranks = m_place.launched() ? m_place.size : std::max(1, m_options.ranks);
  check_tensor_parallel(config, m_options, job_ranks);
  m_pipeline_warning = check_pipeline_layout(config, m_options, job_ranks);
  if (m_options.pp > 1) check_pipeline_training(config, m_options);
  if (m_options.tp > 1 && m_place.size / m_options.tp < 2 && zero_stage(m_options.strategy) > 0)
    throw dist::CollectiveError(std::string("dist.strategy ") + dist_strategy_name(m_options.strategy) +
                                " shards over the data-parallel replicas, and with dist.tp " +
                                std::to_string(m_options.tp) + " on " + std::to_string(m_place.size) +
                                " ranks there is one: start 2 x dist.tp ranks or more, or use dist.strategy ddp");
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
      dist::make_world(m_place, be, m_options.timeout_s, m_options.transport, &m_notice),
      dist::ParallelDegrees{m_options.tp, m_options.pp}, be);
  if (m_options.tp > 1) m_tensor = std::make_unique<dist::CommTensorGroup>(m_groups->tensor_parallel());
  Json j = config.to_json();
  j.erase("run");  // the run record's folder and name are rank 0's business
  dist::check_same_config(m_groups->world(), j.dump());
  const int dp = data_ranks();
  if (batch % dp != 0)
    throw dist::CollectiveError("train.batch " + std::to_string(batch) + " does not split over the " +
                                std::to_string(dp) + (m_options.tp > 1 ? " data-parallel replicas" : " ranks") +
                                ": each computes an equal share of every batch (expected a multiple of " +
                                std::to_string(dp) + ")");
}

void DistributedRun::attach(Backend& be, Model& model, TrainingStep& step, bool compressing) {
  if (!active()) return;
  if (compressing && zero_stage(m_options.strategy) > 0)
    throw dist::CollectiveError(std::string("quantization-aware training, pruning and distillation need every weight "
                                            "on every rank: use dist.strategy ddp, not ") +
                                dist_strategy_name(m_options.strategy));
  // The collectives run from host code between the model's units: a step is not one capturable unit.
  be.set_capture_enabled(false);
  step.set_ranks(data_ranks());
  m_dp = dist::DataParallel::create(m_options, m_groups->data_parallel(), be, model);
  if (pipelined()) {
    auto* gpt = dynamic_cast<CharGpt*>(&model);
    if (!gpt) throw Error("internal: a pipeline stage is not a char-gpt");
    const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(m_options.schedule, "dist.schedule");
    m_exec = std::make_unique<PipelineExecutor>(std::vector<CharGpt*>{gpt}, m_groups->pipeline_parallel(),
                                                dist::build_schedule(kind, m_options.pp, step.accumulate()));
    step.set_pipeline(m_exec.get());
    m_simulated_bubble = dist::simulate(m_exec->table()).idle_fraction;
    m_formula_bubble = dist::pipeline_bubble(kind, m_options.pp, step.accumulate(), 1).fraction();
  }
  if (m_tensor && m_tensor->rank() > 0) {
    // Whole parameters are equal on every rank of the group: the norm counts rank 0's.
    std::vector<bool> skip;
    for (Parameter* p : model.parameters()) skip.push_back(!p->shard.split());
    m_dp->set_norm_skip(std::move(skip));
  }
}

TensorParallel DistributedRun::tensor_parallel() const {
  TensorParallel tp;
  tp.group = m_tensor.get();
  tp.sequence_parallel = m_options.sequence_parallel;
  return tp;
}

std::vector<int32_t> DistributedRun::local_indices(const std::vector<int32_t>& global, int micro_batches) const {
  if (!active()) return global;
  return dist::local_batch_indices(global, micro_batches, data_ranks(), data_rank());
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
  bool finite = !scaler.enabled() || m_dp->grads_finite();
  if (pipelined() && scaler.enabled()) {  // each stage checks its own parameters
    double bad = finite ? 0.0 : 1.0;
    m_groups->world().all_reduce_host(std::span<double>(&bad, 1), dist::HostReduce::Max);
    finite = bad == 0.0;
  } else if (m_tensor && scaler.enabled()) {  // a rank of the group may hold the only overflow
    double bad = finite ? 0.0 : 1.0;
    m_tensor->all_reduce_host(std::span<double>(&bad, 1), true);
    finite = bad == 0.0;
  }
  const bool applied = !scaler.enabled() || scaler.update(finite);
  // The norm of the whole reduced gradient, the same on every rank: so is the clipping. With tensor
  // parallelism each rank's sum covers its shards (whole parameters on rank 0 of the group only).
  if (applied && clip_norm > 0) {
    double ss = m_dp->grad_sum_squares();
    if (m_tensor) m_tensor->all_reduce_host(std::span<double>(&ss, 1), false);
    // The stages hold disjoint parameters: their sums add up to the whole model's.
    if (pipelined()) m_groups->pipeline_parallel().all_reduce_host(std::span<double>(&ss, 1), dist::HostReduce::Sum);
    grad_norm = clip_gradient(be, sc, ss, clip_norm);
  }
  if (applied) m_dp->optimizer_step(opt);
  return applied;
}

void DistributedRun::sum(std::span<double> v) {
  if (pipelined()) {  // the last stages hold the sums (the others' are zero)
    m_groups->world().all_reduce_host(v, dist::HostReduce::Sum);
  } else if (active()) {
    m_dp->sum(v);
  }
}

void DistributedRun::pipeline_result(double& loss, double& accuracy) {
  if (!pipelined()) return;
  const bool mine = stage() == m_options.pp - 1 && data_rank() == 0;  // every replica evaluated the same
  double v[2] = {mine ? loss : 0.0, mine ? accuracy : 0.0};
  m_groups->world().all_reduce_host(std::span<double>(v, 2), dist::HostReduce::Sum);
  loss = v[0];
  accuracy = v[1];
}

Json DistributedRun::pipeline_timeline(long step) {
  if (!m_exec) return nullptr;
  const dist::PipelineTable& t = m_exec->table();
  size_t most = 0;  // every stage sends as many values: the longest list's
  for (const auto& list : t.actions) most = std::max(most, list.size());
  const PipelineStepTimes pt = m_exec->times();
  const size_t fields = 6 + 5 * most;
  std::vector<double> mine{static_cast<double>(m_place.rank), pt.step_s, pt.forward_s, pt.backward_s, pt.wait_s,
                           static_cast<double>(m_exec->events().size())};
  // An action is drawn from the moment its input has arrived: the wait for it is the stage's idle time.
  for (const PipeEvent& e : m_exec->events())
    mine.insert(mine.end(), {static_cast<double>(e.action.op), static_cast<double>(e.action.micro_batch),
                             static_cast<double>(e.action.chunk), e.start_s + e.wait_s, e.end_s});
  mine.resize(fields, 0.0);
  const std::vector<double> all = m_groups->world().all_gather_host(mine);
  if (!is_root()) return nullptr;
  auto ms = [](double seconds) { return std::round(seconds * 1e6) / 1e3; };  // to the microsecond
  Json stages = Json::array();
  for (int s = 0; s < t.stages; ++s) {  // the stage's data replica 0 (tp 1: world rank s x replicas)
    const double* v = all.data() + static_cast<size_t>(s * data_ranks()) * fields;
    Json actions = Json::array();
    for (size_t i = 0; i < static_cast<size_t>(v[5]); ++i) {
      const double* a = v + 6 + 5 * i;
      actions.push_back({dist::pipe_op_letter(static_cast<dist::PipeOp>(a[0])), static_cast<int>(a[1]),
                         static_cast<int>(a[2]), ms(a[3]), ms(a[4])});
    }
    const double compute = v[2] + v[3];
    stages.push_back({{"stage", s}, {"rank", static_cast<int>(v[0])}, {"step_ms", ms(v[1])},
                      {"forward_ms", ms(v[2])}, {"backward_ms", ms(v[3])}, {"recv_wait_ms", ms(v[4])},
                      {"bubble", v[1] > 0 ? 1.0 - compute / v[1] : 0.0}, {"actions", std::move(actions)}});
  }
  return {{"step", step}, {"schedule", m_options.schedule}, {"p", t.stages}, {"m", t.micro_batches},
          {"v", t.chunks}, {"simulated_bubble", m_simulated_bubble}, {"formula_bubble", m_formula_bubble},
          {"stages", std::move(stages)}};
}

PipelineSlice DistributedRun::pipeline_slice(const Config& config) const {
  if (!pipelined()) return {};
  const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(m_options.schedule, "dist.schedule");
  const ModelOptions mo = model_options(config);
  CharGptConfig c = CharGptConfig::preset(mo.preset);
  if (mo.layers > 0) c.layers = mo.layers;
  const std::vector<int64_t> cut = dist::stage_layer_split(kind, c.layers, m_options.pp, 1, m_options.stage_layers);
  const int s = stage();
  PipelineSlice slice;
  slice.first = 0;
  for (int q = 0; q < s; ++q) slice.first += cut[static_cast<size_t>(q)];
  slice.last = slice.first + cut[static_cast<size_t>(s)];
  slice.embedding = s == 0;
  slice.head = s == m_options.pp - 1;
  return slice;
}

bool DistributedRun::keep_going(bool go) {
  if (!active()) return go;
  double stop = go ? 0.0 : 1.0;
  m_groups->world().all_reduce_host(std::span<double>(&stop, 1), dist::HostReduce::Max);
  return stop == 0.0;
}

std::vector<RankStepMetrics> DistributedRun::rank_metrics(double step_s, const MemorySnapshot& mem,
                                                          const std::array<int64_t, kMemCategoryCount>& predicted) {
  if (!active()) return {};
  dist::DistStepMetrics d = m_dp->take_metrics(step_s);
  if (m_tensor) {  // the group's collectives: exposed (the model waits for each), and their bytes
    const double s = m_tensor->take_seconds();
    d.comm_s += s;
    d.compute_s = std::max(0.0, d.compute_s - s);
    const int64_t bytes = m_tensor->comm().bytes_sent();
    d.bytes_sent += bytes - m_tp_bytes_at_take;
    m_tp_bytes_at_take = bytes;
  }
  PipelineStepTimes pt;
  if (m_exec) {  // waiting for the stages' tensors is not computing
    pt = m_exec->times();
    d.wait_s += pt.wait_s;
    d.compute_s = std::max(0.0, d.compute_s - pt.wait_s);
  }
  const size_t fields = 5 + 3 * kMemCategoryCount + (m_exec ? 5 : 0);
  std::vector<double> mine{step_s, d.compute_s, d.comm_s, d.wait_s, static_cast<double>(d.bytes_sent)};
  for (int64_t b : mem.current) mine.push_back(static_cast<double>(b));
  for (int64_t b : mem.peak) mine.push_back(static_cast<double>(b));
  for (int64_t b : predicted) mine.push_back(static_cast<double>(b));
  if (m_exec) mine.insert(mine.end(), {static_cast<double>(stage()), pt.forward_s, pt.backward_s, pt.wait_s, pt.other_s()});
  const std::vector<double> all = m_groups->world().all_gather_host(mine);
  std::vector<RankStepMetrics> out(static_cast<size_t>(m_place.size));
  for (size_t r = 0; r < out.size(); ++r) {
    const double* v = all.data() + r * fields;
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
      m.mem_predicted.by_category[c] = static_cast<int64_t>(v[5 + 2 * kMemCategoryCount + c]);
    }
    if (m_exec) {
      const double* q = v + 5 + 3 * kMemCategoryCount;
      RankPipelineMetrics pm;
      pm.stage = static_cast<int>(q[0]);
      pm.forward_ms = q[1] * 1e3;
      pm.backward_ms = q[2] * 1e3;
      pm.recv_wait_ms = q[3] * 1e3;
      pm.other_ms = q[4] * 1e3;
      const double stage_ms = pm.forward_ms + pm.backward_ms + pm.recv_wait_ms + pm.other_ms;
      pm.bubble = stage_ms > 0 ? 1.0 - (pm.forward_ms + pm.backward_ms) / stage_ms : 0.0;
      pm.simulated_bubble = m_simulated_bubble;
      pm.formula_bubble = m_formula_bubble;
      m.pipeline = pm;
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

namespace {

// A stage's parameters as bytes: per parameter its name's length (uint32), the name, its element
// count (uint64) and its fp32 master values.
std::vector<uint8_t> stage_bytes(Backend& be, Model& model) {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  std::vector<float> v;
  for (Parameter* p : model.parameters()) {
    const auto len = static_cast<uint32_t>(p->name.size());
    const auto n = static_cast<uint64_t>(p->numel());
    v.resize(static_cast<size_t>(n));
    be.download(p->master, v.data(), DType::F32);
    put(&len, sizeof len);
    put(p->name.data(), len);
    put(&n, sizeof n);
    put(v.data(), v.size() * sizeof(float));
  }
  return out;
}

// stage_bytes read into the whole model's parameters of the same names; returns how many.
size_t put_stage(Backend& be, const std::vector<uint8_t>& bytes, std::map<std::string, Parameter*>& by_name) {
  size_t at = 0, count = 0;
  auto take = [&](void* p, size_t n) {
    if (at + n > bytes.size()) throw Error("internal: a pipeline stage's parameters arrived cut short");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  };
  while (at < bytes.size()) {
    uint32_t len = 0;
    uint64_t n = 0;
    take(&len, sizeof len);
    std::string name(len, '\0');
    take(name.data(), len);
    take(&n, sizeof n);
    std::vector<float> v(static_cast<size_t>(n));
    take(v.data(), v.size() * sizeof(float));
    const auto it = by_name.find(name);
    if (it == by_name.end() || it->second->numel() != static_cast<int64_t>(n))
      throw Error("internal: pipeline stage parameter " + name + " is not one of the whole model's");
    be.upload(it->second->master, v.data(), DType::F32);
    ++count;
  }
  return count;
}

}  // namespace

std::unique_ptr<Model> DistributedRun::whole_model(Backend& be, Model& model) {
  if (pipelined()) {  // each stage's first rank (tp 1: data replica 0) sends its parameters to rank 0
    std::unique_ptr<Model> out = is_root() ? build_model(be, model.architecture(), 0) : nullptr;
    std::map<std::string, Parameter*> by_name;
    if (out)
      for (Parameter* p : out->parameters()) by_name[p->name] = p;
    size_t filled = 0;
    for (int s = 0; s < m_options.pp; ++s) {
      const int root = s * data_ranks();
      std::vector<uint8_t> bytes = m_place.rank == root ? stage_bytes(be, model) : std::vector<uint8_t>{};
      if (root != 0) m_groups->world().broadcast_host(bytes, root);
      if (out) filled += put_stage(be, bytes, by_name);
    }
    if (out && filled != by_name.size())
      throw Error("internal: the pipeline stages hold " + std::to_string(filled) + " of the whole model's " +
                  std::to_string(by_name.size()) + " parameters");
    return out;
  }
  if (!m_tensor) return nullptr;
  const std::vector<Parameter*> params = model.parameters();
  const std::vector<std::vector<float>> whole = dist::gather_whole_masters(be, m_tensor->comm(), params);
  auto out = build_model(be, model.architecture(), 0);
  const std::vector<Parameter*> dst = out->parameters();
  if (dst.size() != params.size()) throw Error("internal: the whole model has another parameter list than its shards");
  for (size_t i = 0; i < dst.size(); ++i) {
    if (dst[i]->name != params[i]->name || dst[i]->numel() != static_cast<int64_t>(whole[i].size()))
      throw Error("internal: " + params[i]->name + " does not match the whole model's " + dst[i]->name);
    be.upload(dst[i]->master, whole[i].data(), DType::F32);
  }
  return out;
}

void DistributedRun::finish_training() {
  if (m_dp) m_dp->finish_training();
}

}  // namespace trainlab
