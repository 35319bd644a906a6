#include "finetune/adapters.h"

#include <algorithm>
#include <cmath>

#include "nn/linear.h"
#include "util/error.h"

namespace trainlab {

namespace {

std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}

// Row norms of v [out, in] in double, rounded to fp32 (the same function at initialisation and
// in every fold, so that DoRA's first W' is W bit for bit).
std::vector<float> row_norms(const std::vector<float>& v, int64_t out, int64_t in) {
  std::vector<float> n(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double s = 0.0;
    for (int64_t i = 0; i < in; ++i) s += static_cast<double>(v[static_cast<size_t>(o * in + i)]) * v[static_cast<size_t>(o * in + i)];
    n[static_cast<size_t>(o)] = static_cast<float>(std::sqrt(s));
  }
  return n;
}

// w [out, in] += s B A with B [out, r], A [r, in].
void add_low_rank(std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& a, int64_t out,
                  int64_t in, int64_t r, float s) {
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < r; ++k) {
      const float c = s * b[static_cast<size_t>(o * r + k)];
      if (c == 0.0f) continue;
      const float* ak = a.data() + k * in;
      float* wo = w.data() + o * in;
      for (int64_t i = 0; i < in; ++i) wo[i] += c * ak[i];
    }
}

// Gradients of s B A from G [out, in]: dB = s G A^T [out, r], dA = s B^T G [r, in].
void low_rank_grads(const std::vector<float>& g, const std::vector<float>& b, const std::vector<float>& a, int64_t out,
                    int64_t in, int64_t r, float s, std::vector<float>& db, std::vector<float>& da) {
  db.assign(static_cast<size_t>(out * r), 0.0f);
  da.assign(static_cast<size_t>(r * in), 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    const float* go = g.data() + o * in;
    for (int64_t k = 0; k < r; ++k) {
      const float* ak = a.data() + k * in;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(go[i]) * ak[i];
      db[static_cast<size_t>(o * r + k)] = s * static_cast<float>(acc);
      const float c = s * b[static_cast<size_t>(o * r + k)];
      if (c == 0.0f) continue;
      float* dak = da.data() + k * in;
      for (int64_t i = 0; i < in; ++i) dak[i] += c * go[i];
    }
  }
}

// Writes `v` into a gradient, added to what is there when `acc`.
void put_grad(Backend& be, Tensor& grad, std::vector<float> v, bool acc) {
  if (acc) {
    const std::vector<float> old = host(be, grad);
    for (size_t i = 0; i < v.size(); ++i) v[i] += old[i];
  }
  be.upload(grad, v.data(), DType::F32);
}

int64_t param_bytes(const Parameter& p) {
  if (!p.master.defined()) return 0;
  int64_t b = static_cast<int64_t>(p.master.bytes());
  if (p.value.defined() && !p.value.same_storage(p.master)) b += static_cast<int64_t>(p.value.bytes());
  return b;
}

}  // namespace

std::string peft_name(const std::string& module, const char* part) { return "base_model.model." + module + "." + part; }

