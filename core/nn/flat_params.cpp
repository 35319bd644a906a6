#include "nn/flat_params.h"

#include <algorithm>

#include "util/error.h"

namespace trainlab {

namespace {
// Byte offset of a view inside its Storage (pointer difference: valid for device pointers too,
// nothing is dereferenced).
size_t byte_offset(const Tensor& t) {
  return static_cast<size_t>(static_cast<const char*>(t.raw()) - static_cast<const char*>(t.storage()->data()));
}
}  // namespace

const char* param_buffer_name(ParamBuffer b) {
  switch (b) {
    case ParamBuffer::Master: return "master";
    case ParamBuffer::Value: return "value";
    case ParamBuffer::Grad: return "grad";
    case ParamBuffer::M: return "m";
    case ParamBuffer::V: return "v";
  }
  return "?";
}

Tensor& param_tensor(Parameter& p, ParamBuffer b) {
  switch (b) {
    case ParamBuffer::Master: return p.master;
    case ParamBuffer::Value: return p.value;
    case ParamBuffer::Grad: return p.grad;
    case ParamBuffer::M: return p.m;
    case ParamBuffer::V: return p.v;
  }
  throw Error("unknown parameter buffer");
}

FlatParams::FlatParams(std::vector<Parameter*> params) : m_params(std::move(params)) {
  m_offsets.reserve(m_params.size());
  for (Parameter* p : m_params) {
    m_offsets.push_back(m_total);
    m_total += p->numel();
  }
}

bool FlatParams::is_flat(ParamBuffer b) const {
  if (m_params.empty()) return true;
  const Tensor& first = param_tensor(*m_params.front(), b);
  if (!first.defined()) return false;
  const DType dt = first.dtype();
  const size_t base = byte_offset(first);
  if (base + dtype_bytes(dt, static_cast<size_t>(m_total)) > first.storage()->bytes()) return false;
  for (size_t i = 0; i < m_params.size(); ++i) {
    const Tensor& t = param_tensor(*m_params[i], b);
    if (!t.defined() || !t.same_storage(first) || t.dtype() != dt || t.numel() != m_params[i]->numel() ||
        byte_offset(t) != base + dtype_bytes(dt, static_cast<size_t>(m_offsets[i])))
      return false;
  }
  return true;
}

Tensor FlatParams::range(ParamBuffer b, int64_t begin, int64_t end) const {
  if (begin < 0 || end > m_total || begin > end)
    throw Error("parameter range [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside the " +
                std::to_string(m_total) + " elements of the flat buffers");
  if (m_params.empty()) throw Error("a range of flat buffers needs at least one parameter");
  if (!is_flat(b))
    throw Error(std::string("the parameters' ") + param_buffer_name(b) + " tensors are not views of one flat buffer");
  const Tensor& first = param_tensor(*m_params.front(), b);
  const size_t at = byte_offset(first) + dtype_bytes(first.dtype(), static_cast<size_t>(begin));
  return Tensor(first.storage(), {end - begin}, first.dtype(), at);
}

void FlatParams::allocate(Backend& be, ParamBuffer b, DType dtype, MemCategory category) {
  for (Parameter* p : m_params) param_tensor(*p, b) = Tensor();
  if (m_params.empty()) return;
  assign_views(b, be.empty({m_total}, dtype, category));
}

void FlatParams::assign_views(ParamBuffer b, const Tensor& flat) {
  if (flat.numel() != m_total)
    throw Error(std::string("flat ") + param_buffer_name(b) + " buffer of " + std::to_string(flat.numel()) +
                " elements for parameters of " + std::to_string(m_total));
  const size_t base = byte_offset(flat);
  for (size_t i = 0; i < m_params.size(); ++i) {
    Parameter& p = *m_params[i];
    param_tensor(p, b) =
        Tensor(flat.storage(), p.shape, flat.dtype(), base + dtype_bytes(flat.dtype(), static_cast<size_t>(m_offsets[i])));
  }
}

void FlatParams::ensure_zeros(Backend& be, ParamBuffer b, MemCategory category, DType dtype) {
  std::vector<Parameter*> missing;
  for (Parameter* p : m_params)
    if (!param_tensor(*p, b).defined()) missing.push_back(p);
  if (missing.empty()) return;
  FlatParams part(std::move(missing));
  part.allocate(be, b, dtype, category);
  Tensor all = part.buffer(b);
  be.fill(all, 0.0f);
}

void FlatParams::set_compute_dtype(Backend& be, DType dtype) {
  if (m_params.empty()) return;
  const DType store = parameter_storage_dtype(dtype);
  Tensor master = buffer(ParamBuffer::Master);
  // A gradient buffer in another format goes before the new value buffer comes, so that the
  // switch never holds both formats' gradients at once.
  const bool new_grad = !is_flat(ParamBuffer::Grad) || m_params.front()->grad.dtype() != store;
  if (new_grad)
    for (Parameter* p : m_params) p->grad = Tensor();
  if (store == DType::F32) {
    master.set_category(MemCategory::Weights);
    for (Parameter* p : m_params) p->value = p->master;
  } else {
    master.set_category(MemCategory::Optimizer);
    const Parameter& first = *m_params.front();
    if (!is_flat(ParamBuffer::Value) || first.value.same_storage(first.master) || first.value.dtype() != store)
      allocate(be, ParamBuffer::Value, store, MemCategory::Weights);
    Tensor value = buffer(ParamBuffer::Value);
    be.copy(master, value);
  }
  if (new_grad) {
    allocate(be, ParamBuffer::Grad, store, MemCategory::Gradients);
    Tensor grad = buffer(ParamBuffer::Grad);
    be.fill(grad, 0.0f);
  }
}

void FlatParamsBuilder::add(Parameter& p, Init init) {
  if (std::any_of(m_declared.begin(), m_declared.end(), [&](const auto& d) { return d.first == &p; }))
    throw Error("parameter " + p.name + " declared twice");
  m_declared.emplace_back(&p, std::move(init));
}

FlatParams FlatParamsBuilder::finish(Backend& be, const std::vector<Parameter*>& order) {
  if (order.size() != m_declared.size())
    throw Error("flat parameters: " + std::to_string(order.size()) + " parameters in the model's order, " +
                std::to_string(m_declared.size()) + " declared");
  for (Parameter* p : order)
    if (std::none_of(m_declared.begin(), m_declared.end(), [&](const auto& d) { return d.first == p; }))
      throw Error("flat parameters: parameter " + p->name + " was not declared");
  FlatParams flat(order);
  flat.allocate(be, ParamBuffer::Master, DType::F32, MemCategory::Weights);
  // Declaration order, not layout order: the generators draw from the model's random stream.
  for (auto& [p, init] : m_declared) {
    const std::vector<float> values = init();
    if (static_cast<int64_t>(values.size()) != p->numel())
      throw Error("parameter " + p->name + ": " + std::to_string(values.size()) + " initial values for shape " +
                  shape_str(p->shape));
    be.upload(p->master, values.data(), DType::F32);
  }
  for (Parameter* p : order) p->value = p->master;
  flat.allocate(be, ParamBuffer::Grad, DType::F32, MemCategory::Gradients);
  Tensor grad = flat.buffer(ParamBuffer::Grad);
  be.fill(grad, 0.0f);
  m_declared.clear();
  return flat;
}

}  // namespace trainlab
