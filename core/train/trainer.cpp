#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "backend/backend.h"
#include "compress/compression.h"
#include "data/text.h"
#include "io/weights.h"
#include "nn/model.h"
#include "nn/transformer.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/data_setup.h"
#include "train/run_record.h"
#include "train/training_step.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab {

using Clock = std::chrono::steady_clock;

double mlp_train_flops_per_sample(int64_t params) { return 6.0 * static_cast<double>(params); }

struct Trainer::State {
  std::unique_ptr<Backend> be;
  TrainTestSplit data;
  Tensor train_x, train_y, test_x, test_y;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<TrainingStep> step;
  std::unique_ptr<RunRecord> record;
  LrSchedule schedule;
  std::unique_ptr<LossScaler> scaler;
  std::unique_ptr<Compression> compress;  // QAT, pruning, distillation (compress/compression.h)
  DType dtype = DType::F32;
  std::string precision;
  int64_t batch = 0;
  int accumulate = 1;
  std::vector<int64_t> perm;
  size_t cursor = 0;
  long epoch_index = 0;
  long optimizer_steps = 0;  // applied updates (Adam's t)
  bool paused = false;
  // The character model (model.name = char-gpt): token windows instead of samples.
  bool text = false;
  TextCorpus corpus;
  Tensor train_tok, val_tok;
  int64_t ctx = 0;
  CharGpt* gpt = nullptr;
  std::mt19937_64 window_rng;
  std::vector<int64_t> val_starts;  // fixed, seeded validation windows
  double tokens_seen = 0.0;
};

namespace {

DType storage_dtype(const std::string& precision) {
  if (precision == "fp32" || precision == "tf32") return DType::F32;
  if (precision == "bf16") return DType::BF16;
  if (precision == "fp16") return DType::F16;
  if (precision == "fp8") return DType::F8E4M3;
  throw Error("unknown precision '" + precision + "'");
}

MemoryBytes to_bytes(const std::array<int64_t, kMemCategoryCount>& a) {
  MemoryBytes m;
  m.by_category = a;
  return m;
}

}  // namespace

Trainer::Trainer(Config config, TrainerCallbacks callbacks)
    : m_config(std::move(config)), m_callbacks(std::move(callbacks)) {}

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
    m_cv.wait(lock, [&] { return !m_commands.empty(); });
  }
}

void Trainer::apply_setting(const std::string& key, const Json& value, std::string& event) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw Error("unknown key '" + key + "'");
  if (!k->mid_run) throw Error("'" + key + "' cannot change while a run trains");
  const Json old = m_config.at(key);
  m_config.set_json(key, value, "mid-run change");
  const Json now = m_config.at(key);
  if (old == now) return;
  State& s = *m_state;
  if (key == "precision.dtype") {
    const std::string p = now.get<std::string>();
    const DType dt = storage_dtype(p);
    if (!s.be->supports(dt)) throw Error("device " + s.be->info().name + " has no " + p);
    s.model->set_compute_dtype(*s.be, dt);
    s.be->set_tf32(p == "tf32");
    s.be->set_fp8(p == "fp8");
    s.dtype = dt;
    s.precision = p;
    s.step->on_format_changed();
    s.scaler = std::make_unique<LossScaler>(m_config.get_float("precision.loss_scale.init"),
                                            m_config.get_int("precision.loss_scale.growth_interval"),
                                            p == "fp16" && m_config.get_bool("precision.loss_scale.enabled"));
  } else if (key == "optim.lr") {
    s.schedule.base_lr = now.get<double>();
  } else if (key == "train.accumulate") {
    s.accumulate = static_cast<int>(now.get<int64_t>());
    s.step->set_accumulate(s.accumulate);
  } else if ((key == "checkpoint.policy" || key == "checkpoint.k") && s.gpt) {
    s.gpt->set_checkpointing(checkpoint_policy_from_name(m_config.get_string("checkpoint.policy")),
                             m_config.get_int("checkpoint.k"));
  }
  if (s.compress) s.compress->on_setting(key, compress_options(m_config));
  s.be->invalidate_captures();
  std::string label = key.substr(key.rfind('.') + 1) + ": " + (old.is_string() ? old.get<std::string>() : old.dump()) +
                      " -> " + (now.is_string() ? now.get<std::string>() : now.dump());
  event += (event.empty() ? "" : "; ") + label;
}

