#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/backend.h"
#include "compress/compression.h"
#include "config/compress_options.h"
#include "config/device_options.h"
#include "config/finetune_options.h"
#include "finetune/finetune_run.h"
#include "config/run_defaults.h"
#include "config/train_options.h"
#include "nn/model.h"
#include "io/weights.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "plan/memory_model.h"
#include "train/distributed.h"
#include "train/pipeline_record.h"
#include "train/precision.h"
#include "train/run_checkpoint.h"
#include "train/run_record.h"
#include "train/task.h"
#include "train/training_step.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab {

using Clock = std::chrono::steady_clock;

// Everything a run holds between run()'s parts. Members are destroyed in reverse order: the
// backend last, after every tensor of the task, model, optimizer and step; the data-parallel
// driver (which hooks the model) before the model.
struct Trainer::State {
  ~State() {
    if (dist) dist->drop_model();
  }
  std::unique_ptr<Backend> be;
  std::unique_ptr<DistributedRun> dist;  // several ranks (core/dist); inert with one
  std::unique_ptr<Task> task;  // data, sample indices, epochs, evaluation (train/task.h)
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<TrainingStep> step;
  std::unique_ptr<RunRecord> record;
  std::unique_ptr<SystemMonitor> monitor;  // CPU and GPU utilisation beside the run
  LrSchedule schedule;
  std::unique_ptr<LossScaler> scaler;
  std::unique_ptr<Compression> compress;  // QAT, pruning, distillation (compress/compression.h)
  AdaptedModel* adapted = nullptr;  // finetune.method lora, qlora, dora: the model (finetune/adapters.h)
  const PrecisionPolicy* precision = nullptr;
  double clip_norm = 0.0;  // optim.clip_norm (0: off)
  int64_t batch = 0;
  int accumulate = 1;
  long total_steps = 0, steps_per_epoch = 1, eval_every = 0;
  long optimizer_steps = 0;  // applied updates (Adam's t)
  long checkpoint_every = 0, checkpoint_step = 0;  // run.checkpoint_every; steps of the last checkpoint
  bool paused = false;
  bool kernel_timing = false;
  std::optional<Calibration> calibration;  // device.calibration: the measured roofs (backend/calibration.h)
  Clock::time_point t_start;
  double samples_done = 0.0, train_seconds = 0.0;  // units (rows or tokens) and their seconds
  double flops_per_sample = 0.0;
  int64_t params = 0;
  int64_t opt_state_bytes = 0;  // plan/memory_model.h's optimizer_state_bytes over the optimized parameters
  std::vector<int32_t> idx;
  // Compression metrics (StepMetrics::sparsity, bits_per_weight), recomputed when the masks or
  // the formats can have changed (compression_metrics).
  std::optional<double> sparsity, bits;
};

namespace {

// Dynamic loss scaling where the policy scales and the config enables it; a pass-through otherwise.
std::unique_ptr<LossScaler> make_scaler(const PrecisionPolicy& p, const LossScaleOptions& o) {
  return std::make_unique<LossScaler>(o, p.loss_scaling);
}

MemoryBytes to_bytes(const std::array<int64_t, kMemCategoryCount>& a) {
  MemoryBytes m;
  m.by_category = a;
  return m;
}

// optim.offload's combinations (optim/offload.h): the update runs on host copies of the masters,
// which QAT (value = Q(master) on the device) and pruning (masks the device's update applies) do
// not see; ZeRO is refused with the other dist checks (train/distributed.cpp).
void check_offload(const Backend& be, const CompressOptions& co, const TrainerCallbacks& cb) {
  if (co.quant.qat()) throw Error("optim.offload cpu does not combine with quant.mode qat: use optim.offload none");
  if (co.prune.method != "none")
    throw Error("optim.offload cpu does not combine with prune.method " + co.prune.method +
                ": use optim.offload none or prune.method none");
  if (be.info().kind == DeviceKind::Cpu && cb.on_notice)
    cb.on_notice("optim.offload cpu on the CPU: host memory is the device's, so no memory is saved; the offload "
                 "path (host buffers, gradients copied down, weights copied up) still runs");
}

}  // namespace

