#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/error.h"

namespace trainlab {

namespace {

int64_t at(const MemoryByCategory& m, MemCategory c) { return m[static_cast<size_t>(c)]; }

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

void need_int(const char* option, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw Error(std::string(option) + " " + std::to_string(v) + ": expected an integer in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
}

// (lo, hi]: positive, finite numbers.
void need_positive(const char* option, double v, double hi) {
  if (!(v > 0.0 && v <= hi))
    throw Error(std::string(option) + " " + num(v) + ": expected a number in (0, " + num(hi) + "]");
}

void need_divides(const char* a, int64_t va, const char* b, int64_t vb) {
  if (vb % va != 0)
    throw Error(std::string(a) + " " + std::to_string(va) + " must divide " + b + " " + std::to_string(vb));
}

constexpr int64_t kMaxCount = int64_t{1} << 20;  // layers, batch, GPUs, micro-batches ...
constexpr int64_t kMaxDim = int64_t{1} << 24;    // widths, sequences, vocabularies

void validate_model(const PlanModel& m) {
  switch (m.kind) {
    case PlanModelKind::Params:
      if (!(m.params >= 1 && m.params <= int64_t{1000000000000000}))
        throw Error("--params " + std::to_string(m.params) + ": expected an integer in [1, 1e15]");
      need_int("--seq", m.sample_tokens, 1, kMaxDim);
      break;
    case PlanModelKind::Mlp:
      if (m.mlp_sizes.size() < 2) throw Error("an MLP needs at least an input and an output size");
      for (int64_t v : m.mlp_sizes) need_int("MLP layer size", v, 1, kMaxDim);
      break;
    case PlanModelKind::Transformer: {
      const CharGptConfig& c = m.transformer;
      need_int("--layers", c.layers, 1, kMaxCount);
      need_int("--hidden", c.dim, 1, kMaxDim);
      need_int("--heads", c.heads, 1, kMaxDim);
      need_divides("--heads", c.heads, "--hidden", c.dim);
      need_int("--seq", c.context, 1, kMaxDim);
      need_int("--vocab", c.vocab, 2, kMaxDim);
      if (!(c.dropout >= 0.0 && c.dropout < 1.0))
        throw Error("--dropout " + num(c.dropout) + ": expected a probability in [0, 1)");
      break;
    }
  }
}

// The schedule's options, named as trainlab-cli plan spells them (dist::validate_pipeline checks
// the same for a table's callers).
void validate_schedule(const Layout& l) {
  need_int("--virtual-stages", l.virtual_stages, 1, kMaxCount);
  const std::string name = dist::pipeline_schedule_name(l.schedule);
  if (l.virtual_stages > 1 && l.schedule != dist::PipelineSchedule::Interleaved)
    throw Error("--virtual-stages " + std::to_string(l.virtual_stages) + " splits a GPU's layers into chunks for "
                "--schedule interleaved: expected 1 with --schedule " + name);
  if (l.schedule == dist::PipelineSchedule::Interleaved && l.micro_batches % l.pp != 0)
    throw Error("--schedule interleaved sends micro-batches round the stages in groups of --pp " + std::to_string(l.pp) +
                ": --micro-batches " + std::to_string(l.micro_batches) + " must be a multiple of it");
}

// Micro-batches whose activations stage i holds at once: 1 without a pipeline; else the
// schedule's peak (interleaved: its chunk units over v, rounded up).
int64_t stage_in_flight(const Layout& l, int64_t i) {
  if (l.pp == 1) return 1;
  const int64_t units = dist::pipeline_peak_in_flight(l.schedule, l.pp, l.micro_batches, l.virtual_stages, i);
  return (units + l.virtual_stages - 1) / l.virtual_stages;
}

// The schedule's idle and busy time a stage: simulated where the table has at most 2^16 actions,
// else the closed forms (equal to the simulation: tests/unit/test_pipeline_schedule.cpp).
dist::PipelineBubble schedule_bubble(const Layout& l) {
  constexpr int64_t kSimulated = int64_t{1} << 16;
  if (l.pp * l.micro_batches * l.virtual_stages > kSimulated)
    return dist::pipeline_bubble(l.schedule, l.pp, l.micro_batches, l.virtual_stages);
  const int v = static_cast<int>(l.virtual_stages);
  const dist::PipelineTable t = dist::build_schedule(l.schedule, static_cast<int>(l.pp), static_cast<int>(l.micro_batches), v);
  const dist::PipelineTiming r = dist::simulate(t, dist::chunk_costs({}, v));
  double idle = 0;
  for (double x : r.idle) idle += x;
  idle /= static_cast<double>(l.pp);
  return {idle, r.makespan - idle};
}

// Rough upper bounds (in double) of the largest byte counts, so that the int64 arithmetic of the
// exact formulas cannot overflow: beyond 10^18 bytes a GPU the plan is refused.
void guard_size(const PlanSetup& s, const Layout& l) {
  const PlanModel& m = s.model;
  const double b = static_cast<double>(s.micro_batch), inflight = static_cast<double>(stage_in_flight(l, 0));
  double worst = 0;
  if (m.kind == PlanModelKind::Transformer) {
    const CharGptConfig& c = m.transformer;
    const double sq = static_cast<double>(c.context), N = b * sq, L = static_cast<double>(c.layers);
    const double D = static_cast<double>(c.dim), V = static_cast<double>(c.padded_vocab());
    const double params = 12.0 * D * D * L + 13.0 * D * L + 2.0 * V * D + sq * D;
    worst = std::max({params * 20.0, N * D * 8.0 * (20.0 * L + 10.0) * inflight,
                      static_cast<double>(c.heads) * sq * sq * b * 9.0 * L * inflight, N * V * 8.0});
  } else if (m.kind == PlanModelKind::Params) {
    worst = static_cast<double>(m.params) * 20.0;
  } else {
    double widths = 0, params = 0;
    for (size_t i = 0; i < m.mlp_sizes.size(); ++i) {
      widths += static_cast<double>(m.mlp_sizes[i]);
      if (i > 0) params += static_cast<double>(m.mlp_sizes[i - 1]) * static_cast<double>(m.mlp_sizes[i] + 1);
    }
    worst = std::max(params * 20.0, b * widths * 12.0);
  }
  if (!(worst < 1e18))
    throw Error("this model and micro-batch need more than 10^18 bytes a GPU (--batch, --seq, --hidden, --layers): "
                "too large to plan");
}

}  // namespace

const std::vector<GpuSpec>& gpu_specs() {
  // Datasheets: H100 SXM 80 GB and H200 SXM 141 GB with NVLink 4 (900 GB/s both directions) and
  // a 400 Gb/s NIC per GPU; A100 SXM 80 GB with NVLink 3 (600 GB/s) and 200 Gb/s.
  static const std::vector<GpuSpec> table{
      {"h100", "NVIDIA H100 SXM", 90, 80e9, 450e9, 50e9},
      {"h200", "NVIDIA H200 SXM", 90, 141e9, 450e9, 50e9},
      {"a100", "NVIDIA A100 SXM 80GB", 80, 80e9, 300e9, 25e9},
  };
  return table;
}

const GpuSpec& gpu_spec(const std::string& name, const std::string& what) {
  std::string names;
  for (const GpuSpec& g : gpu_specs()) {
    if (g.name == name) return g;
    names += (names.empty() ? "" : ", ") + g.name;
  }
  throw Error(what + " '" + name + "': expected one of " + names);
}

double gpu_peak_flops(const GpuSpec& g, DType compute, MatmulMode mode) {
  DeviceInfo info;
  info.peak_tflops = datasheet_peaks(g.compute_capability);
  return info.peak_for(compute, mode) * 1e12;
}

int64_t PlanModel::total_params() const {
  switch (kind) {
    case PlanModelKind::Params: return params;
    case PlanModelKind::Mlp: {
      int64_t p = 0;
      for (size_t i = 1; i < mlp_sizes.size(); ++i) p += mlp_sizes[i - 1] * mlp_sizes[i] + mlp_sizes[i];
      return p;
    }
    case PlanModelKind::Transformer: return transformer_slice_params(transformer, {transformer.layers, true, true, 1});
  }
  return 0;
}

std::vector<ParamShapeInfo> PlanModel::param_shapes() const {
  std::vector<ParamShapeInfo> out;
  switch (kind) {
    case PlanModelKind::Params: {
      const int64_t side = std::max<int64_t>(2, std::llround(std::sqrt(static_cast<double>(params))));
      out.push_back({{side, side}, false});
      break;
    }
    case PlanModelKind::Mlp:
      for (size_t i = 1; i < mlp_sizes.size(); ++i) {
        out.push_back({{mlp_sizes[i], mlp_sizes[i - 1]}, false});
        out.push_back({{mlp_sizes[i]}, false});
      }
      break;
    case PlanModelKind::Transformer: {  // nn/transformer.cpp's declarations
      const CharGptConfig& c = transformer;
      const int64_t V = c.padded_vocab(), D = c.dim;
      out.push_back({{V, D}, true});
      out.push_back({{c.context, D}, true});
      for (int64_t l = 0; l < c.layers; ++l) {
        for (int k = 0; k < 4; ++k) out.push_back({{D}, false});
        for (const auto& [o, in] : {std::pair{3 * D, D}, std::pair{D, D}, std::pair{4 * D, D}, std::pair{D, 4 * D}}) {
          out.push_back({{o, in}, false});
          out.push_back({{o}, false});
        }
      }
      out.push_back({{D}, false});
      out.push_back({{D}, false});
      out.push_back({{V, D}, false});
      break;
    }
  }
  return out;
}

int64_t PlanModel::tokens_per_sample() const {
  switch (kind) {
    case PlanModelKind::Params: return sample_tokens;
    case PlanModelKind::Mlp: return 1;
    case PlanModelKind::Transformer: return transformer.context;
  }
  return 1;
}

double PlanModel::train_flops_per_token() const {
  if (kind == PlanModelKind::Transformer) return transformer_train_flops_per_token(transformer, transformer.context);
  return mlp_train_flops_per_sample(total_params());  // 6 per parameter and sample (or token)
}

const std::vector<std::string>& plan_model_presets() {
  static const std::vector<std::string> names{"digits-mlp", "char-gpt-tiny", "char-gpt-small", "char-gpt-gpt2"};
  return names;
}

PlanModel plan_model_preset(const std::string& name, const std::string& what) {
  PlanModel m;
  m.name = name;
  if (name == "digits-mlp") {
    // train/task.cpp's digits MLP over the 8x8 digits: 64 features, 10 classes.
    m.kind = PlanModelKind::Mlp;
    m.mlp_sizes = {64, 256, 256, 10};
    return m;
  }
  for (const char* p : {"tiny", "small", "gpt2"}) {
    if (name == std::string("char-gpt-") + p) {
      m.kind = PlanModelKind::Transformer;
      m.transformer = CharGptConfig::preset(p);  // vocab 65: tinyshakespeare's characters
      return m;
    }
  }
  std::string names;
  for (const auto& n : plan_model_presets()) names += (names.empty() ? "" : ", ") + n;
  throw Error(what + " '" + name + "': expected one of " + names);
}

int64_t StagePlan::total() const {
  int64_t t = 0;
  for (int64_t v : bytes) t += v;
  return t - at(bytes, MemCategory::Host);
}

void validate_plan(const PlanSetup& s, const Layout& l) {
  validate_model(s.model);
  need_int("--batch", s.micro_batch, 1, kMaxCount);
  need_int("--gpus", s.gpus, 1, kMaxCount);
  need_int("--nodes", s.nodes, 1, s.gpus);
  if (s.gpus % s.nodes != 0)
    throw Error("--gpus " + std::to_string(s.gpus) + " must be a multiple of --nodes " + std::to_string(s.nodes) +
                " (the same number of GPUs in every node)");
  if (s.element_bytes != 2 && s.element_bytes != 4)
    throw Error("--precision " + s.precision + ": element bytes " + std::to_string(s.element_bytes) + ", expected 2 or 4");
  if (!(s.optimizer_state_bytes >= 0.0 && s.optimizer_state_bytes <= 64.0))
    throw Error("optimizer state bytes " + num(s.optimizer_state_bytes) + ": expected a number in [0, 64]");
  need_positive("--gpu-memory", s.gpu_memory_bytes / 1e9, 1e6);
  need_positive("--mfu", s.mfu, 1.0);
  need_positive("--nvlink-gbs", s.nvlink_bytes_per_s / 1e9, 1e6);
  need_positive("--network-gbs", s.network_bytes_per_s / 1e9, 1e6);
  if (!(s.peak_flops > 0.0 && std::isfinite(s.peak_flops)))
    throw Error("--precision " + s.precision + ": the " + s.gpu + " has no peak for it (no such units); expected a "
                "precision the GPU computes in");
  need_int("--tp", l.tp, 1, s.gpus);
  need_int("--pp", l.pp, 1, s.gpus);
  if (s.gpus % (l.tp * l.pp) != 0)
    throw Error("--tp " + std::to_string(l.tp) + " x --pp " + std::to_string(l.pp) + " = " + std::to_string(l.tp * l.pp) +
                " must divide --gpus " + std::to_string(s.gpus) + " (DP = GPUs / (TP x PP))");
  if (l.dp * l.tp * l.pp != s.gpus)
    throw Error("DP " + std::to_string(l.dp) + " x --tp " + std::to_string(l.tp) + " x --pp " + std::to_string(l.pp) +
                " must equal --gpus " + std::to_string(s.gpus));
  need_int("--zero", l.zero, 0, 3);
  if (l.zero > 0 && l.dp == 1)
    throw Error("--zero " + std::to_string(l.zero) + " shards over the data-parallel ranks: it needs DP >= 2 (here DP = "
                "--gpus / (--tp x --pp) = 1)");
  if (s.offload && l.zero > 0)
    throw Error("--zero " + std::to_string(l.zero) + " shards the masters and optimizer state that --offload cpu keeps "
                "in host memory: expected --zero 0 with --offload cpu");
  need_int("--micro-batches", l.micro_batches, 1, kMaxCount);
  validate_schedule(l);
  if (s.model.kind == PlanModelKind::Transformer) {
    need_divides("--tp", l.tp, "--heads", s.model.transformer.heads);
    if (l.sequence_parallel && l.tp == 1)
      throw Error("--sequence-parallel splits the tokens over the tensor-parallel GPUs: it needs --tp 2 or more");
    if (l.sequence_parallel) need_divides("--tp", l.tp, "--seq", s.model.transformer.context);
    need_divides("--pp", l.pp, "--layers", s.model.transformer.layers);
    if (s.model.transformer.layers % (l.pp * l.virtual_stages) != 0)
      throw Error("--pp " + std::to_string(l.pp) + " x --virtual-stages " + std::to_string(l.virtual_stages) +
                  " must divide --layers " + std::to_string(s.model.transformer.layers) +
                  " (each GPU holds --virtual-stages chunks of layers)");
    need_int("--recompute-every", l.recompute_every, 1, s.model.transformer.layers / l.pp);
  } else {
    if (l.tp != 1 || l.pp != 1)
      throw Error("--tp and --pp split a transformer's layers: give its shape (--layers, --hidden, --heads, --seq, "
                  "--vocab) or a char-gpt preset");
    if (l.recompute != Recompute::None)
      throw Error(std::string("--recompute ") + recompute_name(l.recompute) + ": recomputation applies to transformers; "
                  "expected none here");
  }
  guard_size(s, l);
}

namespace {

// One stage's bytes per GPU: its parameters sharded by ZeRO, its activations, its buffers.
StagePlan plan_stage(const PlanSetup& s, const Layout& l, int64_t i) {
  const PlanModel& m = s.model;
  StagePlan st;
  st.index = i;
  st.in_flight = stage_in_flight(l, i);
  TrainingMemoryInputs mi;
  mi.element_bytes = s.element_bytes;
  switch (m.kind) {
    case PlanModelKind::Params: st.params = m.params; break;
    case PlanModelKind::Mlp:
      st.params = m.total_params();
      st.layers = static_cast<int64_t>(m.mlp_sizes.size()) - 1;
      mi.activation_bytes = mlp_activation_bytes(m.mlp_sizes, s.micro_batch, s.element_bytes, m.mlp_gelu);
      if (s.fp8_matmul && s.fp8_copies)
        mi.device_copies = fp8_copy_bytes(mlp_linear_shapes(m.mlp_sizes, s.micro_batch, m.mlp_gelu));
      break;
    case PlanModelKind::Transformer: {
      const CharGptConfig& c = m.transformer;
      const ModelSlice slice{c.layers / l.pp, i == 0, i == l.pp - 1, l.tp};
      st.layers = slice.layers;
      st.params = transformer_slice_params(c, slice);
      ActivationInputs ai;
      ai.batch = s.micro_batch;
      ai.seq = c.context;
      ai.element_bytes = s.element_bytes;
      ai.fp8_matmul = s.fp8_matmul;
      ai.recompute = l.recompute;
      ai.recompute_every = l.recompute_every;
      ai.step_buffers = s.count == ActivationCount::Lab;
      ai.sequence_parallel = l.sequence_parallel;
      mi.activation_bytes = stage_activations(s.count, c, ai, slice).total(st.in_flight);
      // ZeRO 3 gathers a layer's parameters before use, the next one prefetched: two layers'
      // worth; a pipeline stage sends and receives one b s h activation at a time.
      if (l.zero >= 3) mi.communication_bytes += 2 * transformer_block_params(c, l.tp) * s.element_bytes;
      if (l.pp > 1) mi.communication_bytes += 2 * s.micro_batch * c.context * c.dim * s.element_bytes;
      if (s.fp8_matmul && s.fp8_copies)
        mi.device_copies = fp8_copy_bytes(char_gpt_linear_shapes(c, slice.layers, slice.last, s.micro_batch, c.context, l.tp));
      break;
    }
  }
  mi.params = st.params;
  mi.offload = s.offload;
  mi.optimizer_state_total = std::llround(s.optimizer_state_bytes * static_cast<double>(st.params));
  st.bytes = predict_rank_memory(mi, {l.zero, l.dp, 0});
  return st;
}

StepTime plan_time(const PlanSetup& s, const Layout& l, const PlanResult& r) {
  const PlanModel& m = s.model;
  StepTimeInputs in;
  in.tokens = static_cast<double>(s.micro_batch * m.tokens_per_sample()) * static_cast<double>(l.micro_batches * l.dp);
  in.model_flops = m.train_flops_per_token() * in.tokens;
  in.hardware_flops = in.model_flops;
  in.gpus = s.gpus;
  in.peak_flops = s.peak_flops;
  in.mfu = s.mfu;
  if (m.kind == PlanModelKind::Transformer) {
    const CharGptConfig& c = m.transformer;
    in.hardware_flops += transformer_recompute_flops_per_token(c, c.context, l.recompute, l.recompute_every, s.count, l.pp) *
                         in.tokens;
    const double act = static_cast<double>(s.micro_batch * c.context * c.dim * s.element_bytes);
    TensorParallelTraffic tt;  // the stage with the embedding (the last one too without pipelining)
    tt.layers = c.layers / l.pp;
    tt.micro_batches = l.micro_batches;
    tt.tp = l.tp;
    tt.activation_bytes = act;
    tt.layernorm_bytes = static_cast<double>(c.dim * s.element_bytes);
    tt.full_recompute = l.recompute == Recompute::Full;
    tt.sequence_parallel = l.sequence_parallel;
    tt.last = l.pp == 1;
    in.tp_bytes = tensor_parallel_step_bytes(tt);
    in.pp_bytes = pipeline_parallel_bytes(l.micro_batches, act, l.pp);
  }
  in.dp_bytes = data_parallel_bytes(static_cast<double>(r.stages[r.worst].params * s.element_bytes), l.dp, l.zero);
  // TP innermost: a group stays within a node when the node's GPUs are a multiple of its span.
  const int64_t per_node = s.gpus / s.nodes;
  in.tp_link = per_node % l.tp == 0 ? s.nvlink_bytes_per_s : s.network_bytes_per_s;
  in.pp_link = per_node % (l.tp * l.pp) == 0 ? s.nvlink_bytes_per_s : s.network_bytes_per_s;
  in.dp_link = s.nodes == 1 ? s.nvlink_bytes_per_s : s.network_bytes_per_s;
  in.pp = l.pp;
  in.micro_batches = l.micro_batches;
  if (l.pp > 1) {
    const dist::PipelineBubble b = schedule_bubble(l);
    in.pipeline_idle = b.idle;
    in.pipeline_busy = b.busy;
  }
  return step_time(in);
}

}  // namespace

dist::PipelineTable plan_schedule(const Layout& l) {
  validate_schedule(l);
  return dist::build_schedule(l.schedule, static_cast<int>(l.pp), static_cast<int>(l.micro_batches),
                              static_cast<int>(l.virtual_stages));
}

PlanResult plan_layout(const PlanSetup& s, const Layout& l) {
  validate_plan(s, l);
  PlanResult r;
  r.layout = l;
  r.params_total = s.model.total_params();
  r.activations_known = s.model.kind != PlanModelKind::Params;
  for (int64_t i = 0; i < l.pp; ++i) {
    r.stages.push_back(plan_stage(s, l, i));
    if (r.stages.back().total() > r.stages[r.worst].total()) r.worst = r.stages.size() - 1;
  }
  r.per_gpu = r.stages[r.worst].bytes;
  r.per_gpu_total = r.stages[r.worst].total();
  r.fits = static_cast<double>(r.per_gpu_total) <= s.gpu_memory_bytes;
  r.time = plan_time(s, l, r);
  if (l.pp > 1) r.pipeline_warning = dist::pipeline_warning(l.schedule, l.pp, l.micro_batches, l.virtual_stages);
  return r;
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  std::sort(d.begin(), d.end());
  return d;
}

// Interleaving needs M a multiple of PP and PP x v dividing the layers; a search skips the
// layouts that break it.
bool schedule_suits(const PlanSetup& s, const Layout& l) {
  if (l.schedule != dist::PipelineSchedule::Interleaved) return true;
  if (l.micro_batches % l.pp != 0) return false;
  return s.model.kind != PlanModelKind::Transformer || s.model.transformer.layers % (l.pp * l.virtual_stages) == 0;
}

}  // namespace

SearchResult search_layouts(const PlanSetup& s, const SearchSpace& space) {
  Layout probe;
  probe.dp = s.gpus;
  validate_plan(s, probe);  // the setup alone (a pure data-parallel layout always applies)
  const bool tf = s.model.kind == PlanModelKind::Transformer;
  SearchResult out;
  need_int("--micro-batches", space.micro_batches, 1, kMaxCount);
  probe.schedule = space.schedule;
  probe.virtual_stages = space.virtual_stages;
  validate_schedule(probe);
  out.global_batch = space.global_batch > 0 ? space.global_batch : s.micro_batch * space.micro_batches * s.gpus;
  need_int("--global-batch", out.global_batch, 1, int64_t{1} << 50);
  std::vector<int64_t> tps = space.tp, pps = space.pp;
  if (tps.empty())
    for (int64_t t : divisors(s.gpus))
      if (t == 1 || (tf && s.model.transformer.heads % t == 0)) tps.push_back(t);
  if (pps.empty())
    for (int64_t p : divisors(s.gpus))
      if (p == 1 || (tf && s.model.transformer.layers % p == 0)) pps.push_back(p);
  std::vector<Recompute> rcs = space.recompute;
  if (rcs.empty()) rcs = tf ? std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full}
                           : std::vector<Recompute>{Recompute::None};
  for (int64_t tp : tps)
    for (int64_t pp : pps) {
      if (s.gpus % (tp * pp) != 0) continue;
      const int64_t dp = s.gpus / (tp * pp);
      if (out.global_batch % (s.micro_batch * dp) != 0) continue;
      std::vector<int> zeros = space.zero;
      if (zeros.empty()) zeros = dp == 1 || s.offload ? std::vector<int>{0} : std::vector<int>{0, 1, 2, 3};
      for (int zero : zeros)
        for (Recompute rc : rcs) {
          Layout l{dp, tp, pp, zero, rc, space.recompute_every, out.global_batch / (s.micro_batch * dp)};
          if (pp > 1) {
            l.schedule = space.schedule;
            l.virtual_stages = space.virtual_stages;
            if (!schedule_suits(s, l)) continue;
          }
          PlanResult r = plan_layout(s, l);  // a fixed value that does not suit the model throws here
          ++out.considered;
          if (r.fits) out.fit.push_back(std::move(r));
        }
    }
  std::stable_sort(out.fit.begin(), out.fit.end(), [](const PlanResult& a, const PlanResult& b) {
    if (a.time.step_s != b.time.step_s) return a.time.step_s < b.time.step_s;
    return a.per_gpu_total < b.per_gpu_total;
  });
  return out;
}