AdaptedModel::AdaptedModel(Backend& be, std::unique_ptr<CharGpt> base, const FinetuneOptions& o, uint64_t seed)
    : m_base(std::move(base)), m_opt(o) {
  m_dtype = m_base->compute_dtype();
  m_matmul_mode = m_base->matmul_mode();
  const CharGptConfig& c = m_base->config();
  const std::vector<FinetuneTarget> targets = finetune_targets(c.layers, c.dim, c.padded_vocab(), o);
  m_adapters.resize(targets.size());
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 0x4C6F5241ull);
  FlatParamsBuilder params;
  std::vector<Parameter*> order;
  const int64_t r = o.rank;
  for (size_t i = 0; i < targets.size(); ++i) {
    Adapter& ad = m_adapters[i];
    ad.target = targets[i];
    const int64_t out = ad.target.out, in = ad.target.in;
    ad.weight = m_base->find_parameter(ad.target.module + ".weight");
    if (!ad.weight || ad.weight->shape != Shape{out, in})
      throw Error("internal: char-gpt has no weight " + ad.target.module + ".weight [" + std::to_string(out) + ", " +
                  std::to_string(in) + "]");
    const std::vector<float> w = host(be, ad.weight->master);
    if (o.method == FinetuneMethod::Qlora) {
      const Nf4Tensor q = nf4_quantize(w.data(), out * in);
      std::vector<uint8_t> bytes(q.codes);
      bytes.insert(bytes.end(), q.absmax_codes.begin(), q.absmax_codes.end());
      ad.nf4_bytes = be.empty({static_cast<int64_t>(bytes.size())}, DType::I8, MemCategory::Weights);
      be.upload(ad.nf4_bytes, bytes.data(), DType::I8);
      std::vector<float> scales(q.absmax2);
      scales.push_back(q.offset);
      ad.nf4_scales = be.empty({static_cast<int64_t>(scales.size())}, DType::F32, MemCategory::Weights);
      be.upload(ad.nf4_scales, scales.data(), DType::F32);
    } else if (o.method == FinetuneMethod::Dora) {
      ad.frozen = be.empty({out, in}, DType::F32, MemCategory::Weights);
      be.upload(ad.frozen, w.data(), DType::F32);
    }
    ad.a.name = peft_name(ad.target.module, "lora_A.weight");
    ad.a.shape = {r, in};
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));  // kaiming_uniform_(a = sqrt(5))
    params.add(ad.a, [&rng, r, in, bound] {
      std::vector<float> v(static_cast<size_t>(r * in));
      for (float& x : v) x = uniform_pm(rng, bound);
      return v;
    });
    ad.b.name = peft_name(ad.target.module, "lora_B.weight");
    ad.b.shape = {out, r};
    params.add(ad.b, [out, r] { return std::vector<float>(static_cast<size_t>(out * r), 0.0f); });
    order.push_back(&ad.a);
    order.push_back(&ad.b);
    if (o.method == FinetuneMethod::Dora) {
      ad.m.name = peft_name(ad.target.module, "lora_magnitude_vector");
      ad.m.shape = {out};
      ad.m.decay = false;
      params.add(ad.m, [w, out, in] { return row_norms(w, out, in); });
      order.push_back(&ad.m);
    }
  }
  params.finish(be, order);
  if (m_dtype != DType::F32) FlatParams(order).set_compute_dtype(be, m_dtype);
  FlatParams base_flat = m_base->flat_params();
  base_flat.buffer(ParamBuffer::Master).set_category(MemCategory::Weights);  // frozen: weights, not optimizer
  if (!adapter_products()) {
    // dora: the base's gradient buffer is the products' dL/dW' scratch, its masters hold W'.
    base_flat.buffer(ParamBuffer::Grad).set_category(MemCategory::Workspace);
    fold_effective(be);
    return;
  }
  for (const Adapter& ad : m_adapters) m_by_weight[ad.weight] = &ad;
  for (Parameter* p : m_base->parameters()) p->grad = Tensor();  // frozen: no gradient buffer
  if (o.method == FinetuneMethod::Qlora) drop_target_weights(be);
  m_base->set_product_hook(this);
}

void AdaptedModel::drop_target_weights(Backend& be) {
  std::vector<Parameter*> keep;
  std::vector<std::vector<float>> values;
  for (Parameter* p : m_base->parameters()) {
    if (!m_by_weight.count(p)) {
      keep.push_back(p);
      values.push_back(host(be, p->master));
    }
    p->master = Tensor();
    p->value = Tensor();
  }
  FlatParams flat(keep);
  flat.allocate(be, ParamBuffer::Master, DType::F32, MemCategory::Weights);
  for (size_t i = 0; i < keep.size(); ++i) {
    be.upload(keep[i]->master, values[i].data(), DType::F32);
    keep[i]->value = keep[i]->master;
  }
  if (m_dtype != DType::F32) {
    flat.set_compute_dtype(be, m_dtype);
    flat.buffer(ParamBuffer::Master).set_category(MemCategory::Weights);
    for (Parameter* p : keep) p->grad = Tensor();
  }
  int64_t largest = 0;
  for (const Adapter& ad : m_adapters) largest = std::max(largest, ad.target.out * ad.target.in);
  m_deq = be.empty({largest}, parameter_storage_dtype(m_dtype), MemCategory::Workspace);
}