// finetune.method lora, qlora, dora: what a run with adapters does not combine with (the adapters
// own the weights the products read; attach_adapters checks the model and the device).
void Trainer::check_adapter_run(const FinetuneOptions& fo) const {
  const std::string m = std::string("finetune.method ") + finetune_method_name(fo.method);
  const CompressOptions co = compress_options(m_config);
  if (co.quant.qat() || co.prune.method != "none" || !co.distill.teacher.empty())
    throw Error(m + " does not combine with QAT, pruning or distillation (quant.mode, prune.method, distill.teacher)");
  if (m_config.get_int("dist.ranks") > 1) throw Error(m + " runs on one rank (dist.ranks 1)");
  if (m_config.get_string("optim.offload") != "none") throw Error(m + " does not combine with optim.offload cpu");
  if (m_config.get_int("run.checkpoint_every") > 0 || !m_resume_dir.empty())
    throw Error(m + " does not write or resume checkpoints yet (run.checkpoint_every 0)");
}

Trainer::Trainer(Config config, TrainerCallbacks callbacks)
    : m_config(resolved_config(config)), m_callbacks(std::move(callbacks)) {}

Trainer::Trainer(Config config, TrainerCallbacks callbacks, std::string resume_dir)
    : m_config(std::move(config)), m_callbacks(std::move(callbacks)), m_resume_dir(std::move(resume_dir)) {}

Trainer::~Trainer() = default;

std::string Trainer::run_dir() const { return m_run_dir; }

void Trainer::post(TrainerCommand c) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_commands.push_back(std::move(c));
  }
  m_cv.notify_all();
}

bool Trainer::drain_commands(std::string& event) {
  std::unique_lock<std::mutex> lock(m_mutex);
  for (;;) {
    if (m_stop_requested.load()) return false;
    while (!m_commands.empty()) {
      TrainerCommand c = std::move(m_commands.front());
      m_commands.pop_front();
      switch (c.kind) {
        case TrainerCommand::Kind::Stop: return false;
        case TrainerCommand::Kind::Pause: m_state->paused = true; break;
        case TrainerCommand::Kind::Resume: m_state->paused = false; break;
        case TrainerCommand::Kind::Set:
          lock.unlock();
          try {
            apply_setting(c.key, c.value, event);
          } catch (const Error& e) {
            if (m_callbacks.on_notice) m_callbacks.on_notice(std::string("setting not applied: ") + e.what());
          }
          lock.lock();
          break;
      }
    }
    if (!m_state->paused) return true;
    // A signal handler's request_stop cannot notify the condition variable (not async-signal-safe),
    // so a paused run looks at the flag every 100 ms.
    m_cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !m_commands.empty() || m_stop_requested.load(); });
  }
}

void Trainer::apply_setting(const std::string& key, const Json& value, std::string& event) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw Error("unknown key '" + key + "'");
  if (!k->mid_run) throw Error("'" + key + "' cannot change while a run trains");
  // Every rank would have to apply it at the same step; commands reach one process.
  if (m_state->dist->active()) throw Error("'" + key + "' cannot change while a run over several ranks trains");
  // The offloaded optimizer's host masters and staging buffers are laid out for one format.
  if (key == "precision.dtype" && m_state->opt->host_step())
    throw Error("'precision.dtype' cannot change mid-run with optim.offload cpu");
  if (key == "train.accumulate" && m_config.get_int("train.micro_batches") > 0)
    throw Error("'train.accumulate' cannot change while train.micro_batches (" +
                std::to_string(m_config.get_int("train.micro_batches")) + ") sets the micro-batches of this run");
  const Json old = m_config.at(key);
  m_config.set_json(key, value, "mid-run change");
  const Json now = m_config.at(key);
  if (old == now) return;
  State& s = *m_state;
  if (key == "precision.dtype") {
    const PrecisionPolicy& p = precision_policy(now.get<std::string>());
    require_precision(*s.be, p);
    apply_precision(*s.be, *s.model, p);
    s.precision = &p;
    s.step->on_format_changed();
    s.scaler = make_scaler(p, optim_options(m_config).loss_scale);
  } else if (key == "optim.lr") {
    s.schedule.base_lr = now.get<double>();
  } else if (key == "train.accumulate") {
    s.accumulate = micro_batches(m_config);
    s.step->set_accumulate(s.accumulate);
  } else if (key == "checkpoint.policy" || key == "checkpoint.k") {
    s.task->set_checkpointing(checkpoint_options(m_config));
  }
  if (s.compress) s.compress->on_setting(key, compress_options(m_config));
  s.be->invalidate_captures();
  std::string label = key.substr(key.rfind('.') + 1) + ": " + (old.is_string() ? old.get<std::string>() : old.dump()) +
                      " -> " + (now.is_string() ? now.get<std::string>() : now.dump());
  event += (event.empty() ? "" : "; ") + label;
}