namespace {

// total_bytes: the GPU's (host_bytes, offload's host memory, apart).
Json bytes_json(const MemoryByCategory& m) {
  int64_t total = 0;
  for (int64_t v : m) total += v;
  return {{"weights_bytes", at(m, MemCategory::Weights)},
          {"gradients_bytes", at(m, MemCategory::Gradients)},
          {"optimizer_bytes", at(m, MemCategory::Optimizer)},
          {"activations_bytes", at(m, MemCategory::Activations)},
          {"communication_bytes", at(m, MemCategory::Communication)},
          {"host_bytes", at(m, MemCategory::Host)},
          {"total_bytes", total - at(m, MemCategory::Host)}};
}

Json model_json(const PlanModel& m) {
  Json j = {{"name", m.name}, {"params", m.total_params()}};
  switch (m.kind) {
    case PlanModelKind::Params:
      j["kind"] = "params";
      j["seq"] = m.sample_tokens;
      break;
    case PlanModelKind::Mlp:
      j["kind"] = "mlp";
      j["sizes"] = m.mlp_sizes;
      j["activation"] = m.mlp_gelu ? "gelu" : "relu";
      break;
    case PlanModelKind::Transformer: {
      const CharGptConfig& c = m.transformer;
      j["kind"] = "transformer";
      j["layers"] = c.layers;
      j["hidden"] = c.dim;
      j["heads"] = c.heads;
      j["seq"] = c.context;
      j["vocab"] = c.padded_vocab();
      j["dropout"] = c.dropout;
      break;
    }
  }
  return j;
}

}  // namespace