void AdaptedModel::on_matmul_mode() {
  if (adapter_products() && m_matmul_mode == MatmulMode::Fp8)
    throw Error("finetune.method " + std::string(finetune_method_name(m_opt.method)) +
                " computes its adapter products in bf16 or fp32: use precision.compute bf16 (fp8 products keep "
                "per-weight scales, which a shared dequantized or adapted operand does not have)");
  m_base->set_matmul_mode(m_matmul_mode);
}

const Adapter* AdaptedModel::adapter_of(const Parameter& w) const {
  const auto it = m_by_weight.find(&w);
  return it == m_by_weight.end() ? nullptr : it->second;
}

Tensor& AdaptedModel::rank_scratch(Backend& be, Tensor& t, const Tensor& x) {
  const Shape s{x.dim(0), m_opt.rank};
  if (!t.defined() || t.shape() != s || t.dtype() != x.dtype()) {
    t = Tensor();
    t = be.empty(s, x.dtype(), MemCategory::Activations);
  }
  return t;
}

const Tensor& AdaptedModel::weight(Backend& be, const Parameter& w) {
  const Adapter* ad = m_opt.method == FinetuneMethod::Qlora ? adapter_of(w) : nullptr;
  if (!ad) return w.value;
  if (m_deq_of != ad) {  // one product's W at a time, dequantized from NF4
    const std::vector<float> v = frozen_weight(be, *ad);
    m_deq_view = m_deq.slice_rows(0, ad->target.out * ad->target.in).reshape({ad->target.out, ad->target.in});
    be.upload(m_deq_view, v.data(), DType::F32);
    m_deq_of = ad;
  }
  return m_deq_view;
}

void AdaptedModel::adapter_forward(Backend& be, const Parameter& w, const Tensor& x, Tensor& y) {
  const Adapter* ad = adapter_of(w);
  if (!ad) return;
  Tensor& u = rank_scratch(be, m_u, x);
  be.gemm(x, false, ad->a.value, true, u, 1.0f, 0.0f, m_matmul_mode);  // u = x A^T
  be.gemm(u, false, ad->b.value, true, y, static_cast<float>(m_opt.scale()), 1.0f, m_matmul_mode);  // y += s u B^T
}

void AdaptedModel::adapter_backward(Backend& be, const Parameter& w, const Tensor& x, const Tensor& dy) {
  const Adapter* ad = adapter_of(w);
  if (!ad) return;
  const float s = static_cast<float>(m_opt.scale()), beta = m_accumulate ? 1.0f : 0.0f;
  Tensor& u = rank_scratch(be, m_u, x);
  Tensor& t = rank_scratch(be, m_t, x);
  be.gemm(x, false, ad->a.value, true, u, 1.0f, 0.0f, m_matmul_mode);   // u = x A^T
  be.gemm(dy, false, ad->b.value, false, t, 1.0f, 0.0f, m_matmul_mode);  // t = dy B
  Adapter& mut = const_cast<Adapter&>(*ad);
  be.gemm(dy, true, u, false, mut.b.grad, s, beta, m_matmul_mode);  // dB = s dy^T u
  be.gemm(t, true, x, false, mut.a.grad, s, beta, m_matmul_mode);   // dA = s t^T x
}

