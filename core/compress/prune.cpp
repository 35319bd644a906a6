#include "compress/prune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "nn/linear.h"
#include "util/error.h"

namespace trainlab {

namespace {
// Indices of the k smallest |w| (ties broken by index) over a list of arrays, as (array, index).
void mark_smallest(const std::vector<std::vector<float>>& ws, const std::vector<size_t>& which, int64_t k,
                   std::vector<std::vector<float>>& masks) {
  if (k <= 0) return;
  std::vector<std::pair<size_t, size_t>> all;
  for (size_t a : which)
    for (size_t i = 0; i < ws[a].size(); ++i) all.emplace_back(a, i);
  k = std::min<int64_t>(k, static_cast<int64_t>(all.size()));
  auto less = [&](const std::pair<size_t, size_t>& x, const std::pair<size_t, size_t>& y) {
    const float ax = std::fabs(ws[x.first][x.second]), ay = std::fabs(ws[y.first][y.second]);
    if (ax != ay) return ax < ay;
    return x < y;
  };
  std::nth_element(all.begin(), all.begin() + (k - 1), all.end(), less);
  for (int64_t i = 0; i < k; ++i) masks[all[static_cast<size_t>(i)].first][all[static_cast<size_t>(i)].second] = 0.0f;
}
}  // namespace

std::vector<std::vector<float>> magnitude_masks(const std::vector<std::vector<float>>& ws, double sparsity,
                                                PruneScope scope) {
  if (sparsity < 0.0 || sparsity >= 1.0) throw Error("pruning sparsity must be in [0, 1), got " + std::to_string(sparsity));
  std::vector<std::vector<float>> masks;
  for (const auto& w : ws) masks.emplace_back(w.size(), 1.0f);
  if (scope == PruneScope::Layer) {
    for (size_t a = 0; a < ws.size(); ++a)
      mark_smallest(ws, {a}, std::llround(sparsity * static_cast<double>(ws[a].size())), masks);
  } else {
    std::vector<size_t> all(ws.size());
    std::iota(all.begin(), all.end(), size_t{0});
    size_t n = 0;
    for (const auto& w : ws) n += w.size();
    mark_smallest(ws, all, std::llround(sparsity * static_cast<double>(n)), masks);
  }
  return masks;
}

std::vector<float> mask_2_4(const std::vector<float>& w, int64_t rows, int64_t cols) {
  if (cols % 4 != 0) throw Error("2:4 pruning needs the input dimension to be a multiple of 4, got " + std::to_string(cols));
  std::vector<float> m(w.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 4) {
      const size_t b = static_cast<size_t>(r * cols + c);
      int idx[4] = {0, 1, 2, 3};
      std::stable_sort(idx, idx + 4, [&](int x, int y) { return std::fabs(w[b + x]) > std::fabs(w[b + y]); });
      m[b + idx[0]] = 1.0f;
      m[b + idx[1]] = 1.0f;
    }
  return m;
}

bool is_2_4(const std::vector<float>& w, int64_t rows, int64_t cols) {
  if (cols % 4 != 0) return false;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 4) {
      int nz = 0;
      for (int j = 0; j < 4; ++j) nz += w[static_cast<size_t>(r * cols + c + j)] != 0.0f;
      if (nz > 2) return false;
    }
  return true;
}

bool GradualSchedule::is_pruning_step(long t) const {
  if (t < start || interval <= 0) return false;
  return (t - start) % interval == 0 && (t - start) / interval <= n;
}

double GradualSchedule::sparsity_at(long t) const {
  if (t < start) return 0.0;
  const long span = static_cast<long>(n) * interval;
  if (span <= 0 || t >= start + span) return final_sparsity;
  const long k = (t - start) / interval;  // the last pruning step at or before t
  const double frac = static_cast<double>(k * interval) / static_cast<double>(span);
  const double r = 1.0 - frac;
  return final_sparsity + (initial - final_sparsity) * r * r * r;
}

std::vector<Parameter*> prunable_parameters(Model& model, bool include_output) {
  std::vector<Parameter*> out;
  for (Parameter* p : model.parameters()) {
    const std::string& n = p->name;
    if (p->shape.size() == 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0) out.push_back(p);
  }
  if (!include_output && !out.empty()) out.pop_back();
  return out;
}

std::vector<std::vector<float>> download_masters(Backend& be, const std::vector<Parameter*>& ps) {
  std::vector<std::vector<float>> out;
  for (Parameter* p : ps) {
    out.emplace_back(static_cast<size_t>(p->numel()));
    be.download(p->master, out.back().data(), DType::F32);
  }
  return out;
}