// device.calibration: the device's measured roofs, cached on disk (backend/calibration.h), taken
// before the run allocates anything so that its buffers leave no peak in the ledger. A measurement
// is announced in plain words before it starts (a first run on a device, or after a new build,
// otherwise waited seconds with no word), and its time is left out of the run's: t_start moves
// past it. A failure leaves MFU on the datasheet, with a notice.
void Trainer::calibrate_device() {
  State& s = *m_state;
  const CalibrationMode mode = calibration_mode_from_name(m_config.get_string("device.calibration"));
  if (mode == CalibrationMode::Off) return;
  const auto t0 = Clock::now();
  try {
    const std::string note = calibration_pending_note(*s.be, mode);
    if (!note.empty() && m_callbacks.on_notice) m_callbacks.on_notice(note);
    s.calibration = calibrate(*s.be, mode);
    // Calibration::note's paths are for `trainlab-cli calibrate`; here only what the user can act on.
    if (s.calibration->cache_path.empty() && !s.calibration->from_cache && m_callbacks.on_notice)
      m_callbacks.on_notice("This device's speed could not be kept for the next runs (it is measured again each "
                            "time): " + s.calibration->note);
  } catch (const Error& e) {
    if (m_callbacks.on_notice)
      m_callbacks.on_notice(std::string("Could not measure this device's speed; MFU uses the datasheet: ") + e.what());
  }
  s.t_start += Clock::now() - t0;
  s.be->ledger().reset_peaks();
  s.be->reset_kernel_times();  // the measurement's products are not the run's kernels
}

// The calibrated peak (TFLOP/s) of the run's products, raised to what the run itself computes
// when it computes faster: a peak measured while the machine was busier (other processes on the
// CPU's cores, a GPU shared) is no peak, and MFU against it read above 100 % (issue 41's runs
// comparison: bf16 digits at 125 % on a CPU). The run's roofline gets the raised roof too; the
// cache keeps its measurement (`trainlab-cli calibrate --force` measures again). 0 without one.
double Trainer::measured_peak(double flops_per_s) {
  State& s = *m_state;
  if (!s.calibration) return 0.0;
  const double peak = s.calibration->peak_for(s.precision->compute, s.precision->matmul);
  if (!(peak > 0) || flops_per_s <= peak * 1e12) return peak;
  CalibratedPeak* used = nullptr;  // the entry peak_for read: the mode's own, else the format's native
  for (CalibratedPeak& p : s.calibration->peaks) {
    if (p.dtype != s.precision->compute) continue;
    if (p.mode == s.precision->matmul) {
      used = &p;
      break;
    }
    if (p.mode == MatmulMode::Native) used = &p;
  }
  if (used) used->tflops = flops_per_s / 1e12;
  return flops_per_s / 1e12;
}

