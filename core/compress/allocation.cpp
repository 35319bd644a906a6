// The allocation of bits or sparsity per layer under a budget (compress/sensitivity.h): the
// Pareto-front dynamic programme, the uniform allocation, applying one to a weights file.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "compress/prune.h"
#include "compress/sensitivity.h"
#include "io/weights.h"
#include "util/error.h"

namespace trainlab {

namespace {
using Json = nlohmann::json;

struct Option {
  int64_t cost = 0;
  double dloss = 0.0;
  LayerChoice choice;
};

int64_t layer_bytes(const LayerSensitivity& L, const SensitivityOptions& o, int bits) {
  const QuantSpec s{bits, o.granularity, o.group};
  const int64_t codes = (L.numel() * bits + 7) / 8;
  return codes + 2 * (L.numel() / s.group_size(L.rows, L.cols));
}

int64_t kept_weights(const LayerSensitivity& L, double sparsity) {
  return L.numel() - static_cast<int64_t>(std::llround(sparsity * static_cast<double>(L.numel())));
}

int64_t total_weights(const SensitivityTable& t) {
  int64_t n = 0;
  for (const LayerSensitivity& L : t.layers) n += L.numel();
  return n;
}

// A layer's options with their cost in the budget's unit and their loss increase.
std::vector<Option> layer_options(const SensitivityTable& t, const LayerSensitivity& L, BudgetKind kind) {
  std::vector<Option> out;
  if (kind == BudgetKind::Sparsity) {
    out.push_back({L.numel(), 0.0, {L.name, 0, 0.0}});  // dense
    for (size_t i = 0; i < L.sparsity.size(); ++i) {
      const double s = t.options.sparsities[i];
      out.push_back({kept_weights(L, s), L.sparsity[i].loss - t.baseline.loss, {L.name, 0, s}});
    }
  } else {
    for (size_t i = 0; i < L.bits.size(); ++i) {
      const int b = t.options.bits[i];
      const int64_t cost = kind == BudgetKind::Bits ? b * L.numel() : layer_bytes(L, t.options, b);
      out.push_back({cost, L.bits[i].loss - t.baseline.loss, {L.name, b, 0.0}});
    }
  }
  if (out.empty())
    throw Error("allocation: the sensitivity table has no " +
                std::string(kind == BudgetKind::Sparsity ? "sparsity" : "bits") + " measurements");
  return out;
}

// The budget in the options' cost unit.
int64_t budget_cost(const SensitivityTable& t, const AllocationBudget& b) {
  const double n = static_cast<double>(total_weights(t));
  switch (b.kind) {
    case BudgetKind::Bits: return static_cast<int64_t>(std::floor(b.value * n + 1e-6));
    case BudgetKind::Bytes: return static_cast<int64_t>(b.value) - t.other_bytes;
    case BudgetKind::Sparsity: {
      // The kept weights of every layer pruned to S (each layer's count rounded as the pruning does).
      int64_t kept = 0;
      for (const LayerSensitivity& L : t.layers) kept += kept_weights(L, b.value);
      return kept;
    }
  }
  return 0;
}

struct Point {
  int64_t cost;
  double loss;
  std::vector<int> pick;
};

// Keeps the points that no cheaper (or equally cheap) point beats on loss.
std::vector<Point> pareto(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.cost != b.cost ? a.cost < b.cost : a.loss < b.loss; });
  std::vector<Point> out;
  for (Point& p : pts)
    if (out.empty() || p.loss < out.back().loss) out.push_back(std::move(p));
  return out;
}

std::string weights_label(int64_t n) { return std::to_string(n); }
}  // namespace

std::string AllocationBudget::label() const {
  std::ostringstream s;
  if (kind == BudgetKind::Bits) s << value << " bits a weight";
  else if (kind == BudgetKind::Bytes) s << static_cast<int64_t>(value) << " bytes";
  else s << 100.0 * value << "% sparsity";
  return s.str();
}

std::vector<LayerChoice> allocate_layers(const SensitivityTable& t, const AllocationBudget& b, double* predicted_loss) {
  const int64_t budget = budget_cost(t, b);
  std::vector<std::vector<Option>> opts;
  for (const LayerSensitivity& L : t.layers) opts.push_back(layer_options(t, L, b.kind));
  // min_rest[l]: the cheapest cost of layers l.. (a point that cannot fit them is dropped early).
  std::vector<int64_t> min_rest(opts.size() + 1, 0);
  for (size_t l = opts.size(); l-- > 0;) {
    int64_t m = opts[l][0].cost;
    for (const Option& o : opts[l]) m = std::min(m, o.cost);
    min_rest[l] = min_rest[l + 1] + m;
  }
  if (min_rest[0] > budget)
    throw Error("allocation: the budget of " + b.label() + " is below what the cheapest options take (" +
                (b.kind == BudgetKind::Bytes ? std::to_string(min_rest[0] + t.other_bytes) + " bytes"
                                             : weights_label(min_rest[0]) + (b.kind == BudgetKind::Bits ? " code bits" : " kept weights")) +
                ")");
  std::vector<Point> front = {{0, 0.0, {}}};
  for (size_t l = 0; l < opts.size(); ++l) {
    std::vector<Point> next;
    for (const Point& p : front)
      for (size_t i = 0; i < opts[l].size(); ++i) {
        const int64_t c = p.cost + opts[l][i].cost;
        if (c + min_rest[l + 1] > budget) continue;
        Point q{c, p.loss + opts[l][i].dloss, p.pick};
        q.pick.push_back(static_cast<int>(i));
        next.push_back(std::move(q));
      }
    front = pareto(std::move(next));
  }
  const Point& best = front.back();  // the front's loss falls with cost: its last point is the best
  std::vector<LayerChoice> out;
  for (size_t l = 0; l < opts.size(); ++l) out.push_back(opts[l][static_cast<size_t>(best.pick[l])].choice);
  if (predicted_loss) *predicted_loss = t.baseline.loss + best.loss;
  return out;
}