void apply_masks(Backend& be, const std::vector<Parameter*>& ps, const std::vector<std::vector<float>>& masks) {
  if (masks.size() != ps.size()) throw Error("internal: pruning masks for " + std::to_string(masks.size()) + " of " +
                                             std::to_string(ps.size()) + " parameters");
  for (size_t i = 0; i < ps.size(); ++i) {
    Parameter* p = ps[i];
    std::vector<float> w(static_cast<size_t>(p->numel()));
    be.download(p->master, w.data(), DType::F32);
    for (size_t j = 0; j < w.size(); ++j) w[j] *= masks[i][j];
    be.upload(p->master, w.data(), DType::F32);
    if (!p->value.same_storage(p->master)) be.copy(p->master, p->value);
    if (!p->mask.defined() || p->mask.shape() != p->shape) {
      p->mask = Tensor();
      p->mask = be.empty(p->shape, DType::F32, MemCategory::Weights);
      be.invalidate_captures();  // a captured optimizer step does not know the new mask yet
    }
    be.upload(p->mask, masks[i].data(), DType::F32);
  }
}

void clear_masks(const std::vector<Parameter*>& ps) {
  for (Parameter* p : ps) p->mask = Tensor();
}

nlohmann::json SparsityReport::to_json() const {
  nlohmann::json layers_j = nlohmann::json::array();
  for (const auto& l : layers)
    layers_j.push_back({{"name", l.name}, {"weights", l.numel}, {"zeros", l.zeros}, {"sparsity", l.sparsity()}});
  return {{"layers", layers_j},          {"weights", weights},           {"zeros", zeros},
          {"sparsity", sparsity()},      {"dense_bytes", dense_bytes},   {"bitmap_bytes", bitmap_bytes},
          {"csr_bytes", csr_bytes},      {"sparse_bytes", sparse_bytes()}};
}

SparsityReport sparsity_report(Backend& be, Model& model) {
  SparsityReport r;
  const auto ws = prunable_parameters(model, true);
  for (Parameter* p : model.parameters()) {
    r.dense_bytes += p->numel() * 4;
    if (std::find(ws.begin(), ws.end(), p) == ws.end()) {  // dense (biases)
      r.bitmap_bytes += p->numel() * 4;
      r.csr_bytes += p->numel() * 4;
      continue;
    }
    std::vector<float> w(static_cast<size_t>(p->numel()));
    be.download(p->master, w.data(), DType::F32);
    LayerSparsity l;
    l.name = p->name;
    l.numel = p->numel();
    for (float v : w) l.zeros += v == 0.0f;
    const int64_t nnz = l.numel - l.zeros;
    r.bitmap_bytes += (l.numel + 7) / 8 + nnz * 4;
    r.csr_bytes += nnz * 6 + (p->shape[0] + 1) * 4;
    r.weights += l.numel;
    r.zeros += l.zeros;
    r.layers.push_back(l);
  }
  return r;
}

namespace {
std::vector<Linear*> linears(Mlp& model) {
  std::vector<Linear*> out;
  for (const auto& l : model.layers())
    if (auto* lin = dynamic_cast<Linear*>(l.get())) out.push_back(lin);
  return out;
}
std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}
}  // namespace

StructuredPlan plan_structured(Backend& be, Mlp& model, double fraction) {
  if (fraction < 0.0 || fraction >= 1.0) throw Error("structured pruning fraction must be in [0, 1)");
  StructuredPlan plan;
  auto ls = linears(model);
  for (size_t li = 0; li + 1 < ls.size(); ++li) {  // hidden layers: every linear but the last
    Linear* l = ls[li];
    const int64_t out = l->out_features(), in = l->in_features();
    const auto w = host(be, l->weight().master);
    std::vector<float> b(static_cast<size_t>(out), 0.0f);
    if (l->bias()) b = host(be, l->bias()->master);
    std::vector<double> score(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      double s = static_cast<double>(b[static_cast<size_t>(j)]) * b[static_cast<size_t>(j)];
      for (int64_t k = 0; k < in; ++k) s += static_cast<double>(w[static_cast<size_t>(j * in + k)]) * w[static_cast<size_t>(j * in + k)];
      score[static_cast<size_t>(j)] = s;
    }
    std::vector<int64_t> order(static_cast<size_t>(out));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)]; });
    const int64_t keep = std::max<int64_t>(1, out - std::llround(fraction * static_cast<double>(out)));
    std::vector<int64_t> kept(order.begin(), order.begin() + keep);
    std::sort(kept.begin(), kept.end());
    plan.kept.push_back(std::move(kept));
  }
  return plan;
}

