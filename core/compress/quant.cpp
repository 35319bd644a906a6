#include "compress/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "nn/model.h"
#include "tensor/dtype.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab {

QuantPlan QuantPlan::parse(const QuantSpec& def, const std::string& text) {
  QuantPlan p;
  p.default_spec = def;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    std::vector<std::string> f;
    std::stringstream is(item);
    std::string part;
    while (std::getline(is, part, ':')) f.push_back(part);
    if (f.size() < 2)
      throw Error("quant.overrides item '" + item + "': expected layer:bits[:granularity[:group]], e.g. net.4:8:channel");
    QuantSpec s = def;
    try {
      s.bits = std::stoi(f[1]);
      if (f.size() > 2) s.granularity = granularity_from_name(f[2]);
      if (f.size() > 3) s.group = std::stoi(f[3]);
    } catch (const std::invalid_argument&) {
      throw Error("quant.overrides item '" + item + "': bits and group must be integers");
    }
    if (s.bits < 2 || s.bits > 8) throw Error("quant.overrides item '" + item + "': bits must be 2..8");
    p.overrides[f[0]] = s;
  }
  return p;
}

const QuantSpec& QuantPlan::spec_for(const std::string& name) const {
  auto it = overrides.find(name);
  if (it != overrides.end()) return it->second;
  const auto dot = name.rfind('.');
  if (dot != std::string::npos) {
    it = overrides.find(name.substr(0, dot));
    if (it != overrides.end()) return it->second;
  }
  return default_spec;
}

bool QuantPlan::quantizable(const std::string& name, const Shape& shape) {
  return shape.size() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
}

nlohmann::json QuantFileReport::to_json() const {
  return {{"quantized_weights", quantized_weights}, {"code_bytes", code_bytes},   {"scale_bytes", scale_bytes},
          {"other_bytes", other_bytes},             {"model_bytes", model_bytes}, {"file_bytes", file_bytes},
          {"bits_per_weight", bits_per_weight()}};
}

namespace {
std::vector<float> as_f32(const SafeTensor& t) {
  const DType dt = dtype_from_safetensors(t.dtype);
  const size_t n = static_cast<size_t>(shape_numel(t.shape));
  std::vector<float> out(n);
  convert_to_f32(dt, t.bytes.data(), out.data(), n);
  return out;
}
}  // namespace

SafeTensorsFile quantize_weights(const SafeTensorsFile& in, const QuantPlan& plan, QuantFileReport* report) {
  SafeTensorsFile out;
  out.metadata = in.metadata;
  nlohmann::json qmeta = nlohmann::json::object();
  QuantFileReport r;
  for (const SafeTensor& t : in.tensors) {
    if (!QuantPlan::quantizable(t.name, t.shape)) {
      out.tensors.push_back(t);
      r.other_bytes += static_cast<int64_t>(t.bytes.size());
      continue;
    }
    const QuantSpec& spec = plan.spec_for(t.name);
    const int64_t rows = t.shape[0], cols = t.shape[1], n = rows * cols;
    const int64_t group = spec.group_size(rows, cols);
    const std::vector<float> w = as_f32(t);
    std::vector<float> scales(static_cast<size_t>((n + group - 1) / group));
    std::vector<int8_t> codes(static_cast<size_t>(n));
    quantize_groups(w.data(), n, spec.bits, group, scales.data(), codes.data());
    SafeTensor q;
    q.name = t.name + ".qweight";
    if (spec.bits == 8) {
      q.dtype = "I8";
      q.shape = t.shape;
    } else {
      q.dtype = "U8";
    }
    q.bytes = pack_codes(codes, spec.bits);
    if (spec.bits != 8) q.shape = {static_cast<int64_t>(q.bytes.size())};
    SafeTensor s;
    s.name = t.name + ".scales";
    s.dtype = "F16";
    s.shape = {static_cast<int64_t>(scales.size())};
    s.bytes.resize(scales.size() * 2);
    convert_from_f32(scales.data(), DType::F16, s.bytes.data(), scales.size());
    r.quantized_weights += n;
    r.code_bytes += static_cast<int64_t>(q.bytes.size());
    r.scale_bytes += static_cast<int64_t>(s.bytes.size());
    nlohmann::json m = spec.to_json();
    m["shape"] = t.shape;
    m["storage"] = spec.bits == 8 ? "int8" : spec.bits == 4 ? "int4-packed" : "int" + std::to_string(spec.bits) + "-packed";
    qmeta[t.name] = m;
    out.tensors.push_back(std::move(q));
    out.tensors.push_back(std::move(s));
  }
  r.model_bytes = r.code_bytes + r.scale_bytes + r.other_bytes;
  out.metadata["trainlab_quant"] = qmeta.dump();
  if (report) *report = r;
  return out;
}