Json plan_setup_json(const PlanSetup& s) {
  return {{"model", model_json(s.model)},
          {"micro_batch", s.micro_batch},
          {"precision", s.precision},
          {"element_bytes", s.element_bytes},
          {"fp8_copies", s.fp8_matmul && s.fp8_copies},
          {"optimizer", s.optimizer},
          {"optimizer_state_bytes", s.optimizer_state_bytes},
          {"offload", s.offload ? "cpu" : "none"},
          {"activations", activation_count_name(s.count)},
          {"gpu", s.gpu},
          {"gpu_memory_bytes", s.gpu_memory_bytes},
          {"peak_flops", s.peak_flops},
          {"mfu", s.mfu},
          {"nvlink_bytes_per_s", s.nvlink_bytes_per_s},
          {"network_bytes_per_s", s.network_bytes_per_s},
          {"gpus", s.gpus},
          {"nodes", s.nodes}};
}

Json plan_result_json(const PlanResult& r) {
  const Layout& l = r.layout;
  Json j;
  j["layout"] = {{"dp", l.dp},
                 {"tp", l.tp},
                 {"pp", l.pp},
                 {"zero", l.zero},
                 {"recompute", recompute_name(l.recompute)},
                 {"recompute_every", l.recompute_every},
                 {"micro_batches", l.micro_batches},
                 {"sequence_parallel", l.sequence_parallel},
                 {"schedule", dist::pipeline_schedule_name(l.schedule)},
                 {"virtual_stages", l.virtual_stages}};
  j["per_gpu"] = bytes_json(r.per_gpu);
  j["per_gpu"]["stage"] = r.stages[r.worst].index;
  j["stages"] = Json::array();
  for (const StagePlan& st : r.stages) {
    Json sj = bytes_json(st.bytes);
    sj["stage"] = st.index;
    sj["layers"] = st.layers;
    sj["in_flight"] = st.in_flight;
    sj["params"] = st.params;
    j["stages"].push_back(sj);
  }
  j["fits"] = r.fits;
  j["activations_predicted"] = r.activations_known;
  j["params"] = r.params_total;
  if (!r.pipeline_warning.empty()) j["pipeline_warning"] = r.pipeline_warning;
  const StepTime& t = r.time;
  j["time"] = {{"step_s", t.step_s},
               {"compute_s", t.compute_s},
               {"communication_s", t.communication_s()},
               {"tp_comm_s", t.tp_s},
               {"pp_comm_s", t.pp_s},
               {"dp_comm_s", t.dp_s},
               {"bubble_s", t.bubble_s},
               {"bubble_fraction", t.bubble_fraction},
               {"tokens", t.tokens},
               {"tokens_per_s", t.tokens_per_s()},
               {"model_flops", t.model_flops},
               {"hardware_flops", t.hardware_flops},
               {"tp_bytes", t.tp_bytes},
               {"pp_bytes", t.pp_bytes},
               {"dp_bytes", t.dp_bytes}};
  return j;
}

}  // namespace trainlab
