#include "compress/compression.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "io/safetensors.h"
#include "nn/linear.h"
#include "nn/transformer.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/safe_file.h"

namespace trainlab {

// --- DistillModel -------------------------------------------------------------------------------

DistillModel::DistillModel(std::unique_ptr<Model> student, std::unique_ptr<Model> teacher, float temperature,
                           float alpha)
    : m_student(std::move(student)), m_teacher(std::move(teacher)), m_t(temperature), m_alpha(alpha) {
  m_dtype = m_student->compute_dtype();
}

Tensor DistillModel::forward(Backend& be, const Tensor& x, bool training) {
  if (training) m_teacher_logits = m_teacher->forward(be, x, false);
  Tensor y = m_student->forward(be, x, training);
  if (training) m_student_logits = y;
  return y;
}

void DistillModel::backward(Backend& be, Tensor& dlogits, bool accumulate) {
  if (!m_student_logits.defined() || !m_teacher_logits.defined())
    throw Error("distillation: backward without a training forward");
  be.distill_backward(m_student_logits, m_teacher_logits, m_t, m_alpha, m_mult, dlogits, nullptr, false);
  m_student->backward(be, dlogits, accumulate);
}

void DistillModel::release_buffers() {
  m_student_logits = Tensor();
  m_teacher_logits = Tensor();
  m_student->release_buffers();
  m_teacher->release_buffers();
}

// --- Compression ---------------------------------------------------------------------------------

Compression::Compression(CompressOptions options, Backend& be) : m_opt(std::move(options)), m_be(be) {}
Compression::~Compression() = default;

QuantPlan Compression::quant_plan() const { return QuantPlan::from_options(m_opt.quant); }

void Compression::read_quant_config() {
  m_plan = quant_plan();
  // With QAT asked for, check every layer's spec now, so that a bad group fails with a message
  // before any step (or before a mid-run switch is applied).
  if (m_opt.quant.qat())
    for (Parameter* p : m_quantizable) m_plan.spec_for(p->name).group_size(p->shape[0], p->shape[1]);
}

std::unique_ptr<Model> Compression::attach(std::unique_ptr<Model> model, int64_t batch, int accumulate) {
  m_batch = batch;
  const std::string init = weights_file_of(m_opt.init_from);  // a run folder: its model.safetensors
  if (!init.empty()) load_weights_any(m_be, *model, read_safetensors(init), init);
  const std::string& teacher = m_opt.distill.teacher;
  if (!teacher.empty()) {
    auto t = load_model_file(m_be, teacher);
    auto d = std::make_unique<DistillModel>(std::move(model), std::move(t),
                                            static_cast<float>(m_opt.distill.temperature),
                                            static_cast<float>(m_opt.distill.alpha));
    d->set_grad_multiplier(1.0f / static_cast<float>(batch * accumulate));
    m_distill = d.get();
    model = std::move(d);
  }
  m_model = model.get();
  m_prunable = prunable_parameters(*m_model, m_opt.prune.include_output);
  // QAT fakes the quantization of every linear weight, the classifier included, whatever pruning
  // leaves out: the stored low-bit file quantizes them all.
  m_quantizable = prunable_parameters(*m_model, true);
  read_quant_config();
  if (m_opt.prune.rewind && m_opt.prune.rewind_step == 0) {
    std::vector<Parameter*> all = m_model->parameters();
    m_snapshot = download_masters(m_be, all);
  }
  m_pending_now = m_opt.prune.now;
  if (m_opt.quant.qat()) set_qat(true);
  return model;
}

void Compression::set_qat(bool on) {
  if (on == m_qat) return;
  m_qat = on;
  if (!on) {  // values back to plain copies of the masters
    for (Parameter* p : m_quantizable) p->set_compute_dtype(m_be, m_model->compute_dtype());
    m_be.invalidate_captures();
  }
  m_requant = on;
}

void Compression::fake_quantize_values() {
  bool realloc = false;
  for (Parameter* p : m_quantizable) {
    if (p->value.same_storage(p->master)) {  // fp32 runs share the storage: QAT needs its own copy
      p->value = m_be.empty(p->shape, DType::F32, MemCategory::Weights);
      realloc = true;
    }
    const QuantSpec& s = m_plan.spec_for(p->name);
    m_be.fake_quantize(p->master, p->value, s.bits, s.group_size(p->shape[0], p->shape[1]));
  }
  if (realloc) m_be.invalidate_captures();
}

std::string Compression::prune_to(double sparsity, const char* how) {
  const PruneScope scope = m_opt.prune.global_scope ? PruneScope::Global : PruneScope::Layer;
  auto ws = download_masters(m_be, m_prunable);
  auto masks = magnitude_masks(ws, sparsity, scope);
  // Keep earlier masks: a weight pruned before stays pruned (it is 0, so it is among the smallest).
  for (size_t i = 0; i < m_prunable.size(); ++i)
    if (m_prunable[i]->mask.defined()) {
      std::vector<float> old(masks[i].size());
      m_be.download(m_prunable[i]->mask, old.data(), DType::F32);
      for (size_t j = 0; j < old.size(); ++j) masks[i][j] *= old[j];
    }
  apply_masks(m_be, m_prunable, masks);
  m_requant = m_qat;
  char buf[96];
  std::snprintf(buf, sizeof buf, "prune: %.1f%% (%s, %s)", sparsity * 100.0, how,
                scope == PruneScope::Global ? "global" : "per layer");
  return buf;
}

std::string Compression::prune_2_4() {
  auto ws = download_masters(m_be, m_prunable);
  std::vector<std::vector<float>> masks;
  for (size_t i = 0; i < ws.size(); ++i) masks.push_back(mask_2_4(ws[i], m_prunable[i]->shape[0], m_prunable[i]->shape[1]));
  apply_masks(m_be, m_prunable, masks);
  m_requant = m_qat;
  return "prune: 2:4";
}

void Compression::rewind() {
  if (m_snapshot.empty()) return;
  std::vector<Parameter*> all = m_model->parameters();
  for (size_t i = 0; i < all.size(); ++i) {
    Parameter* p = all[i];
    std::vector<float> w = m_snapshot[i];
    if (p->mask.defined()) {
      std::vector<float> m(w.size());
      m_be.download(p->mask, m.data(), DType::F32);
      for (size_t j = 0; j < w.size(); ++j) w[j] *= m[j];
    }
    m_be.upload(p->master, w.data(), DType::F32);
    if (!p->value.same_storage(p->master)) m_be.copy(p->master, p->value);
    if (p->m.defined()) m_be.fill(p->m, 0.0f);  // the optimizer starts afresh for the ticket
    if (p->v.defined()) m_be.fill(p->v, 0.0f);
  }
  m_requant = m_qat;
}

std::map<std::string, std::vector<float>> Compression::state_tensors() const {
  std::map<std::string, std::vector<float>> out;
  for (Parameter* p : m_prunable)
    if (p->mask.defined()) {
      std::vector<float>& m = out["mask/" + p->name];
      m.resize(static_cast<size_t>(p->numel()));
      m_be.download(p->mask, m.data(), DType::F32);
    }
  if (!m_snapshot.empty()) {
    const std::vector<Parameter*> all = m_model->parameters();
    for (size_t i = 0; i < all.size() && i < m_snapshot.size(); ++i) out["rewind/" + all[i]->name] = m_snapshot[i];
  }
  return out;
}

void Compression::restore_state(const std::map<std::string, std::vector<float>>& tensors) {
  m_pending_now = 0.0;
  const std::vector<Parameter*> all = m_model->parameters();
  auto param = [&](const std::string& name, const std::vector<float>& v) -> Parameter* {
    for (Parameter* p : all)
      if (p->name == name) {
        if (static_cast<int64_t>(v.size()) != p->numel())
          throw Error("compression state of '" + name + "': " + std::to_string(v.size()) + " values for " +
                      std::to_string(p->numel()) + " weights");
        return p;
      }
    throw Error("compression state names '" + name + "', which is not a parameter of this model");
  };
  std::vector<Parameter*> masked;
  std::vector<std::vector<float>> masks;
  std::vector<std::vector<float>> snapshot(all.size());
  size_t snapshots = 0;
  for (const auto& [key, v] : tensors) {
    if (key.rfind("mask/", 0) == 0) {
      masked.push_back(param(key.substr(5), v));
      masks.push_back(v);
    } else if (key.rfind("rewind/", 0) == 0) {
      Parameter* p = param(key.substr(7), v);
      snapshot[static_cast<size_t>(std::find(all.begin(), all.end(), p) - all.begin())] = v;
      ++snapshots;
    } else {
      throw Error("compression state '" + key + "': expected mask/<parameter> or rewind/<parameter>");
    }
  }
  if (!masked.empty()) apply_masks(m_be, masked, masks);
  if (snapshots != 0 && snapshots != all.size())
    throw Error("compression state: the lottery ticket's snapshot covers " + std::to_string(snapshots) + " of " +
                std::to_string(all.size()) + " parameters");
  m_snapshot.clear();
  if (snapshots != 0) m_snapshot = std::move(snapshot);
}

std::string Compression::before_step(long step) {
  std::string event;
  auto add = [&](const std::string& e) { event += (event.empty() ? "" : "; ") + e; };
  const PruneOptions& po = m_opt.prune;
  const std::string& method = po.method;
  const long start = po.start_step;
  if (po.rewind && m_snapshot.empty() && step == po.rewind_step) {
    std::vector<Parameter*> all = m_model->parameters();
    m_snapshot = download_masters(m_be, all);
  }
  if (method == "magnitude" && step == start) {
    add(prune_to(po.sparsity, "one-shot magnitude"));
    if (po.rewind) {
      rewind();
      add("rewind to step " + std::to_string(po.rewind_step) + " (lottery ticket)");
    }
  } else if (method == "gradual") {
    GradualSchedule g;
    g.start = start;
    g.interval = po.interval;
    g.n = po.n_steps;
    g.initial = po.initial_sparsity;
    g.final_sparsity = po.sparsity;
    if (g.is_pruning_step(step) && g.sparsity_at(step) > 0.0) add(prune_to(g.sparsity_at(step), "gradual"));
  } else if (method == "2:4" && step == start) {
    add(prune_2_4());
  }
  if (m_pending_now > 0.0) {
    add(prune_to(m_pending_now, "prune now"));
    m_pending_now = 0.0;
  }
  if (m_qat && m_requant) {
    fake_quantize_values();
    m_requant = false;
  }
  return event;
}

void Compression::after_step() {
  if (m_qat) fake_quantize_values();
}

void Compression::on_setting(const std::string& key, const CompressOptions& now) {
  m_opt = now;
  if (key.rfind("quant.", 0) == 0) {
    read_quant_config();
    set_qat(m_opt.quant.qat());
    m_requant = m_qat;
  } else if (key == "prune.now") {
    m_pending_now = m_opt.prune.now;
  } else if (key == "train.accumulate" && m_distill) {
    m_distill->set_grad_multiplier(1.0f / static_cast<float>(m_batch * m_opt.accumulate));
  } else if (key == "precision.dtype") {
    if (m_distill) m_distill->student().set_compute_dtype(m_be, m_model->compute_dtype());
    m_requant = m_qat;
    if (m_qat) fake_quantize_values();
  }
}

Json Compression::finish(const std::string& dir) {
  Json j;
  bool masked = false;
  for (Parameter* p : m_prunable) masked = masked || p->mask.defined();
  if (!masked && !m_qat && !m_distill) return j;  // nothing compressed: no report (and no weight download)
  const SparsityReport sr = sparsity_report(m_be, *m_model);
  j["sparsity"] = sr.to_json();
  j["quant_mode"] = m_qat ? "qat" : "none";
  if (m_qat) {
    QuantFileReport qr;
    const SafeTensorsFile f = quantize_weights(model_to_file(m_be, *m_model, m_opt.run_config), m_plan, &qr);
    if (!dir.empty()) write_safetensors(dir + "/model.quant.safetensors", f);
    j["quant"] = m_plan.default_spec.to_json();
    j["quant_storage"] = qr.to_json();
  }
  if (!dir.empty()) write_file_atomic(dir + "/compression.json", j.dump(2) + "\n");  // checked, no link followed
  return j;
}

// --- evaluation and W8A8 -------------------------------------------------------------------------

double model_accuracy(Backend& be, Model& model, const ClassificationData& data, int64_t chunk) {
  const int64_t n = data.size(), f = data.features;
  int64_t correct = 0;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t rows = std::min(chunk, n - b);
    Tensor x = be.empty({rows, f}, DType::F32, MemCategory::Workspace);
    be.upload(x, data.x.data() + b * f, DType::F32);
    Tensor y = model.forward(be, x, false);
    std::vector<float> z(static_cast<size_t>(y.numel()));
    be.download(y, z.data(), DType::F32);
    const int64_t c = y.dim(1);
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = z.data() + i * c;
      correct += (std::max_element(r, r + c) - r) == data.y[static_cast<size_t>(b + i)];
    }
  }
  model.release_buffers();
  return n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

