#include "compress/ptq_methods.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "compress/gptq.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

using Json = nlohmann::json;

void check_ptq_method(const std::string& method) {
  if (method != "rtn" && method != "gptq" && method != "awq")
    throw Error("unknown quantization method '" + method + "' (quant.method, --method): expected rtn, gptq or awq");
}

void PtqMethodOptions::validate() const {
  check_ptq_method(method);
  if (!(damp > 0.0 && damp <= 1.0))
    throw Error("quant.damp (--damp): expected a fraction of the mean Hessian diagonal in (0, 1], got " + std::to_string(damp));
  if (awq_grid < 1 || awq_alpha > 1.0) throw Error("AWQ: the alpha grid needs at least one step, a fixed alpha is in [0, 1]");
}

CalibrationSet classification_calibration(const ClassificationData& train, int64_t batch, int batches) {
  CalibrationSet c;
  const int64_t f = train.features;
  for (int b = 0; b < batches && batch > 0; ++b) {
    const int64_t begin = b * batch, rows = std::min(batch, train.size() - begin);
    if (rows <= 0) break;
    CalibrationBatch cb;
    cb.shape = {rows, f};
    cb.features.assign(train.x.begin() + begin * f, train.x.begin() + (begin + rows) * f);
    c.samples += rows;
    c.batches.push_back(std::move(cb));
  }
  c.description = std::to_string(c.batches.size()) + " batches of up to " + std::to_string(batch) +
                  " rows from the start of the training split (" + std::to_string(c.samples) + " samples)";
  return c;
}

CalibrationSet text_calibration(const TokenSplit& train, int64_t context, int windows, uint64_t seed) {
  CalibrationSet c;
  if (windows > 0 && train.window_count(context) <= 0)
    throw Error("calibration: the training text holds no window of " + std::to_string(context + 1) + " characters");
  std::mt19937_64 rng(seed * 1000003ULL + 29);  // not the validation windows' stream (+11)
  for (int w0 = 0; w0 < windows; w0 += 16) {
    const int n = std::min(16, windows - w0);
    CalibrationBatch cb;
    cb.shape = {n, context};
    for (int i = 0; i < n; ++i) {
      const int64_t s = train.random_window(rng, context);
      cb.tokens.insert(cb.tokens.end(), train.tokens.begin() + s, train.tokens.begin() + s + context);
    }
    c.samples += n * context;
    c.batches.push_back(std::move(cb));
  }
  c.description = std::to_string(windows) + " windows of " + std::to_string(context) +
                  " characters of the training text (" + std::to_string(c.samples) + " tokens)";
  return c;
}

