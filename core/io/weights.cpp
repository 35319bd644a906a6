#include "io/weights.h"

#include <algorithm>
#include <unordered_map>

#include "backend/backend.h"
#include "config/run_defaults.h"
#include "nn/model.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

// --- the quantized file format --------------------------------------------------------------------

nlohmann::json QuantFileReport::to_json() const {
  return {{"quantized_weights", quantized_weights}, {"code_bytes", code_bytes},   {"scale_bytes", scale_bytes},
          {"other_bytes", other_bytes},             {"model_bytes", model_bytes}, {"file_bytes", file_bytes},
          {"bits_per_weight", bits_per_weight()}};
}

bool is_linear_weight(const std::string& name, const Shape& shape) { return shape.size() == 2 && name.ends_with(".weight"); }

bool is_quantized_file(const SafeTensorsFile& f) { return f.metadata.count("trainlab_quant") > 0; }

int64_t tensor_bytes(const SafeTensorsFile& f) {
  int64_t b = 0;
  for (const auto& t : f.tensors) b += static_cast<int64_t>(t.bytes.size());
  return b;
}

namespace {
std::vector<float> as_f32(const SafeTensor& t) {
  const DType dt = dtype_from_safetensors(t.dtype);
  const size_t n = static_cast<size_t>(shape_numel(t.shape));
  std::vector<float> out(n);
  convert_to_f32(dt, t.bytes.data(), out.data(), n);
  return out;
}

// W -> W.qweight (codes) + W.scales (fp16), appended to `out`; the entry of trainlab_quant returned.
// The given codes of a weight, checked against its spec.
void check_given(const SafeTensor& t, const QuantSpec& spec, int64_t group, const QuantCodes& g) {
  const int64_t n = t.shape[0] * t.shape[1];
  const auto bad = std::find_if(g.codes.begin(), g.codes.end(), [&](int8_t c) { return c > spec.qmax() || c < -spec.qmax(); });
  if (static_cast<int64_t>(g.codes.size()) != n || static_cast<int64_t>(g.scales.size()) != (n + group - 1) / group ||
      bad != g.codes.end())
    throw Error("tensor " + printable_name(t.name) + ": the given codes do not fit " + spec.label() + " (" +
                std::to_string(n) + " codes in [-" + std::to_string(spec.qmax()) + ", " + std::to_string(spec.qmax()) +
                "], " + std::to_string((n + group - 1) / group) + " scales)");
}

Json quantize_tensor(const SafeTensor& t, const QuantSpec& spec, SafeTensorsFile& out, QuantFileReport& r,
                     const QuantCodes* given) {
  const int64_t rows = t.shape[0], cols = t.shape[1], n = rows * cols;
  const int64_t group = spec.group_size(rows, cols);
  std::vector<float> scales(static_cast<size_t>((n + group - 1) / group));
  std::vector<int8_t> codes(static_cast<size_t>(n));
  if (given) {
    check_given(t, spec, group, *given);
    scales = given->scales;
    codes = given->codes;
  } else {
    const std::vector<float> w = as_f32(t);
    try {
      quantize_groups(w.data(), n, spec.bits, group, scales.data(), codes.data());
    } catch (const Error& e) {
      throw Error("tensor " + printable_name(t.name) + ": " + e.what());
    }
  }
  SafeTensor q;
  q.name = t.name + ".qweight";
  q.dtype = spec.bits == 8 ? "I8" : "U8";
  q.bytes = pack_codes(codes, spec.bits);
  q.shape = spec.bits == 8 ? t.shape : Shape{static_cast<int64_t>(q.bytes.size())};
  SafeTensor s;
  s.name = t.name + ".scales";
  s.dtype = "F16";
  s.shape = {static_cast<int64_t>(scales.size())};
  s.bytes.resize(scales.size() * 2);
  convert_from_f32(scales.data(), DType::F16, s.bytes.data(), scales.size());
  r.quantized_weights += n;
  r.code_bytes += static_cast<int64_t>(q.bytes.size());
  r.scale_bytes += static_cast<int64_t>(s.bytes.size());
  out.tensors.push_back(std::move(q));
  out.tensors.push_back(std::move(s));
  Json m = spec.to_json();
  m["shape"] = t.shape;
  m["storage"] = spec.bits == 8 ? "int8" : spec.bits == 4 ? "int4-packed" : "int" + std::to_string(spec.bits) + "-packed";
  return m;
}
}  // namespace

SafeTensorsFile quantize_weights(const SafeTensorsFile& in, const QuantSpecFor& spec_for, QuantFileReport* report) {
  return quantize_weights(in, spec_for, report, {});
}