double file_accuracy(Backend& be, const SafeTensorsFile& f, const ClassificationData& data) {
  auto m = model_from_file(be, f, "weights");
  return model_accuracy(be, *m, data);
}

double file_text_val_loss(Backend& be, const SafeTensorsFile& f, const TokenSplit& val, int64_t windows,
                          int64_t batch, uint64_t seed) {
  const std::vector<int32_t>& val_tokens = val.tokens;
  auto m = model_from_file(be, f, "weights");
  auto* gpt = dynamic_cast<CharGpt*>(m.get());
  if (!gpt) throw Error("a validation loss over text needs a char-gpt weights file");
  const int64_t T = gpt->config().context, n = static_cast<int64_t>(val_tokens.size());
  if (n < T + 2) throw Error("the validation text has " + std::to_string(n) + " tokens, fewer than a window of " + std::to_string(T + 1));
  Tensor toks = be.empty({n}, DType::I32, MemCategory::Workspace);
  be.upload(toks, val_tokens.data(), DType::I32);
  Tensor stats = be.empty({2}, DType::F32, MemCategory::Workspace);
  // The trainer's validation windows: random_window starts from the same seeded generator.
  std::mt19937_64 vr(seed * 1000003ULL + 11);
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < windows; ++i) starts.push_back(val.random_window(vr, T));
  Tensor x = be.empty({batch, T}, DType::I32, MemCategory::Workspace), y = be.empty({batch * T}, DType::I32, MemCategory::Workspace);
  std::vector<int32_t> xs(static_cast<size_t>(batch * T)), ys(xs.size());
  double sum = 0.0;
  for (int64_t b0 = 0; b0 < windows; b0 += batch) {
    const int64_t rows = std::min(batch, windows - b0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t s0 = starts[static_cast<size_t>(b0 + (b < rows ? b : 0))];
        xs[static_cast<size_t>(b * T + t)] = val_tokens[static_cast<size_t>(s0 + t)];
        ys[static_cast<size_t>(b * T + t)] = val_tokens[static_cast<size_t>(s0 + t + 1)];
      }
    be.upload(x, xs.data(), DType::I32);
    be.upload(y, ys.data(), DType::I32);
    Tensor logits = m->forward(be, x, false);
    be.softmax_xent(logits.slice_rows(0, rows * T), y.slice_rows(0, rows * T), nullptr, 1.0f, stats, false);
    float st[2];
    be.download(stats, st, DType::F32);
    sum += st[0];
  }
  return sum / static_cast<double>(windows * T);
}