void Trainer::setup() {
  State& s = *m_state;
  std::string notice;
  s.dist = std::make_unique<DistributedRun>(m_config);
  s.be = create_backend(s.dist->device(m_config.get_string("device.name")), device_options(m_config), &notice);
  if (!notice.empty() && m_callbacks.on_notice) m_callbacks.on_notice(notice);
  s.be->set_capture_enabled(m_config.get_bool("device.cuda_graph"));
  s.kernel_timing = m_config.get_bool("device.kernel_timing");
  s.be->set_kernel_timing(s.kernel_timing);
  calibrate_device();
  const TrainOptions t = train_options(m_config);
  const ModelOptions mo = model_options(m_config);
  s.dist->connect(*s.be, m_config, t.batch);
  if (!s.dist->notice().empty() && s.dist->is_root() && m_callbacks.on_notice) m_callbacks.on_notice(s.dist->notice());
  s.task = make_task(mo, data_options(m_config), t, checkpoint_options(m_config));
  s.batch = t.batch;
  s.accumulate = t.accumulate;
  const PrecisionOptions po = precision_options(m_config);
  s.precision = &precision_policy(po.dtype);
  require_precision(*s.be, *s.precision);

  s.task->set_tensor_parallel(s.dist->tensor_parallel());
  s.task->set_pipeline_slice(s.dist->pipeline_slice(m_config));
  s.model = s.task->build_model(*s.be, t.seed);
  apply_precision(*s.be, *s.model, *s.precision);
  s.compress = std::make_unique<Compression>(compress_options(m_config), *s.be);
  const FinetuneOptions fo = finetune_options(m_config);
  if (fo.adapters()) check_adapter_run(fo);
  check_adapter_model(s.model->kind(), fo);
  s.model = s.compress->attach(std::move(s.model), s.batch, s.accumulate);
  s.model = attach_adapters(*s.be, std::move(s.model), fo, t.seed);
  s.adapted = dynamic_cast<AdaptedModel*>(s.model.get());
  s.model->set_matmul_mode(s.precision->matmul);  // a distillation teacher computes in the run's mode too
  const OptimOptions oo = optim_options(m_config);
  s.opt = make_optimizer(oo.optimizer);
  if (const DType pd = parameter_storage_dtype(s.precision->compute);
      !s.opt->host_step() && !s.be->supports(s.opt->backend_op(), pd))
    throw Error("optim.name " + s.opt->name() + ": " + op_name(s.opt->backend_op()) + " in " + dtype_name(pd) +
                " is not supported on " + s.be->info().name + " (use device.name cpu, or another optimizer)");
  if (oo.optimizer.offload != "none") check_offload(*s.be, compress_options(m_config), m_callbacks);
  s.step = s.task->make_step(*s.be, *s.model, *s.opt, s.dist->local_batch(s.batch), s.accumulate);
  s.opt_state_bytes = optimizer_state_bytes(oo.optimizer, param_shape_infos(s.step->params()));
  if (s.adapted && m_callbacks.on_notice)
    for (const std::string& line : s.adapted->memory(s.opt_state_bytes).lines()) m_callbacks.on_notice(line);
  const CompressOptions co = compress_options(m_config);
  s.dist->attach(*s.be, *s.model, *s.step, co.quant.qat() || co.prune.method != "none" || !co.distill.teacher.empty());

  const int64_t units_per_step = s.batch * s.task->units_per_sample() * s.accumulate;
  s.steps_per_epoch = std::max(1L, static_cast<long>(s.task->train_units() / units_per_step));
  s.total_steps = t.steps;
  if (s.total_steps == 0) s.total_steps = s.steps_per_epoch * t.epochs;
  if (s.total_steps <= 0) throw Error("nothing to train: train.steps and train.epochs are both 0");
  s.eval_every = t.eval_every;

  s.schedule = make_lr_schedule(oo.schedule, oo.optimizer.lr, s.total_steps);
  s.scaler = make_scaler(*s.precision, oo.loss_scale);
  s.clip_norm = oo.clip_norm;

  s.checkpoint_every = static_cast<long>(m_config.get_int("run.checkpoint_every"));
  if (m_resume_dir.empty()) {  // a resumed run opens its record once the checkpoint is restored
    std::string dir = m_config.get_string("run.out");
    if (dir.empty()) dir = RunRecord::default_dir("runs", mo.name + "-" + s.precision->name);
    dir = s.dist->root_text(dir);  // one folder for every rank (a sharded checkpoint's files)
    if (s.dist->is_root()) s.record = std::make_unique<RunRecord>(dir, m_config, m_open_mode);  // rank 0 writes it
    std::lock_guard<std::mutex> lock(m_mutex);
    m_run_dir = dir;
  }
  s.params = s.model->parameter_count();
  s.flops_per_sample = s.task->flops_per_sample(*s.model);
}