bool is_quantized_file(const SafeTensorsFile& f) { return f.metadata.count("trainlab_quant") > 0; }

int64_t tensor_bytes(const SafeTensorsFile& f) {
  int64_t b = 0;
  for (const auto& t : f.tensors) b += static_cast<int64_t>(t.bytes.size());
  return b;
}

SafeTensorsFile dequantize_weights(const SafeTensorsFile& in) {
  if (!is_quantized_file(in)) return in;
  const nlohmann::json qmeta = nlohmann::json::parse(in.metadata.at("trainlab_quant"));
  SafeTensorsFile out;
  out.metadata = in.metadata;
  out.metadata.erase("trainlab_quant");
  for (const SafeTensor& t : in.tensors) {
    const auto ends = [&](const std::string& suf) {
      return t.name.size() > suf.size() && t.name.compare(t.name.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (ends(".scales")) continue;
    if (!ends(".qweight")) {
      out.tensors.push_back(t);
      continue;
    }
    const std::string name = t.name.substr(0, t.name.size() - 8);
    if (!qmeta.contains(name)) throw Error("quantized tensor '" + t.name + "' has no entry in trainlab_quant metadata");
    const auto& m = qmeta.at(name);
    const QuantSpec spec = QuantSpec::from_json(m);
    const Shape shape = m.at("shape").get<Shape>();
    const int64_t n = shape_numel(shape);
    const int64_t group = spec.group_size(shape[0], shape[1]);
    const SafeTensor* st = in.find(name + ".scales");
    if (!st) throw Error("quantized tensor '" + name + "' has no scales");
    std::vector<float> scales(static_cast<size_t>(shape_numel(st->shape)));
    convert_to_f32(DType::F16, st->bytes.data(), scales.data(), scales.size());
    if (static_cast<int64_t>(scales.size()) != (n + group - 1) / group)
      throw Error("quantized tensor '" + name + "': " + std::to_string(scales.size()) + " scales, expected " +
                  std::to_string((n + group - 1) / group));
    const std::vector<int8_t> codes = unpack_codes(t.bytes, n, spec.bits);
    SafeTensor w;
    w.name = name;
    w.dtype = "F32";
    w.shape = shape;
    w.bytes.resize(static_cast<size_t>(n) * 4);
    float* pw = reinterpret_cast<float*>(w.bytes.data());
    for (int64_t i = 0; i < n; ++i) pw[i] = scales[static_cast<size_t>(i / group)] * codes[static_cast<size_t>(i)];
    out.tensors.push_back(std::move(w));
  }
  return out;
}

void load_weights_any(Backend& be, Model& model, const SafeTensorsFile& file, const std::string& path) {
  load_model_weights(be, model, dequantize_weights(file), path);
}

SafeTensorsFile model_to_file(Backend& be, Model& model) {
  SafeTensorsFile f;
  f.metadata["format"] = "pt";
  f.metadata["trainlab_architecture"] = model.architecture().dump();
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

}  // namespace trainlab