W8A8Mlp::W8A8Mlp(Backend& be, Mlp& model, const ClassificationData& cal, int64_t batch, int batches) {
  std::vector<Linear*> ls;
  for (const auto& l : model.layers()) {
    auto* lin = dynamic_cast<Linear*>(l.get());
    if (!lin) throw Error("W8A8: only MLPs of linear layers with fused activations are supported");
    ls.push_back(lin);
  }
  // Calibration: max |input| of every layer over `batches` batches of the calibration set.
  std::vector<float> amax(ls.size(), 0.0f);
  const int64_t f = cal.features;
  for (int b = 0; b < batches; ++b) {
    const int64_t begin = (static_cast<int64_t>(b) * batch) % std::max<int64_t>(1, cal.size());
    const int64_t rows = std::min(batch, cal.size() - begin);
    if (rows <= 0) break;
    Tensor h = be.empty({rows, f}, DType::F32, MemCategory::Workspace);
    be.upload(h, cal.x.data() + begin * f, DType::F32);
    for (size_t i = 0; i < ls.size(); ++i) {
      std::vector<float> hx(static_cast<size_t>(h.numel()));
      be.download(h, hx.data(), DType::F32);
      for (float v : hx) amax[i] = std::max(amax[i], std::fabs(v));
      h = ls[i]->forward(be, h, false);
    }
  }
  model.release_buffers();
  for (size_t i = 0; i < ls.size(); ++i) {
    Layer L;
    L.in = ls[i]->in_features();
    L.out = ls[i]->out_features();
    L.act = ls[i]->activation();
    std::vector<float> w(static_cast<size_t>(L.in * L.out));
    be.download(ls[i]->weight().master, w.data(), DType::F32);
    std::vector<float> scales(static_cast<size_t>(L.out));
    std::vector<int8_t> codes(w.size());
    quantize_groups(w.data(), L.in * L.out, 8, L.in, scales.data(), codes.data());
    L.wq = be.empty({L.out, L.in}, DType::I8, MemCategory::Weights);
    be.upload(L.wq, codes.data(), DType::I8);
    L.w_scales = be.empty({L.out}, DType::F32, MemCategory::Weights);
    be.upload(L.w_scales, scales.data(), DType::F32);
    if (ls[i]->bias()) {
      L.bias = be.empty({L.out}, DType::F32, MemCategory::Weights);
      be.copy(ls[i]->bias()->master, L.bias);
    }
    m_x_scales.push_back(amax[i] > 0.0f ? amax[i] / 127.0f : 1.0f);
    m_layers.push_back(std::move(L));
  }
}