SafeTensorsFile quantize_weights(const SafeTensorsFile& in, const QuantSpecFor& spec_for, QuantFileReport* report,
                                 const std::map<std::string, QuantCodes>& given) {
  SafeTensorsFile out;
  out.metadata = in.metadata;
  Json qmeta = Json::object();
  QuantFileReport r;
  for (const SafeTensor& t : in.tensors) {
    if (is_linear_weight(t.name, t.shape)) {
      const auto g = given.find(t.name);
      qmeta[t.name] = quantize_tensor(t, spec_for(t.name), out, r, g == given.end() ? nullptr : &g->second);
    } else {
      out.tensors.push_back(t);
      r.other_bytes += static_cast<int64_t>(t.bytes.size());
    }
  }
  r.model_bytes = r.code_bytes + r.scale_bytes + r.other_bytes;
  out.metadata["trainlab_quant"] = qmeta.dump();
  if (report) *report = r;
  return out;
}

SafeTensorsFile dequantize_weights(const SafeTensorsFile& in, const std::string& path) {
  const WeightsMetadata md = validate_weights_metadata(in, path);
  if (!md.quantized) return in;
  // Validated: every .qweight has its entry and its .scales, their sizes agree with the entry.
  std::unordered_map<std::string_view, const QuantEntry*> entries;
  for (const QuantEntry& e : md.quant) entries.emplace(e.name, &e);
  std::unordered_map<std::string_view, const SafeTensor*> scales;
  for (const SafeTensor& t : in.tensors)
    if (t.name.ends_with(".scales")) scales.emplace(std::string_view(t.name).substr(0, t.name.size() - 7), &t);
  SafeTensorsFile out;
  out.metadata = in.metadata;
  out.metadata.erase("trainlab_quant");
  for (const SafeTensor& t : in.tensors) {
    if (t.name.ends_with(".scales")) continue;
    if (!t.name.ends_with(".qweight")) {
      out.tensors.push_back(t);
      continue;
    }
    const std::string_view name = std::string_view(t.name).substr(0, t.name.size() - 8);
    const QuantEntry& e = *entries.at(name);
    const SafeTensor& st = *scales.at(name);
    const int64_t n = e.shape[0] * e.shape[1];
    std::vector<float> sc(static_cast<size_t>(shape_numel(st.shape)));
    convert_to_f32(DType::F16, st.bytes.data(), sc.data(), sc.size());
    const std::vector<int8_t> codes = unpack_codes(t.bytes, n, e.spec.bits);
    SafeTensor w;
    w.name = e.name;
    w.dtype = "F32";
    w.shape = e.shape;
    w.bytes.resize(static_cast<size_t>(n) * 4);
    float* pw = reinterpret_cast<float*>(w.bytes.data());
    for (int64_t i = 0; i < n; ++i) pw[i] = sc[static_cast<size_t>(i / e.group)] * codes[static_cast<size_t>(i)];
    out.tensors.push_back(std::move(w));
  }
  return out;
}

// --- models ---------------------------------------------------------------------------------------

SafeTensorsFile model_to_file(Backend& be, Model& model, const Json& config) {
  SafeTensorsFile f;
  f.metadata["format"] = "pt";
  f.metadata["trainlab_architecture"] = model.architecture().dump();
  if (!config.is_null()) f.metadata["trainlab_config"] = config.dump();
  for (Parameter* p : model.parameters()) {
    SafeTensor t;
    t.name = p->name;
    t.dtype = "F32";
    t.shape = p->shape;
    t.bytes.resize(static_cast<size_t>(p->numel()) * 4);
    be.download(p->master, t.bytes.data(), DType::F32);
    f.tensors.push_back(std::move(t));
  }
  return f;
}

void save_model_weights(Backend& be, Model& model, const Config& config, const std::string& path) {
  write_safetensors(path, model_to_file(be, model, recorded_config(config)));
}

void load_weights_any(Backend& be, Model& model, const SafeTensorsFile& file, const std::string& path) {
  const SafeTensorsFile f = dequantize_weights(file, path);
  std::unordered_map<std::string_view, const SafeTensor*> index;
  for (const SafeTensor& t : f.tensors) index.emplace(t.name, &t);
  for (Parameter* p : model.parameters()) {
    const auto it = index.find(p->name);
    const SafeTensor* t = it == index.end() ? nullptr : it->second;
    if (!t) throw Error(path + ": tensor '" + p->name + "' is missing");
    if (t->shape != p->shape)
      throw Error(path + ": tensor '" + p->name + "' has shape " + shape_str(t->shape) + ", the model expects " +
                  shape_str(p->shape));
    be.upload(p->master, t->bytes.data(), dtype_from_safetensors(t->dtype));
    if (!p->value.same_storage(p->master)) be.copy(p->master, p->value);
  }
}

void load_model_weights(Backend& be, Model& model, const std::string& path) {
  load_weights_any(be, model, read_safetensors(path), path);
}

std::unique_ptr<Model> model_from_file(Backend& be, const SafeTensorsFile& f, const std::string& path) {
  const WeightsMetadata md = validate_weights_metadata(f, path);
  if (md.architecture.is_null()) throw Error(path + ": no trainlab_architecture metadata (was it written by trainlab?)");
  auto m = build_model(be, md.architecture, 0);
  load_weights_any(be, *m, f, path);
  return m;
}

std::unique_ptr<Model> load_model_file(Backend& be, const std::string& path) {
  return model_from_file(be, read_safetensors(path), path);
}

}  // namespace trainlab