void AdaptedModel::adapter_backward_dx(Backend& be, const Parameter& w, Tensor& dx) {
  const Adapter* ad = adapter_of(w);
  if (!ad) return;
  be.gemm(m_t, false, ad->a.value, false, dx, static_cast<float>(m_opt.scale()), 1.0f, m_matmul_mode);  // dx += s t A
}

std::vector<Parameter*> AdaptedModel::parameters() {
  std::vector<Parameter*> out;
  for (Adapter& ad : m_adapters) {
    out.push_back(&ad.a);
    out.push_back(&ad.b);
    if (m_opt.method == FinetuneMethod::Dora) out.push_back(&ad.m);
  }
  return out;
}

std::vector<float> AdaptedModel::frozen_weight(Backend& be, const Adapter& ad) const {
  if (ad.frozen.defined()) return host(be, ad.frozen);
  if (!ad.nf4_bytes.defined()) return host(be, ad.weight->master);  // lora: the base's own W
  const int64_t n = ad.target.out * ad.target.in;
  Nf4Tensor q;
  q.n = n;
  std::vector<uint8_t> bytes(static_cast<size_t>(ad.nf4_bytes.numel()));
  be.download(ad.nf4_bytes, bytes.data(), DType::I8);
  const size_t code_bytes = static_cast<size_t>((n + 1) / 2);
  q.codes.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(code_bytes));
  q.absmax_codes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(code_bytes), bytes.end());
  q.absmax2 = host(be, ad.nf4_scales);
  q.offset = q.absmax2.back();
  q.absmax2.pop_back();
  std::vector<float> w(static_cast<size_t>(n));
  nf4_dequantize(q, w.data());
  return w;
}

std::vector<float> AdaptedModel::effective_weight(Backend& be, const Adapter& ad) const {
  const int64_t out = ad.target.out, in = ad.target.in;
  std::vector<float> w = frozen_weight(be, ad);
  add_low_rank(w, host(be, ad.b.master), host(be, ad.a.master), out, in, m_opt.rank, static_cast<float>(m_opt.scale()));
  if (m_opt.method != FinetuneMethod::Dora) return w;
  const std::vector<float> n = row_norms(w, out, in), m = host(be, ad.m.master);
  for (int64_t o = 0; o < out; ++o) {
    const float k = m[static_cast<size_t>(o)] / n[static_cast<size_t>(o)];
    for (int64_t i = 0; i < in; ++i) w[static_cast<size_t>(o * in + i)] *= k;
  }
  return w;
}

void AdaptedModel::fold_effective(Backend& be) {
  for (Adapter& ad : m_adapters) {
    const std::vector<float> w = effective_weight(be, ad);
    Parameter& p = *ad.weight;
    be.upload(p.master, w.data(), DType::F32);
    if (p.value.defined() && !p.value.same_storage(p.master)) be.copy(p.master, p.value);
  }
}

void AdaptedModel::fold(Backend& be) {
  if (!adapter_products()) return fold_effective(be);
  if (m_merged) return;
  for (Adapter& ad : m_adapters) {
    const std::vector<float> w = effective_weight(be, ad);
    Parameter& p = *ad.weight;
    if (!p.master.defined()) p.master = be.empty(p.shape, DType::F32, MemCategory::Weights);  // qlora
    be.upload(p.master, w.data(), DType::F32);
    const DType dt = parameter_storage_dtype(m_dtype);
    if (dt == DType::F32) {
      p.value = p.master;
    } else {
      if (!p.value.defined()) p.value = be.empty(p.shape, dt, MemCategory::Weights);
      be.copy(p.master, p.value);
    }
  }
  m_base->set_product_hook(nullptr);
  m_merged = true;
  m_deq = m_deq_view = Tensor();
  m_deq_of = nullptr;
}

Tensor AdaptedModel::forward(Backend& be, const Tensor& x, bool training) {
  if (!adapter_products()) fold_effective(be);
  return m_base->forward(be, x, training);
}

