// measure_sensitivity and the table's JSON (compress/sensitivity.h); the allocation is in
// allocation.cpp.
#include <algorithm>
#include <cstring>

#include "compress/prune.h"
#include "compress/sensitivity.h"
#include "io/weights.h"
#include "util/error.h"

namespace trainlab {

namespace {
using Json = nlohmann::json;

std::vector<float> floats_of(const SafeTensor& t) {
  std::vector<float> v(t.bytes.size() / sizeof(float));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

void set_floats(SafeTensor& t, const std::vector<float>& v) { std::memcpy(t.bytes.data(), v.data(), v.size() * sizeof(float)); }

template <class T>
bool ascending_unique(const std::vector<T>& v) {
  for (size_t i = 1; i < v.size(); ++i)
    if (!(v[i - 1] < v[i])) return false;
  return true;
}

Json point_json(const EvalPoint& p) { return {{"loss", p.loss}, {"accuracy", p.accuracy}}; }
}  // namespace

void SensitivityOptions::validate() const {
  if (measure_bits && (bits.empty() || !ascending_unique(bits) || bits.front() < 2 || bits.back() > 8))
    throw Error("sensitivity: --bits must list bit widths in 2..8, ascending, e.g. 2,3,4,5,6,7,8");
  if (measure_sparsity &&
      (sparsities.empty() || !ascending_unique(sparsities) || sparsities.front() <= 0.0 || sparsities.back() >= 1.0))
    throw Error("sensitivity: --sparsities must list fractions in (0, 1), ascending, e.g. 0.5,0.7,0.9");
  if (granularity == QuantGranularity::Group && group < 1) throw Error("sensitivity: --group must be at least 1");
}

SensitivityTable measure_sensitivity(const SafeTensorsFile& fp32, const std::string& path, const FileEvaluator& eval,
                                     const SensitivityOptions& o, const std::function<void(int, int)>& progress) {
  if (is_quantized_file(fp32)) throw Error(path + " is already quantized: give the fp32 weights of a run");
  o.validate();
  SensitivityTable table;
  table.options = o;
  SafeTensorsFile work = fp32;  // one matrix at a time is changed here and restored
  std::vector<size_t> linear;
  for (size_t i = 0; i < work.tensors.size(); ++i) {
    const SafeTensor& t = work.tensors[i];
    if (is_linear_weight(t.name, t.shape) && t.dtype == "F32") linear.push_back(i);
    else table.other_bytes += static_cast<int64_t>(t.bytes.size());
  }
  if (linear.empty()) throw Error(path + ": no linear weight matrices to quantize or prune");
  const int per_layer = (o.measure_bits ? static_cast<int>(o.bits.size()) : 0) +
                        (o.measure_sparsity ? static_cast<int>(o.sparsities.size()) : 0);
  const int total = 1 + per_layer * static_cast<int>(linear.size());
  int done = 0;
  auto measure = [&]() {
    const EvalPoint p = eval(work);
    if (progress) progress(++done, total);
    return p;
  };
  table.baseline = measure();
  for (size_t i : linear) {
    SafeTensor& t = work.tensors[i];
    const std::vector<float> w = floats_of(t);
    LayerSensitivity L;
    L.name = t.name;
    L.rows = t.shape[0];
    L.cols = t.shape[1];
    if (o.measure_bits)
      for (int b : o.bits) {
        QuantSpec s{b, o.granularity, o.group};
        std::vector<float> q(w.size());
        try {
          fake_quantize_host(w.data(), q.data(), L.numel(), b, s.group_size(L.rows, L.cols));
        } catch (const Error& e) {
          throw Error(path + ": " + t.name + ": " + e.what());
        }
        set_floats(t, q);
        L.bits.push_back(measure());
      }
    if (o.measure_sparsity)
      for (double sp : o.sparsities) {
        const std::vector<float> mask = magnitude_masks({w}, sp, PruneScope::Layer)[0];
        std::vector<float> p(w.size());
        for (size_t j = 0; j < w.size(); ++j) p[j] = w[j] * mask[j];
        set_floats(t, p);
        L.sparsity.push_back(measure());
      }
    set_floats(t, w);
    table.layers.push_back(std::move(L));
  }
  return table;
}

Json SensitivityTable::to_json() const {
  Json layers_json = Json::array();
  for (const LayerSensitivity& L : layers) {
    Json b = Json::array(), s = Json::array();
    for (size_t i = 0; i < L.bits.size(); ++i) {
      Json p = point_json(L.bits[i]);
      p["bits"] = options.bits[i];
      b.push_back(p);
    }
    for (size_t i = 0; i < L.sparsity.size(); ++i) {
      Json p = point_json(L.sparsity[i]);
      p["sparsity"] = options.sparsities[i];
      s.push_back(p);
    }
    layers_json.push_back({{"name", L.name}, {"rows", L.rows}, {"cols", L.cols}, {"bits", b}, {"sparsity", s}});
  }
  return {{"baseline", point_json(baseline)},
          {"granularity", granularity_name(options.granularity)},
          {"group", options.group},
          {"layers", layers_json},
          {"other_bytes", other_bytes}};
}

}  // namespace trainlab