std::vector<LayerChoice> uniform_allocation(const SensitivityTable& t, const AllocationBudget& b) {
  std::vector<LayerChoice> out;
  if (b.kind == BudgetKind::Sparsity) {
    for (const LayerSensitivity& L : t.layers) out.push_back({L.name, 0, b.value});
    return out;
  }
  const int64_t budget = budget_cost(t, b);
  int chosen = 0;
  for (int bits : t.options.bits) {
    int64_t cost = 0;
    for (const LayerSensitivity& L : t.layers) cost += b.kind == BudgetKind::Bits ? bits * L.numel() : layer_bytes(L, t.options, bits);
    if (cost <= budget) chosen = bits;
  }
  if (chosen == 0) throw Error("allocation: no uniform bit width of --bits fits " + b.label());
  for (const LayerSensitivity& L : t.layers) out.push_back({L.name, chosen, 0.0});
  return out;
}

SafeTensorsFile apply_allocation(const SafeTensorsFile& fp32, const SensitivityTable& t, const std::vector<LayerChoice>& choice,
                                 const AllocationBudget& b, const FileQuantizer& quantize) {
  std::map<std::string, LayerChoice> by_name;
  for (const LayerChoice& c : choice) by_name[c.name] = c;
  if (b.kind != BudgetKind::Sparsity) {
    QuantPlan plan;
    for (const SafeTensor& tensor : fp32.tensors) {
      if (!is_linear_weight(tensor.name, tensor.shape)) continue;
      const auto it = by_name.find(tensor.name);
      if (it == by_name.end()) throw Error("allocation: no bits chosen for " + tensor.name);
      plan.overrides[tensor.name] = QuantSpec{it->second.bits, t.options.granularity, t.options.group};
    }
    return quantize ? quantize(fp32, plan) : quantize_weights(fp32, plan, nullptr);
  }
  SafeTensorsFile out = fp32;
  for (SafeTensor& tensor : out.tensors) {
    const auto it = by_name.find(tensor.name);
    if (it == by_name.end() || it->second.sparsity <= 0.0) continue;
    std::vector<float> w(tensor.bytes.size() / sizeof(float));
    std::memcpy(w.data(), tensor.bytes.data(), tensor.bytes.size());
    const std::vector<float> mask = magnitude_masks({w}, it->second.sparsity, PruneScope::Layer)[0];
    for (size_t j = 0; j < w.size(); ++j) w[j] *= mask[j];
    std::memcpy(tensor.bytes.data(), w.data(), tensor.bytes.size());
  }
  return out;
}

AllocationResult allocate(const SafeTensorsFile& fp32, const SensitivityTable& t, const AllocationBudget& b,
                          const FileEvaluator& eval, const FileQuantizer& quantize) {
  AllocationResult r;
  r.budget = b;
  r.allocated = allocate_layers(t, b, &r.predicted_loss);
  r.uniform = uniform_allocation(t, b);
  r.allocated_held_out = eval(apply_allocation(fp32, t, r.allocated, b, quantize));
  r.uniform_held_out = eval(apply_allocation(fp32, t, r.uniform, b, quantize));
  const EvalPoint &a = r.allocated_held_out, &u = r.uniform_held_out;
  r.kept_uniform = u.accuracy > a.accuracy || (u.accuracy == a.accuracy && u.loss < a.loss);
  const std::vector<LayerChoice> c = r.chosen();
  double bits = 0.0, zeros = 0.0, n = 0.0;
  for (size_t l = 0; l < c.size(); ++l) {
    const double numel = static_cast<double>(t.layers[l].numel());
    bits += c[l].bits * numel;
    zeros += static_cast<double>(t.layers[l].numel() - kept_weights(t.layers[l], c[l].sparsity));
    n += numel;
  }
  r.average_bits = b.kind == BudgetKind::Sparsity ? 32.0 : bits / n;
  r.sparsity = zeros / n;
  r.bytes = tensor_bytes(apply_allocation(fp32, t, c, b, quantize));
  return r;
}

Json AllocationResult::to_json() const {
  auto layers = [&](const std::vector<LayerChoice>& v) {
    Json a = Json::array();
    for (const LayerChoice& c : v)
      a.push_back(budget.kind == BudgetKind::Sparsity ? Json{{"name", c.name}, {"sparsity", c.sparsity}}
                                                      : Json{{"name", c.name}, {"bits", c.bits}});
    return a;
  };
  auto point = [](const EvalPoint& p) { return Json{{"loss", p.loss}, {"accuracy", p.accuracy}}; };
  return {{"budget", budget.label()},
          {"allocated", layers(allocated)},
          {"uniform", layers(uniform)},
          {"predicted_loss", predicted_loss},
          {"allocated_held_out", point(allocated_held_out)},
          {"uniform_held_out", point(uniform_held_out)},
          {"kept", kept_uniform ? "uniform" : "allocated"},
          {"average_bits", average_bits},
          {"sparsity", sparsity},
          {"tensor_bytes", bytes}};
}

}  // namespace trainlab