void Trainer::compression_metrics() {
  State& s = *m_state;
  const bool pruning = m_config.get_string("prune.method") != "none";
  int64_t masked = 0, zeros = 0;
  double qbits = 0.0, qweights = 0.0, store_bits = 32.0;
  std::vector<float> mask;
  for (Parameter* p : s.step->params()) {
    if (p->value.defined()) store_bits = 8.0 * static_cast<double>(dtype_bytes(p->value.dtype(), 1));
    if (p->mask.defined()) {
      mask.resize(static_cast<size_t>(p->mask.numel()));
      s.be->download(p->mask, mask.data(), DType::F32);
      masked += p->mask.numel();
      for (float v : mask) zeros += v == 0.0f;
    }
    if (s.compress->qat_on() && QuantPlan::quantizable(p->name, p->shape)) {
      qbits += static_cast<double>(s.compress->quant_plan().spec_for(p->name).bits) * static_cast<double>(p->numel());
      qweights += static_cast<double>(p->numel());
    }
  }
  if (pruning || masked > 0)
    s.sparsity = masked > 0 ? 100.0 * static_cast<double>(zeros) / static_cast<double>(masked) : 0.0;
  if (pruning || masked > 0 || s.compress->qat_on() || s.bits) s.bits = qweights > 0 ? qbits / qweights : store_bits;
}