std::unique_ptr<Mlp> build_structured(Backend& be, Mlp& model, const StructuredPlan& plan) {
  auto ls = linears(model);
  if (plan.kept.size() + 1 != ls.size()) throw Error("structured plan does not match the model's hidden layers");
  std::vector<int64_t> sizes{ls.front()->in_features()};
  for (const auto& k : plan.kept) sizes.push_back(static_cast<int64_t>(k.size()));
  sizes.push_back(ls.back()->out_features());
  const std::string act = model.architecture().value("activation", "relu");
  auto small = std::make_unique<Mlp>(be, sizes, act == "gelu" ? Activation::GELU : act == "relu" ? Activation::ReLU : Activation::None, 0);
  auto ss = linears(*small);
  for (size_t li = 0; li < ls.size(); ++li) {
    const int64_t in = ls[li]->in_features();
    const auto w = host(be, ls[li]->weight().master);
    std::vector<int64_t> rows, cols;
    if (li < plan.kept.size()) rows = plan.kept[li];
    else for (int64_t j = 0; j < ls[li]->out_features(); ++j) rows.push_back(j);
    if (li > 0) cols = plan.kept[li - 1];
    else for (int64_t k = 0; k < in; ++k) cols.push_back(k);
    std::vector<float> nw;
    nw.reserve(rows.size() * cols.size());
    for (int64_t r : rows)
      for (int64_t c : cols) nw.push_back(w[static_cast<size_t>(r * in + c)]);
    be.upload(ss[li]->weight().master, nw.data(), DType::F32);
    if (ls[li]->bias() && ss[li]->bias()) {
      const auto b = host(be, ls[li]->bias()->master);
      std::vector<float> nb;
      for (int64_t r : rows) nb.push_back(b[static_cast<size_t>(r)]);
      be.upload(ss[li]->bias()->master, nb.data(), DType::F32);
    }
  }
  small->set_compute_dtype(be, model.compute_dtype());
  return small;
}

void apply_structured_masks(Backend& be, Mlp& model, const StructuredPlan& plan) {
  auto ls = linears(model);
  std::vector<Parameter*> ps;
  std::vector<std::vector<float>> masks;
  for (size_t li = 0; li < ls.size(); ++li) {
    const int64_t out = ls[li]->out_features(), in = ls[li]->in_features();
    std::vector<float> m(static_cast<size_t>(out * in), 1.0f);
    if (li < plan.kept.size()) {
      std::vector<char> keep(static_cast<size_t>(out), 0);
      for (int64_t j : plan.kept[li]) keep[static_cast<size_t>(j)] = 1;
      for (int64_t j = 0; j < out; ++j)
        if (!keep[static_cast<size_t>(j)]) std::fill_n(m.begin() + j * in, in, 0.0f);
      if (ls[li]->bias()) {  // a removed unit's bias: zero it as well
        auto b = host(be, ls[li]->bias()->master);
        for (int64_t j = 0; j < out; ++j)
          if (!keep[static_cast<size_t>(j)]) b[static_cast<size_t>(j)] = 0.0f;
        Parameter* pb = ls[li]->bias();
        be.upload(pb->master, b.data(), DType::F32);
        if (!pb->value.same_storage(pb->master)) be.copy(pb->master, pb->value);
      }
    }
    if (li > 0) {
      std::vector<char> keep(static_cast<size_t>(in), 0);
      for (int64_t k : plan.kept[li - 1]) keep[static_cast<size_t>(k)] = 1;
      for (int64_t j = 0; j < out; ++j)
        for (int64_t k = 0; k < in; ++k)
          if (!keep[static_cast<size_t>(k)]) m[static_cast<size_t>(j * in + k)] = 0.0f;
    }
    ps.push_back(&ls[li]->weight());
    masks.push_back(std::move(m));
  }
  apply_masks(be, ps, masks);
}

double time_forward_ms(Backend& be, Model& model, int64_t rows, int repeats) {
  const auto ps = model.parameters();
  const int64_t in = ps.front()->shape[1];
  Tensor x = be.empty({rows, in}, DType::F32, MemCategory::Workspace);
  std::vector<float> hx(static_cast<size_t>(rows * in));
  std::mt19937_64 rng(7);
  for (auto& v : hx) v = uniform_pm(rng, 1.0f);
  be.upload(x, hx.data(), DType::F32);
  model.forward(be, x, false);  // warm-up (allocates the buffers)
  be.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    model.forward(be, x, false);
    be.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  model.release_buffers();
  return ms[ms.size() / 2];
}

}  // namespace trainlab