RunSummary Trainer::run() {
  m_state = std::make_unique<State>();
  State& s = *m_state;
  const auto t_start = Clock::now();

  // --- setup: everything that can fail on bad input fails here, before any step ---------------
  std::string notice;
  s.be = create_backend(m_config.get_string("device.name"), &notice);
  if (!notice.empty() && m_callbacks.on_notice) m_callbacks.on_notice(notice);
  s.be->set_capture_enabled(m_config.get_bool("device.cuda_graph"));
  s.be->set_kernel_timing(m_config.get_bool("device.kernel_timing"));
  s.text = m_config.get_string("model.name") == "char-gpt";
  const auto seed = static_cast<uint64_t>(m_config.get_int("train.seed"));
  CharGptConfig gpt_cfg;
  if (s.text) {
    const std::string dn = m_config.get_string("data.name");
    std::string path = m_config.get_string("data.path");
    if (dn == "text" && path.empty()) throw Error("data.name=text needs data.path: the text file to train on");
    if (dn != "text" && dn != "tinyshakespeare" && dn != "digits")
      throw Error("model.name=char-gpt trains on text: data.name must be tinyshakespeare or text, not " + dn);
    if (dn != "text" || path.empty()) path = find_resource("data/tinyshakespeare.txt");
    s.corpus = load_text_corpus(path, m_config.get_float("data.val_fraction"), seed);
    gpt_cfg = CharGptConfig::preset(m_config.get_string("model.preset"));
    if (m_config.get_int("model.layers") > 0) gpt_cfg.layers = m_config.get_int("model.layers");
    if (m_config.get_int("model.heads") > 0) gpt_cfg.heads = m_config.get_int("model.heads");
    if (m_config.get_int("model.dim") > 0) gpt_cfg.dim = m_config.get_int("model.dim");
    if (m_config.get_int("model.context") > 0) gpt_cfg.context = m_config.get_int("model.context");
    gpt_cfg.pad_vocab = m_config.get_bool("model.pad_vocab");
    gpt_cfg.dropout = m_config.get_float("model.dropout");
    gpt_cfg.vocab = s.corpus.vocab();
    gpt_cfg.chars = s.corpus.chars;
    gpt_cfg.validate();
    s.ctx = gpt_cfg.context;
    if (s.corpus.val.window_count(s.ctx) <= 0 || s.corpus.train.window_count(s.ctx) <= 0)
      throw Error("model.context " + std::to_string(s.ctx) + " is longer than a text chunk (" +
                  std::to_string(kTextChunk) + " characters)");
  } else {
    s.data = load_classification_data(m_config);
  }
  s.batch = m_config.get_int("train.batch");
  s.accumulate = static_cast<int>(m_config.get_int("train.accumulate"));
  if (!s.text && s.data.train.size() < s.batch * s.accumulate)
    throw Error("train.batch x train.accumulate = " + std::to_string(s.batch * s.accumulate) +
                " is larger than the training split (" + std::to_string(s.data.train.size()) + " samples)");
  s.precision = m_config.get_string("precision.dtype");
  s.dtype = storage_dtype(s.precision);
  if (!s.be->supports(s.dtype)) {
    std::string have;
    for (DType t : s.be->info().formats) have += (have.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error("precision " + s.precision + " is not available on " + s.be->info().name + " (it has " + have + ")");
  }
  s.be->set_tf32(s.precision == "tf32");
  s.be->set_fp8(s.precision == "fp8");

  const std::string model_name = m_config.get_string("model.name");
  std::vector<int64_t> sizes{s.data.train.features};
  if (s.text) {
    auto gpt = std::make_unique<CharGpt>(*s.be, gpt_cfg, seed);
    gpt->set_checkpointing(checkpoint_policy_from_name(m_config.get_string("checkpoint.policy")),
                           m_config.get_int("checkpoint.k"));
    s.gpt = gpt.get();
    s.model = std::move(gpt);
  } else {
    for (auto h : m_config.get_int_list("model.hidden")) sizes.push_back(h);
    if (model_name == "digits-mlp") sizes = {s.data.train.features, 256, 256};
    sizes.push_back(s.data.train.classes);
    s.model = build_model(*s.be, {{"kind", "mlp"}, {"sizes", sizes}, {"activation", m_config.get_string("model.activation")}},
                          seed);
  }
  s.model->set_compute_dtype(*s.be, s.dtype);
  s.compress = std::make_unique<Compression>(compress_options(m_config), *s.be);
  s.model = s.compress->attach(std::move(s.model), s.batch, s.accumulate);

  if (m_config.get_string("optim.name") == "adamw") {
    AdamWHyper h;
    h.beta1 = static_cast<float>(m_config.get_float("optim.beta1"));
    h.beta2 = static_cast<float>(m_config.get_float("optim.beta2"));
    h.eps = static_cast<float>(m_config.get_float("optim.eps"));
    h.weight_decay = static_cast<float>(m_config.get_float("optim.weight_decay"));
    s.opt = std::make_unique<AdamW>(h);
  } else {
    SgdHyper h;
    h.momentum = static_cast<float>(m_config.get_float("optim.momentum"));
    h.weight_decay = static_cast<float>(m_config.get_float("optim.weight_decay"));
    h.nesterov = m_config.get_bool("optim.nesterov");
    s.opt = std::make_unique<Sgd>(h);
  }

  auto upload_split = [&](const ClassificationData& d, Tensor& x, Tensor& y) {
    x = s.be->empty({d.size(), d.features}, DType::F32, MemCategory::Workspace);
    s.be->upload(x, d.x.data(), DType::F32);
    y = s.be->empty({d.size()}, DType::I32, MemCategory::Workspace);
    s.be->upload(y, d.y.data(), DType::I32);
  };
  if (s.text) {
    auto upload_tokens = [&](const TokenSplit& t, Tensor& x) {
      x = s.be->empty({static_cast<int64_t>(t.tokens.size())}, DType::I32, MemCategory::Workspace);
      s.be->upload(x, t.tokens.data(), DType::I32);
    };
    upload_tokens(s.corpus.train, s.train_tok);
    upload_tokens(s.corpus.val, s.val_tok);
    s.step = std::make_unique<TrainingStep>(*s.be, *s.model, *s.opt, s.train_tok, s.batch, s.ctx, s.accumulate);
    s.window_rng.seed(seed * 1000003ULL + 7);
    std::mt19937_64 vr(seed * 1000003ULL + 11);
    const int64_t nv = m_config.get_int("train.eval_windows");
    for (int64_t i = 0; i < nv; ++i) s.val_starts.push_back(s.corpus.val.random_window(vr, s.ctx));
  } else {
    upload_split(s.data.train, s.train_x, s.train_y);
    upload_split(s.data.test, s.test_x, s.test_y);
    s.step = std::make_unique<TrainingStep>(*s.be, *s.model, *s.opt, s.train_x, s.train_y, s.batch, s.accumulate);
  }

  // Text: a "sample" is one token (n_train tokens; an epoch is as many windows' tokens).
  const int64_t n_train = s.text ? static_cast<int64_t>(s.corpus.train.tokens.size()) : s.data.train.size();
  const int64_t tps = s.text ? s.ctx : 1;  // tokens per sample
  const long steps_per_epoch = std::max(1L, static_cast<long>(n_train / (s.batch * tps * s.accumulate)));
  long total_steps = m_config.get_int("train.steps");
  if (total_steps == 0) total_steps = steps_per_epoch * m_config.get_int("train.epochs");
  if (total_steps <= 0) throw Error("nothing to train: train.steps and train.epochs are both 0");

  s.schedule.name = m_config.get_string("schedule.name");
  s.schedule.base_lr = m_config.get_float("optim.lr");
  s.schedule.warmup_steps = m_config.get_int("schedule.warmup_steps");
  s.schedule.min_lr = m_config.get_float("schedule.min_lr");
  s.schedule.total_steps = total_steps;
  s.scaler = std::make_unique<LossScaler>(m_config.get_float("precision.loss_scale.init"),
                                          m_config.get_int("precision.loss_scale.growth_interval"),
                                          s.precision == "fp16" && m_config.get_bool("precision.loss_scale.enabled"));

  std::string dir = m_config.get_string("run.out");
  if (dir.empty()) dir = RunRecord::default_dir("runs", model_name + "-" + s.precision);
  s.record = std::make_unique<RunRecord>(dir, m_config);
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_run_dir = dir;
  }

  const long eval_every = m_config.get_int("train.eval_every");
  const int64_t params = s.model->parameter_count();
  const int64_t data_bytes =
      s.text ? static_cast<int64_t>(s.train_tok.bytes() + s.val_tok.bytes())
             : static_cast<int64_t>(s.train_x.bytes() + s.train_y.bytes() + s.test_x.bytes() + s.test_y.bytes());

  auto evaluate = [&](double& loss, double& acc) {
    Tensor acc_t = s.step->stats();  // reuse the stats buffer; training stats were read already
    if (s.text) {  // the fixed validation windows, every token scored
      const int64_t nw = static_cast<int64_t>(s.val_starts.size());
      for (int64_t b = 0; b < nw; b += s.batch) {
        std::vector<int64_t> chunk(s.val_starts.begin() + b, s.val_starts.begin() + std::min(nw, b + s.batch));
        s.step->eval_windows(s.val_tok, chunk, acc_t, b == 0);
      }
      float st[2];
      s.be->download(acc_t, st, DType::F32);
      loss = st[0] / static_cast<double>(nw * s.ctx);
      acc = st[1] / static_cast<double>(nw * s.ctx);
      return;
    }
    const int64_t n = s.data.test.size();
    for (int64_t b = 0; b < n; b += s.batch) s.step->eval_rows(s.test_x, s.test_y, b, std::min(n, b + s.batch), acc_t, b == 0);
    float st[2];
    s.be->download(acc_t, st, DType::F32);
    loss = st[0] / static_cast<double>(n);
    acc = st[1] / static_cast<double>(n);
  };

  auto predicted = [&]() {
    MemoryBytes m;
    const int64_t sb = s.dtype == DType::F32 ? 4 : 2;
    m.by_category[static_cast<size_t>(MemCategory::Weights)] = params * sb;
    m.by_category[static_cast<size_t>(MemCategory::Gradients)] = params * sb;
    m.by_category[static_cast<size_t>(MemCategory::Optimizer)] =
        params * (s.opt->state_bytes_per_param() + (sb == 4 ? 0 : 4));
    m.by_category[static_cast<size_t>(MemCategory::Workspace)] = data_bytes;
    if (s.text) {  // DOMAIN.md: s*b*h*34 per layer (fused attention), for the layers the policy keeps
      m.by_category[static_cast<size_t>(MemCategory::Activations)] = s.gpt->predicted_activation_bytes(s.batch, s.ctx, sb);
      return m;
    }
    // Activations of one micro-batch: the batch (fp32 gather + its 16-bit copy), labels, each
    // layer's output (+ pre-activation for GELU), each hidden layer's input gradient, dlogits.
    int64_t act = s.batch * sizes.front() * 4 + (sb == 4 ? 0 : s.batch * sizes.front() * sb) + s.batch * 4;
    const bool gelu = m_config.get_string("model.activation") == "gelu";
    for (size_t i = 1; i < sizes.size(); ++i) {
      const bool last = i + 1 == sizes.size();
      act += s.batch * sizes[i] * sb * ((gelu && !last) ? 2 : 1);
      if (i > 1) act += s.batch * sizes[i - 1] * sb;
    }
    act += s.batch * sizes.back() * sb;
    m.by_category[static_cast<size_t>(MemCategory::Activations)] = act;
    m.by_category[static_cast<size_t>(MemCategory::Workspace)] = data_bytes;
    return m;
  };

  // --- the loop ----------------------------------------------------------------------------
  RunSummary sum;
  sum.params = params;
  sum.device = s.be->info().id();
  sum.run_dir = dir;
  double samples_done = 0.0, train_seconds = 0.0;
  long step = 0;
  double last_loss = 0.0;
  std::vector<int32_t> idx;
  const double flops_per_sample = s.text ? s.gpt->train_flops_per_token(s.ctx) : mlp_train_flops_per_sample(params);

  if (!s.text) s.perm = seeded_permutation(n_train, seed * 1000003ULL + 1);
  s.cursor = 0;

  // Compression metrics (StepMetrics::sparsity, bits_per_weight): recomputed when the masks or the
  // formats can have changed (the first step and steps with an event), which keeps mask downloads
  // off the other steps.
  std::optional<double> sparsity, bits;
  auto compression_metrics = [&]() {
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
    if (pruning || masked > 0) sparsity = masked > 0 ? 100.0 * static_cast<double>(zeros) / static_cast<double>(masked) : 0.0;
    if (pruning || masked > 0 || s.compress->qat_on() || bits)
      bits = qweights > 0 ? qbits / qweights : store_bits;
  };

  for (step = 0; step < total_steps; ++step) {
    std::string event;
    if (!drain_commands(event)) {
      sum.status = "stopped";
      sum.message = "stopped at step " + std::to_string(step);
      break;
    }
    const int k = s.accumulate;
    const int64_t need = s.batch * k;
    if (!s.text && s.cursor + static_cast<size_t>(need) > s.perm.size()) {  // drop-last, new epoch
      ++s.epoch_index;
      s.perm = seeded_permutation(n_train, seed * 1000003ULL + 1 + static_cast<uint64_t>(s.epoch_index));
      s.cursor = 0;
    }
    if (s.text) {  // random windows: one index per input token (window start + position)
      idx.resize(static_cast<size_t>(need * s.ctx));
      for (int64_t w = 0; w < need; ++w) {
        const int64_t start = s.corpus.train.random_window(s.window_rng, s.ctx);
        for (int64_t t = 0; t < s.ctx; ++t) idx[static_cast<size_t>(w * s.ctx + t)] = static_cast<int32_t>(start + t);
      }
    } else {
      idx.assign(s.perm.begin() + static_cast<long>(s.cursor), s.perm.begin() + static_cast<long>(s.cursor + need));
      s.cursor += static_cast<size_t>(need);
    }

    const auto t0 = Clock::now();
    const double lr = s.schedule.at(step);
    StepScalars sc;
    sc.lr = static_cast<float>(lr);
    sc.loss_scale = static_cast<float>(s.scaler->scale());
    sc.grad_unscale = static_cast<float>(1.0 / s.scaler->scale());
    sc.step = static_cast<float>(s.optimizer_steps + 1);
    s.be->set_step_scalars(sc);
    if (const std::string e = s.compress->before_step(step); !e.empty()) event += (event.empty() ? "" : "; ") + e;
    s.step->set_indices(idx);
    bool applied = true;
    if (s.scaler->enabled()) {
      s.be->run_step("forward_backward", [&] { s.step->forward_backward(); });
      std::vector<const Tensor*> grads;
      for (Parameter* p : s.step->params()) grads.push_back(&p->grad);
      applied = s.scaler->update(s.be->all_finite(grads));
      if (applied) s.opt->step(*s.be, s.step->params());
    } else {
      s.be->run_step("train_step", [&] { s.step->full_step(); });
    }
    if (applied) ++s.optimizer_steps;
    s.compress->after_step();
    float st[2];
    s.be->download(s.step->stats(), st, DType::F32);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    samples_done += static_cast<double>(need * tps);
    train_seconds += dt;

    StepMetrics m;
    m.step = step + 1;
    m.total_steps = total_steps;
    // Fractional epochs by batches: with drop-last an epoch is steps_per_epoch * k micro-batches.
    m.epoch = static_cast<double>(s.epoch_index) +
              static_cast<double>(s.cursor) / static_cast<double>((n_train / need) * need);
    if (s.text) {
      s.tokens_seen += static_cast<double>(need * tps);
      m.epoch = s.tokens_seen / static_cast<double>(n_train);
    }
    m.loss = st[0] / static_cast<double>(need * tps);
    m.train_accuracy = st[1] / static_cast<double>(need * tps);
    m.lr = lr;
    m.loss_scale = s.scaler->scale();
    m.skipped = !applied;
    m.skipped_steps = s.scaler->skipped();
    m.step_ms = dt * 1e3;
    m.samples_per_s = static_cast<double>(need * tps) / dt;  // text: tokens per second
    m.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    m.precision = s.precision;
    const MemorySnapshot snap = s.be->ledger().snapshot();
    m.mem_current = to_bytes(snap.current);
    m.mem_peak = to_bytes(snap.peak);
    m.mem_predicted = predicted();
    const DeviceInfo info = s.be->info();
    m.device_used_bytes = info.used_bytes;
    m.device_total_bytes = info.total_bytes;
    m.runtime_context_bytes = info.runtime_context_bytes;
    for (const auto& [fmt, peak] : info.peak_tflops)
      if (fmt == (s.precision == "tf32" ? DType::F32 : s.dtype) && peak > 0)
        m.mfu = flops_per_sample * m.samples_per_s / (peak * 1e12);
    if (m_config.get_bool("device.kernel_timing")) {
      m.kernel_times = s.be->kernel_times();
      s.be->reset_kernel_times();
    }
    m.event = event;
    if (step == 0 || !event.empty()) compression_metrics();
    m.sparsity = sparsity;
    m.bits_per_weight = bits;

    const bool end_of_epoch =
        s.text ? std::floor(s.tokens_seen / static_cast<double>(n_train)) >
                     std::floor((s.tokens_seen - static_cast<double>(need * tps)) / static_cast<double>(n_train))
               : s.cursor + static_cast<size_t>(need) > s.perm.size();
    const bool last = step + 1 == total_steps;
    if (last || (eval_every > 0 ? (step + 1) % eval_every == 0 : end_of_epoch)) {
      double vl = 0, va = 0;
      evaluate(vl, va);
      m.val_loss = vl;
      m.val_accuracy = va;
    }

    const bool finite = std::isfinite(m.loss);
    const bool scaler_handles = s.scaler->enabled() && s.scaler->consecutive_skips() < 50;
    s.record->append(m);
    if (m_callbacks.on_step) m_callbacks.on_step(m);
    if (!finite && !scaler_handles) {
      sum.status = "diverged";
      sum.message = "diverged at step " + std::to_string(step + 1) + ": the training loss is " +
                    (std::isnan(m.loss) ? "NaN" : "infinite") + " (try a lower optim.lr" +
                    (s.precision == "fp16" ? "" : " or another precision") + ")";
      ++step;
      break;
    }
    if (finite) last_loss = m.loss;
  }

  // --- summary --------------------------------------------------------------------------------
  sum.steps = step;
  sum.epochs = static_cast<double>(step) / static_cast<double>(std::max(1L, steps_per_epoch));
  sum.final_train_loss = last_loss;
  if (sum.status != "diverged") {
    double vl = 0, va = 0;
    evaluate(vl, va);
    sum.test_loss = vl;
    sum.test_accuracy = va;
  }
  sum.samples_per_s = train_seconds > 0 ? samples_done / train_seconds : 0.0;
  sum.skipped_steps = s.scaler->skipped();
  sum.precision = s.precision;
  sum.peak_bytes = to_bytes(s.be->ledger().snapshot().peak);
  if (m_config.get_bool("run.save_weights") && sum.status != "diverged")
    save_model_weights(*s.be, *s.model, m_config, s.record->weights_path());
  sum.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  s.compress->finish(dir);
  s.record->write_summary(sum);
  return sum;
}

}  // namespace trainlab