// One optimizer step: k micro-batches forward and backward, the update unless the loss scaler
// skips it, then the step's metrics (evaluation included when due).
StepMetrics Trainer::train_step(long step, std::string event) {
  State& s = *m_state;
  const int64_t need = s.batch * s.accumulate;  // samples this step
  const int64_t units = need * s.task->units_per_sample();
  s.task->next_indices(need, s.idx);
  const auto t0 = Clock::now();
  const double lr = s.schedule.at(step);
  StepScalars sc;
  sc.lr = static_cast<float>(lr);
  sc.loss_scale = static_cast<float>(s.scaler->scale());
  sc.grad_unscale = static_cast<float>(1.0 / s.scaler->scale());
  sc.step = static_cast<float>(s.optimizer_steps + 1);
  s.be->set_step_scalars(sc);
  if (const std::string e = s.compress->before_step(step); !e.empty()) event += (event.empty() ? "" : "; ") + e;
  s.step->set_indices(s.dist->local_indices(s.idx, s.accumulate));
  bool applied = true;
  std::optional<double> grad_norm;  // with clipping: the gradient's global norm before it
  if (s.dist->active()) {
    applied = s.dist->step(*s.be, *s.step, *s.opt, *s.scaler, s.accumulate, s.clip_norm, sc, grad_norm);
  } else if (s.scaler->enabled() || s.clip_norm > 0) {
    s.be->run_step("forward_backward", [&] { s.step->forward_backward(); });
    std::vector<const Tensor*> grads;
    for (Parameter* p : s.step->params()) grads.push_back(&p->grad);
    if (s.scaler->enabled()) applied = s.scaler->update(s.be->all_finite(grads));
    if (applied && s.clip_norm > 0) grad_norm = clip_gradient(*s.be, sc, s.be->sum_squares(grads), s.clip_norm);
    if (applied) s.opt->step(*s.be, s.step->params());
  } else {
    s.step->run_full_step("train_step");
  }
  if (applied) ++s.optimizer_steps;
  s.compress->after_step();
  float st32[2];
  s.be->download(s.step->stats(), st32, DType::F32);
  double st[2] = {st32[0], st32[1]};
  s.dist->sum(st);  // the ranks' loss and accuracy sums
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  s.samples_done += static_cast<double>(units);
  s.train_seconds += dt;

  StepMetrics m;
  m.step = step + 1;
  m.total_steps = s.total_steps;
  m.epoch = s.task->epoch(need);
  m.loss = st[0] / static_cast<double>(units);
  // A step whose loss is not finite has no accuracy either (argmax over NaN or infinite logits).
  m.train_accuracy = std::isfinite(m.loss) ? st[1] / static_cast<double>(units) : std::nan("");
  m.lr = lr;
  m.loss_scale = s.scaler->scale();
  m.skipped = !applied;
  m.grad_norm = grad_norm;
  m.skipped_steps = s.scaler->skipped();
  m.step_ms = dt * 1e3;
  m.samples_per_s = static_cast<double>(units) / dt;  // text: tokens per second
  m.wall_s = std::chrono::duration<double>(Clock::now() - s.t_start).count();
  m.precision = s.precision->name;
  const MemorySnapshot snap = s.be->ledger().snapshot();
  m.mem_current = to_bytes(snap.current);
  m.mem_peak = to_bytes(snap.peak);
  TrainingMemoryInputs mi;
  mi.params = s.params;
  mi.element_bytes = s.precision->element_bytes();
  mi.optimizer_state_total = s.opt_state_bytes;
  mi.offload = s.opt->host_step();
  mi.data_bytes = s.task->data_bytes();
  const bool fp8 = s.model->matmul_mode() == MatmulMode::Fp8;
  mi.activation_bytes = s.task->activation_bytes(s.step->batch(), mi.element_bytes, fp8);  // this rank's share
  const DeviceInfo info = s.be->info();
  // A GPU's fp8 units keep fp8 casts of each layer's input, weight and output gradient.
  const bool fp8_units = info.kind == DeviceKind::Cuda &&
                         std::find(info.formats.begin(), info.formats.end(), DType::F8E4M3) != info.formats.end();
  if (fp8 && fp8_units) mi.device_copies = fp8_copy_bytes(s.task->linear_shapes(s.batch));
  // This rank's shard (ZeRO over the data-parallel replicas, plan/memory_model.h) of its model
  // (its tensor-parallel shards); with one rank or DDP the whole model. Each rank predicts its own.
  const int stage = s.dist->active() ? zero_stage(s.dist->options().strategy) : 0;
  const MemoryByCategory predicted = predict_rank_memory(mi, {stage, s.dist->data_ranks(), s.dist->data_rank()});
  m.mem_predicted = to_bytes(predicted);
  m.ranks = s.dist->rank_metrics(dt, snap, predicted);
  if (s.dist->pipelined() && pipeline_timeline_due(step + 1)) {  // collective: every rank takes part
    const Json line = s.dist->pipeline_timeline(step + 1);
    if (s.record) append_pipeline_line(run_dir(), line);
  }
  m.device_used_bytes = info.used_bytes;
  m.device_total_bytes = info.total_bytes;
  m.runtime_context_bytes = info.runtime_context_bytes;
  // MFU against the measured peak where calibrated, and against the datasheet where it has one.
  const double flops_per_s = s.flops_per_sample * m.samples_per_s / s.dist->ranks();  // of all the ranks' devices
  if (const double peak = info.peak_for(s.precision->compute, s.precision->matmul); peak > 0)
    m.mfu_datasheet = flops_per_s / (peak * 1e12);
  const double measured = measured_peak(flops_per_s);
  m.mfu = measured > 0 ? flops_per_s / (measured * 1e12) : m.mfu_datasheet;
  if (s.kernel_timing) {
    m.kernel_times = s.be->kernel_times();
    s.be->reset_kernel_times();
  }
  if (s.calibration && (step == 0 || !m.kernel_times.empty())) m.roofline = s.calibration;
  if (!s.monitor) s.monitor = std::make_unique<SystemMonitor>(info.kind == DeviceKind::Cuda ? info.index : -1);
  if (auto sys = s.monitor->sample_if_due(m.wall_s)) m.system = *sys;
  m.event = event;
  if (step == 0 || !event.empty()) compression_metrics();
  m.sparsity = s.sparsity;
  m.bits_per_weight = s.bits;
  const bool last = step + 1 == s.total_steps;
  if (last || (s.eval_every > 0 ? (step + 1) % s.eval_every == 0 : s.task->end_of_epoch(need))) {
    double vl = 0, va = 0;
    s.task->evaluate(*s.be, *s.step, s.step->batch(), vl, va);
    s.dist->pipeline_result(vl, va);  // the last stage's, on every rank
    m.val_loss = vl;
    m.val_accuracy = va;
  }
  return m;
}