Tensor W8A8Mlp::forward(Backend& be, const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < m_layers.size(); ++i) {
    Layer& L = m_layers[i];
    const int64_t rows = h.dim(0);
    if (!L.xq.defined() || L.xq.dim(0) != rows) {
      L.xq = be.empty({rows, L.in}, DType::I8, MemCategory::Activations);
      L.y = be.empty({rows, L.out}, DType::F32, MemCategory::Activations);
    }
    be.quantize_i8(h, m_x_scales[i], L.xq);
    be.int8_linear(L.xq, m_x_scales[i], L.wq, L.w_scales, L.bias.defined() ? &L.bias : nullptr, L.act, L.y);
    h = L.y;
  }
  return h;
}

double W8A8Mlp::accuracy(Backend& be, const ClassificationData& data) {
  const int64_t n = data.size(), f = data.features, chunk = 512;
  int64_t correct = 0;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t rows = std::min(chunk, n - b);
    Tensor x = be.empty({rows, f}, DType::F32, MemCategory::Workspace);
    be.upload(x, data.x.data() + b * f, DType::F32);
    Tensor y = forward(be, x);
    std::vector<float> z(static_cast<size_t>(y.numel()));
    be.download(y, z.data(), DType::F32);
    const int64_t c = y.dim(1);
    for (int64_t i = 0; i < rows; ++i) {
      const float* r = z.data() + i * c;
      correct += (std::max_element(r, r + c) - r) == data.y[static_cast<size_t>(b + i)];
    }
  }
  return n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

int64_t W8A8Mlp::weight_bytes() const {
  int64_t b = 0;
  for (const auto& L : m_layers) b += L.in * L.out + L.out * 2 + (L.bias.defined() ? L.out * 4 : 0);
  return b;
}

}  // namespace trainlab