namespace {

struct LayerInput {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<float> x;  // [rows, cols]
};

// Runs the model on a batch and returns the inputs of its linear layers (only `only`'s, unless
// empty), in forward order; with `download` false only the names.
std::vector<LayerInput> capture_inputs(Backend& be, Model& m, const CalibrationBatch& b, const std::string& only,
                                       bool download = true) {
  std::vector<LayerInput> out;
  auto take = [&](const std::string& name, const Tensor& t) {
    if (!only.empty() && name != only) return;
    LayerInput li{name, t.dim(0), t.dim(1), {}};
    if (download) {
      li.x.resize(static_cast<size_t>(t.numel()));
      be.download(t, li.x.data(), DType::F32);
    }
    out.push_back(std::move(li));
  };
  if (auto* seq = dynamic_cast<Sequential*>(&m)) {
    Tensor h = be.empty(b.shape, DType::F32, MemCategory::Workspace);
    be.upload(h, b.features.data(), DType::F32);
    for (const auto& l : seq->layers()) {
      if (auto* lin = dynamic_cast<Linear*>(l.get())) take(lin->weight().name, h);
      h = l->forward(be, h, false);
    }
  } else if (auto* gpt = dynamic_cast<CharGpt*>(&m)) {
    Tensor x = be.empty(b.shape, DType::I32, MemCategory::Workspace);
    be.upload(x, b.tokens.data(), DType::I32);
    gpt->forward(be, x, false);
    for (const auto& [name, t] : gpt->linear_inputs()) take(name, t);
  } else {
    throw Error("GPTQ and AWQ need an MLP or a char-gpt model, not '" + m.kind() + "'");
  }
  return out;
}

std::vector<float> tensor_f32(const SafeTensor& t) {
  std::vector<float> v(static_cast<size_t>(shape_numel(t.shape)));
  convert_to_f32(dtype_from_safetensors(t.dtype), t.bytes.data(), v.data(), v.size());
  return v;
}

void set_f32(SafeTensor& t, const std::vector<float>& v) {
  t.dtype = "F32";
  t.bytes.resize(v.size() * 4);
  convert_from_f32(v.data(), DType::F32, t.bytes.data(), v.size());
}

SafeTensor& tensor_named(SafeTensorsFile& f, const std::string& name) {
  for (SafeTensor& t : f.tensors)
    if (t.name == name) return t;
  throw Error("weights file: tensor '" + name + "' is missing");
}

// Sets a model parameter's values (the master, and the compute copy when it has its own).
void set_parameter(Backend& be, Model& m, const std::string& name, const std::vector<float>& v) {
  for (Parameter* p : m.parameters())
    if (p->name == name) {
      be.upload(p->master, v.data(), DType::F32);
      if (!p->value.same_storage(p->master)) be.copy(p->master, p->value);
      return;
    }
  throw Error("model: no parameter '" + name + "'");
}

Json gptq_layers(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const QuantPlan& plan,
                 const PtqMethodOptions& o, const CalibrationSet& cal, std::map<std::string, QuantCodes>& codes) {
  auto model = model_from_file(be, fp32, path);
  Json layers = Json::array();
  GptqOptions go;
  go.damp = o.damp;
  go.act_order = o.act_order;
  for (const LayerInput& order : capture_inputs(be, *model, cal.batches[0], "", false)) {
    const std::string& name = order.name;
    std::vector<double> gram;
    int64_t samples = 0;
    for (const CalibrationBatch& b : cal.batches) {  // the inputs with the earlier layers quantized
      LayerInput in = std::move(capture_inputs(be, *model, b, name).at(0));
      accumulate_gram(in.x.data(), in.rows, in.cols, gram);
      samples += in.rows;
    }
    const SafeTensor& t = *fp32.find(name);
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const std::vector<float> w = tensor_f32(t);
    const QuantSpec& spec = plan.spec_for(name);
    QuantizedMatrix q;
    try {
      q = gptq_quantize(w.data(), rows, cols, gram, samples, spec, go);
    } catch (const Error& e) {
      throw Error(path + ": tensor " + name + ": " + e.what());
    }
    const std::vector<float> deq = q.dequantized(), rtn = rtn_quantize(w.data(), rows, cols, spec).dequantized();
    layers.push_back({{"name", name},
                      {"rtn_error", output_error(w.data(), rtn.data(), rows, cols, gram, samples)},
                      {"error", output_error(w.data(), deq.data(), rows, cols, gram, samples)}});
    set_parameter(be, *model, name, deq);
    codes[name] = QuantCodes{std::move(q.scales), std::move(q.codes)};
  }
  return layers;
}

// Where AWQ folds 1/s of a layer's input channels: rows (from `row0`) of 1-D or 2-D tensors.
struct Fold {
  std::vector<std::pair<std::string, int64_t>> targets;  // tensor name, first row
  std::string why_not;                                   // empty when targets is set
};

std::map<std::string, Fold> awq_folds(Model& m) {
  std::map<std::string, Fold> f;
  if (auto* seq = dynamic_cast<Sequential*>(&m)) {
    Linear* prev = nullptr;
    for (const auto& l : seq->layers()) {
      auto* lin = dynamic_cast<Linear*>(l.get());
      if (!lin) {
        prev = nullptr;  // a separate layer in between: nothing to fold into
        continue;
      }
      Fold& d = f[lin->weight().name];
      if (!prev) {
        d.why_not = "the first layer reads the data: no operation before it";
      } else if (prev->activation() == Activation::GELU) {
        d.why_not = "after a GELU, which 1/s does not pass through";
      } else {
        d.targets.emplace_back(prev->weight().name, 0);
        if (prev->bias()) d.targets.emplace_back(prev->bias()->name, 0);
      }
      prev = lin;
    }
  } else if (auto* gpt = dynamic_cast<CharGpt*>(&m)) {
    const int64_t d = gpt->config().dim;
    for (int64_t l = 0; l < gpt->config().layers; ++l) {
      const std::string b = "blocks." + std::to_string(l) + ".";
      f[b + "qkv.weight"].targets = {{b + "ln1.weight", 0}, {b + "ln1.bias", 0}};
      f[b + "proj.weight"].targets = {{b + "qkv.weight", 2 * d}, {b + "qkv.bias", 2 * d}};
      f[b + "fc.weight"].targets = {{b + "ln2.weight", 0}, {b + "ln2.bias", 0}};
      f[b + "out.weight"].why_not = "after the GELU, which 1/s does not pass through: rounded to nearest";
    }
    f["head.weight"].targets = {{"ln.weight", 0}, {"ln.bias", 0}};
  }
  return f;
}

// Divides row row0 + j (an element of a vector, a row of a matrix) of `t` by s_j.
void divide_rows(SafeTensor& t, int64_t row0, const std::vector<float>& s) {
  std::vector<float> v = tensor_f32(t);
  const int64_t width = t.shape.size() == 2 ? t.shape[1] : 1;
  for (size_t j = 0; j < s.size(); ++j)
    for (int64_t k = 0; k < width; ++k) v[static_cast<size_t>((row0 + static_cast<int64_t>(j)) * width + k)] /= s[j];
  set_f32(t, v);
}

struct AwqStats {
  std::vector<double> gram;
  std::vector<double> abs_sum;
  int64_t samples = 0;
};

// Searches every foldable layer's scale on the fp32 model's inputs, applies W diag(s) and the
// folds to `file`.
Json awq_layers(Backend& be, SafeTensorsFile& file, const std::string& path, const QuantPlan& plan,
                const PtqMethodOptions& o, const CalibrationSet& cal, std::map<std::string, QuantCodes>* codes) {
  auto model = model_from_file(be, file, path);
  const std::map<std::string, Fold> folds = awq_folds(*model);
  std::map<std::string, AwqStats> stats;
  std::vector<std::string> order;
  for (const CalibrationBatch& b : cal.batches)
    for (const LayerInput& in : capture_inputs(be, *model, b, "")) {
      if (!stats.count(in.name)) order.push_back(in.name);
      AwqStats& s = stats[in.name];
      accumulate_gram(in.x.data(), in.rows, in.cols, s.gram);
      s.abs_sum.resize(static_cast<size_t>(in.cols), 0.0);
      for (int64_t i = 0; i < in.rows * in.cols; ++i) s.abs_sum[static_cast<size_t>(i % in.cols)] += std::fabs(in.x[static_cast<size_t>(i)]);
      s.samples += in.rows;
    }
  Json layers = Json::array();
  for (const auto& [name, f] : folds)
    if (f.targets.empty()) layers.push_back({{"name", name}, {"folded", false}, {"reason", f.why_not}});
  for (const std::string& name : order) {
    const AwqStats& s = stats.at(name);
    if (folds.at(name).targets.empty()) continue;
    SafeTensor& t = tensor_named(file, name);
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<float> w = tensor_f32(t), mean_abs(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) mean_abs[static_cast<size_t>(j)] = static_cast<float>(s.abs_sum[static_cast<size_t>(j)] / s.samples);
    const AwqResult r = awq_search(w.data(), rows, cols, mean_abs, s.gram, s.samples, plan.spec_for(name), o.awq_grid,
                                   o.awq_alpha);
    for (int64_t i = 0; i < rows * cols; ++i) w[static_cast<size_t>(i)] *= r.scales[static_cast<size_t>(i % cols)];
    set_f32(t, w);
    Json into = Json::array();
    for (const auto& [target, row0] : folds.at(name).targets) {
      divide_rows(tensor_named(file, target), row0, r.scales);
      into.push_back(target);
    }
    layers.push_back({{"name", name}, {"folded", true}, {"alpha", r.alpha}, {"rtn_error", r.rtn_error},
                      {"error", r.error}, {"folded_into", into}, {"scales", r.scales}});
  }
  if (codes) {  // each group's clipping range on the (scaled) layer's output error; rows scaled by
                // a later layer's fold scale their output error alike, so the choice stands
    for (Json& l : layers) {
      const std::string name = l["name"];
      const AwqStats& s = stats.at(name);
      const SafeTensor& t = tensor_named(file, name);
      const int64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<float> w = tensor_f32(t);
      std::vector<double> gram = s.gram;
      if (l["folded"].get<bool>()) {  // the scaled layer's inputs are x / s
        const auto& sc = l["scales"];
        for (int64_t i = 0; i < cols; ++i)
          for (int64_t j = 0; j < cols; ++j)
            gram[static_cast<size_t>(i * cols + j)] /= sc[static_cast<size_t>(i)].get<double>() * sc[static_cast<size_t>(j)].get<double>();
      }
      QuantizedMatrix q = clip_quantize(w.data(), rows, cols, gram, plan.spec_for(name));
      (*codes)[name] = QuantCodes{std::move(q.scales), std::move(q.codes)};
    }
  }
  for (Json& l : layers) l.erase("scales");
  return layers;
}

}  // namespace