void Trainer::fill_summary(RunSummary& sum, long steps, double last_loss) {
  State& s = *m_state;
  sum.steps = steps;
  sum.epochs = static_cast<double>(steps) / static_cast<double>(std::max(1L, s.steps_per_epoch));
  sum.final_train_loss = last_loss;
  sum.samples_per_s = s.train_seconds > 0 ? s.samples_done / s.train_seconds : 0.0;
  sum.skipped_steps = s.scaler->skipped();
  sum.precision = s.precision->name;
  sum.peak_bytes = to_bytes(s.be->ledger().snapshot().peak);
  sum.ranks = s.dist->ranks();
  if (sum.ranks > 1) {
    sum.dist_strategy = dist_strategy_name(s.dist->options().strategy);
    sum.dist_layout = dist_layout_text(s.dist->options(), sum.ranks);
  }
  sum.wall_s = std::chrono::duration<double>(Clock::now() - s.t_start).count();
}

void Trainer::finish(RunSummary& sum, long steps, double last_loss) {
  State& s = *m_state;
  fill_summary(sum, steps, last_loss);
  s.dist->finish_training();  // ZeRO: every rank holds the whole model again
  if (sum.status != "diverged") {  // a diverged run has no test metrics: null in summary.json, not 0
    double vl = 0, va = 0;
    s.task->evaluate(*s.be, *s.step, s.step->batch(), vl, va);
    s.dist->pipeline_result(vl, va);
    sum.test_loss = vl;
    sum.test_accuracy = va;
  }
  const bool save = m_config.get_bool("run.save_weights") && sum.status != "diverged";
  // Tensor parallelism: the group assembles the whole model from its shards (collective).
  const std::unique_ptr<Model> whole = save ? s.dist->whole_model(*s.be, *s.model) : nullptr;
  if (!s.record) return;  // ranks other than 0 write nothing
  if (save && s.adapted) {  // the merged weights W' the run evaluated with, and the adapters beside them
    const std::string memory = s.adapted->memory(s.opt_state_bytes).to_json().dump(2) + "\n";  // as it ran
    s.adapted->fold(*s.be);
    save_model_weights(*s.be, s.adapted->base(), m_config, s.record->weights_path());
    save_adapters(*s.be, *s.adapted, sum.run_dir, m_config);
    write_file_atomic(sum.run_dir + "/finetune_memory.json", memory);
  } else if (save) {
    save_model_weights(*s.be, whole ? *whole : *s.model, m_config, s.record->weights_path());
  }
  sum.wall_s = std::chrono::duration<double>(Clock::now() - s.t_start).count();
  s.compress->finish(sum.run_dir);
  s.record->write_summary(sum);
}

RunParts Trainer::run_parts() {
  State& s = *m_state;
  RunParts parts{*s.be, *s.model, *s.opt, *s.scaler, *s.task, *s.compress, s.dist->sharded()};
  parts.tensor = s.dist->tensor_group();
  parts.writes = s.dist->is_root();
  return parts;
}

long Trainer::restore_checkpoint(double& last_loss) {
  State& s = *m_state;
  const RunParts parts = run_parts();
  const RunProgress p = restore_run_checkpoint(m_resume_dir, m_config, parts);
  s.total_steps = p.total_steps;  // as the run began (train.accumulate may have changed since)
  s.schedule.total_steps = p.total_steps;
  s.steps_per_epoch = p.steps_per_epoch;
  s.optimizer_steps = p.optimizer_steps;
  s.samples_done = p.samples_done;
  s.train_seconds = p.train_seconds;
  s.t_start = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(p.wall_s));
  s.checkpoint_step = p.step;
  last_loss = p.last_loss;
  if (s.dist->is_root()) s.record = std::make_unique<RunRecord>(m_resume_dir, RunRecord::ResumeAt{p.step});
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_run_dir = m_resume_dir;
  }
  compression_metrics();
  if (m_callbacks.on_notice) {
    std::string n =
        "resuming " + m_resume_dir + " at step " + std::to_string(p.step) + " of " + std::to_string(p.total_steps);
    if (s.record && s.record->resumed_metrics_step() < p.step)
      n += " (metrics.jsonl had lost the lines after step " + std::to_string(s.record->resumed_metrics_step()) + ")";
    m_callbacks.on_notice(n);
  }
  return p.step;
}