void AdaptedModel::backward(Backend& be, Tensor& dlogits, bool accumulate) {
  if (m_merged) throw Error("internal: a backward through adapters already merged into the base (fold)");
  m_accumulate = accumulate;
  if (!adapter_products()) {
    m_base->backward(be, dlogits, false);
    return backward_folded(be, accumulate);
  }
  m_base->backward(be, dlogits, false);  // the hook writes the adapters' gradients
}

void AdaptedModel::backward_folded(Backend& be, bool accumulate) {
  const float s = static_cast<float>(m_opt.scale());
  const int64_t r = m_opt.rank;
  for (Adapter& ad : m_adapters) {
    const int64_t out = ad.target.out, in = ad.target.in;
    std::vector<float> g = host(be, ad.weight->grad);
    const std::vector<float> a = host(be, ad.a.master), b = host(be, ad.b.master);
    std::vector<float> v = frozen_weight(be, ad);
    add_low_rank(v, b, a, out, in, r, s);
    const std::vector<float> n = row_norms(v, out, in), m = host(be, ad.m.master);
    std::vector<float> dm(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      float* go = g.data() + o * in;
      const float* vo = v.data() + o * in;
      double gv = 0.0;
      for (int64_t i = 0; i < in; ++i) gv += static_cast<double>(go[i]) * vo[i];
      const double no = n[static_cast<size_t>(o)];
      dm[static_cast<size_t>(o)] = static_cast<float>(gv / no);
      // dV = (m/n) (G - (G.V / n^2) V): the norm's own derivative included.
      const float k = static_cast<float>(m[static_cast<size_t>(o)] / no), c = static_cast<float>(gv / (no * no));
      for (int64_t i = 0; i < in; ++i) go[i] = k * (go[i] - c * vo[i]);
    }
    put_grad(be, ad.m.grad, std::move(dm), accumulate);
    std::vector<float> db, da;
    low_rank_grads(g, b, a, out, in, r, s, db, da);
    put_grad(be, ad.a.grad, std::move(da), accumulate);
    put_grad(be, ad.b.grad, std::move(db), accumulate);
  }
}

FinetuneMemory AdaptedModel::memory(int64_t optimizer_bytes) const {
  FinetuneMemory mem;
  mem.method = finetune_method_name(m_opt.method);
  mem.base_format = m_opt.method == FinetuneMethod::Qlora ? "nf4" : "fp32";
  for (const Adapter& ad : m_adapters) {
    mem.base_weights += ad.target.out * ad.target.in;
    if (m_opt.method == FinetuneMethod::Qlora)
      mem.base_bytes += static_cast<int64_t>(ad.nf4_bytes.bytes() + ad.nf4_scales.bytes());
    else if (m_opt.method == FinetuneMethod::Lora)
      mem.base_bytes += param_bytes(*ad.weight);  // the base's own W (+ its compute copy)
    else
      mem.base_bytes += static_cast<int64_t>(ad.frozen.bytes());
    if (!adapter_products()) mem.effective_bytes += param_bytes(*ad.weight);
    for (const Parameter* p : {&ad.a, &ad.b, &ad.m}) {
      if (!p->master.defined()) continue;
      mem.adapter_params += p->numel();
      mem.adapter_bytes += param_bytes(*p);
      mem.adapter_grad_bytes += static_cast<int64_t>(p->grad.bytes());
    }
  }
  for (Parameter* p : m_base->parameters()) {
    if (p->grad.defined()) mem.product_grad_bytes += static_cast<int64_t>(p->grad.bytes());
    if (!is_target(p)) mem.other_bytes += param_bytes(*p);
  }
  if (m_deq.defined()) mem.dequant_scratch_bytes = static_cast<int64_t>(m_deq.bytes());
  mem.optimizer_bytes = optimizer_bytes;
  return mem;
}

bool AdaptedModel::is_target(const Parameter* p) const {
  for (const Adapter& ad : m_adapters)
    if (ad.weight == p) return true;
  return false;
}

}  // namespace trainlab