SafeTensorsFile awq_scaled_weights(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const QuantPlan& plan,
                                   const PtqMethodOptions& o, const CalibrationSet& cal, Json* layers,
                                   std::map<std::string, QuantCodes>* codes) {
  o.validate();
  if (cal.batches.empty()) throw Error("awq needs calibration data: no batch given");
  SafeTensorsFile scaled = fp32;
  Json l = awq_layers(be, scaled, path, plan, o, cal, codes);
  if (layers) *layers = std::move(l);
  return scaled;
}

SafeTensorsFile quantize_by_method(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const QuantPlan& plan,
                                   const PtqMethodOptions& o, const CalibrationSet& cal, QuantFileReport* report,
                                   Json* info) {
  o.validate();
  Json j = {{"method", o.method}};
  if (o.method == "rtn") {
    if (info) *info = j;
    return quantize_weights(fp32, plan, report);
  }
  if (cal.batches.empty())
    throw Error("quantization method " + o.method +
                " needs calibration data: give --calibration N (quant.calibration), N >= 1 batches or windows of the "
                "training split");
  j["calibration"] = cal.description;
  SafeTensorsFile q;
  if (o.method == "gptq") {
    j["damp"] = o.damp;
    j["act_order"] = o.act_order;
    std::map<std::string, QuantCodes> codes;
    j["layers"] = gptq_layers(be, fp32, path, plan, o, cal, codes);
    q = quantize_weights(fp32, [&plan](const std::string& n) { return plan.spec_for(n); }, report, codes);
  } else {
    Json layers;
    std::map<std::string, QuantCodes> codes;
    const SafeTensorsFile scaled = awq_scaled_weights(be, fp32, path, plan, o, cal, &layers, &codes);
    j["layers"] = layers;
    q = quantize_weights(scaled, [&plan](const std::string& n) { return plan.spec_for(n); }, report, codes);
  }
  if (info) *info = j;
  return q;
}

}  // namespace trainlab