void Trainer::write_checkpoint(long steps, double last_loss) {
  State& s = *m_state;
  if (s.checkpoint_every <= 0 || steps <= s.checkpoint_step) return;
  // Rank 0 writes it, with each rank's shard when sharded, and the tensor-parallel group's gathered.
  if (!s.record && !s.dist->sharded() && !s.dist->tensor_group()) return;
  RunProgress p;
  p.step = steps;
  p.optimizer_steps = s.optimizer_steps;
  p.total_steps = s.total_steps;
  p.steps_per_epoch = s.steps_per_epoch;
  p.last_loss = last_loss;
  p.samples_done = s.samples_done;
  p.train_seconds = s.train_seconds;
  p.wall_s = std::chrono::duration<double>(Clock::now() - s.t_start).count();
  try {
    if (s.record) s.record->flush();  // the record reaches the checkpoint's step (steps.bin's blocks)
    write_run_checkpoint(run_dir(), p, m_config, run_parts());
    s.checkpoint_step = steps;
  } catch (const Error& e) {
    if (m_callbacks.on_notice)
      m_callbacks.on_notice("checkpoint after step " + std::to_string(steps) +
                            " not written (the previous one is kept): " + e.what());
  }
}

void Trainer::fail(RunSummary& sum, long steps, double last_loss, const std::string& why) {
  fill_summary(sum, steps, last_loss);
  sum.status = "failed";
  sum.message = why + "; the run stopped after step " + std::to_string(steps) +
                " and its record keeps what was written before";
  if (!m_state->record) return;  // ranks other than 0 write nothing
  try {
    m_state->record->write_summary(sum);
  } catch (const Error& e) {
    sum.message += "; the failed run's summary.json could not be written either: " + std::string(e.what());
  }
}

RunSummary Trainer::run() {
  m_state = std::make_unique<State>();
  State& s = *m_state;
  s.t_start = Clock::now();
  setup();  // everything that can fail on bad input fails here, before any step

  double last_loss = std::nan("");  // no value until a step's loss is finite
  long step = m_resume_dir.empty() ? 0 : restore_checkpoint(last_loss);
  RunSummary sum;
  sum.params = s.params;
  sum.device = s.be->info().id();
  sum.run_dir = run_dir();
  try {
    for (; step < s.total_steps; ++step) {
      std::string event;
      if (!s.dist->keep_going(drain_commands(event))) {  // the ranks stop at the same step
        sum.status = "stopped";
        sum.message = "stopped at step " + std::to_string(step);
        write_checkpoint(step, last_loss);  // the stop loses no step
        break;
      }
      const StepMetrics m = train_step(step, std::move(event));
      const bool finite = std::isfinite(m.loss);
      const bool scaler_handles = s.scaler->enabled() && s.scaler->consecutive_skips() < 50;
      if (s.record) s.record->append(m);
      sum.dist_times.add(m);
      if (m_callbacks.on_step) m_callbacks.on_step(m);
      if (!finite && !scaler_handles) {
        sum.status = "diverged";
        sum.message = "diverged at step " + std::to_string(step + 1) + ": the training loss is " +
                      (std::isnan(m.loss) ? "NaN" : "infinite") + " (try a lower optim.lr" +
                      (s.precision->name == "fp16" ? "" : " or another precision") + ")";
        ++step;
        break;
      }
      if (finite) last_loss = m.loss;
      if (s.checkpoint_every > 0 && (step + 1) % s.checkpoint_every == 0 && step + 1 < s.total_steps)
        write_checkpoint(step + 1, last_loss);
    }
    finish(sum, step, last_loss);
  } catch (const Error& e) {
    // A write of the record failed (or the device did) after setup: the run ends "failed", keeping
    // every line written before. `step` counts the steps whose metrics line was written.
    fail(sum, step, last_loss, e.what());
    if (s.dist->active()) throw;  // the launcher ends every rank (none waits for this one)
  }
  s.record.reset();  // releases the run folder's lock
  return sum;
}

}  // namespace trainlab
