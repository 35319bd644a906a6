#include "optim/offload.h"

#include <algorithm>
#include <exception>
#include <future>
#include <thread>

#include "util/error.h"

namespace trainlab {

OffloadedOptimizer::OffloadedOptimizer(std::unique_ptr<Optimizer> inner) : m_inner(std::move(inner)) {
  if (!m_inner) throw Error("internal: an offloaded optimizer needs an optimizer");
  // 8-bit AdamW and Adafactor keep state of their own shapes (codes, scales, row and column
  // averages) that their create_state allocates on the backend it is given; only per-element
  // state buffers can be put in the device's pinned host memory here.
  const std::string n = m_inner->name();
  if (n != "adamw" && n != "sgd" && n != "lion")
    throw Error("optim.offload cpu: optim.name " + n + " is not supported with offload: expected adamw, sgd or lion "
                "(or optim.offload none)");
}

Tensor OffloadedOptimizer::host_range(const Tensor& flat, int64_t begin, int64_t end) const {
  return Tensor(flat.storage(), {end - begin}, flat.dtype(), dtype_bytes(flat.dtype(), static_cast<size_t>(begin)));
}

void OffloadedOptimizer::attach(Backend& be, const std::vector<Parameter*>& params) {
  if (!m_device.empty()) {
    if (params != m_device) throw Error("internal: an offloaded optimizer is attached to other parameters");
    return;
  }
  if (params.empty()) return;
  const FlatParams flat(params);
  if (!flat.is_flat(ParamBuffer::Master) || !flat.is_flat(ParamBuffer::Grad) || !flat.is_flat(ParamBuffer::Value))
    throw Error("optim.offload cpu needs the model's parameters in flat buffers");
  const int64_t n = flat.numel();
  m_fp32 = params.front()->value.same_storage(params.front()->master);
  m_master = be.empty_host({n}, DType::F32, MemCategory::Host);
  be.download(flat.buffer(ParamBuffer::Master), m_master.raw(), DType::F32);
  m_grad = be.empty_host({n}, params.front()->grad.dtype(), MemCategory::Host);
  if (!m_fp32) m_value = be.empty_host({n}, params.front()->value.dtype(), MemCategory::Host);

  m_host.resize(params.size());
  m_host_ptrs.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    m_host[i].name = params[i]->name;
    m_host[i].shape = params[i]->shape;
    m_host[i].decay = params[i]->decay;
    m_host[i].embedding = params[i]->embedding;
    m_host_ptrs.push_back(&m_host[i]);
  }
  FlatParams host(m_host_ptrs);
  host.assign_views(ParamBuffer::Master, m_master);
  host.assign_views(ParamBuffer::Grad, m_grad);
  if (m_fp32)
    for (Parameter& h : m_host) h.value = h.master;
  else
    host.assign_views(ParamBuffer::Value, m_value);
  for (ParamBuffer b : m_inner->state_buffers()) {
    Tensor state = be.empty_host({n}, m_inner->state_dtype(), MemCategory::Host);
    be.fill(state, 0.0f);
    host.assign_views(b, state);
  }
  // 16-bit runs: the device's masters become views of the host's (the device buffer is freed);
  // fp32 runs keep the device's fp32 weights, the host's masters being their copy.
  FlatParams device(params);
  if (!m_fp32) device.assign_views(ParamBuffer::Master, m_master);
  for (Parameter* p : params) p->m = Tensor(), p->v = Tensor();

  const size_t parts = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxParts);
  m_chunk_begin.assign(1, 0);
  const int64_t part = (n + static_cast<int64_t>(parts) - 1) / static_cast<int64_t>(parts);
  for (size_t i = 1; i < params.size(); ++i)
    if (flat.offset(i) >= part * static_cast<int64_t>(m_chunk_begin.size())) m_chunk_begin.push_back(i);
  m_chunk_begin.push_back(params.size());
  m_cpu.clear();
  for (size_t c = 0; c + 1 < m_chunk_begin.size(); ++c) m_cpu.push_back(std::make_unique<CpuBackend>());
  m_device = params;
}

void OffloadedOptimizer::step(Backend& be, std::vector<Parameter*>& params) {
  attach(be, params);
  if (params.empty()) return;
  const FlatParams device(params);
  const FlatParams host(m_host_ptrs);
  const size_t parts = m_chunk_begin.size() - 1;
  auto first = [&](size_t c) { return device.offset(m_chunk_begin[c]); };
  auto last = [&](size_t c) { return m_chunk_begin[c + 1] < params.size() ? device.offset(m_chunk_begin[c + 1]) : device.numel(); };
  std::vector<int> tickets;
  for (size_t c = 0; c < parts; ++c) {
    Tensor down = host_range(m_grad, first(c), last(c));
    tickets.push_back(be.copy_to_host_async(device.range(ParamBuffer::Grad, first(c), last(c)), down));
  }
  std::vector<std::future<void>> updates;
  for (size_t c = 0; c < parts; ++c) {
    be.wait_transfer(tickets[c]);
    m_cpu[c]->set_step_scalars(be.step_scalars());  // lr, step count, gradient unscale (clipping's too)
    updates.push_back(std::async(std::launch::async, [this, c] {
      std::vector<Parameter*> part(m_host_ptrs.begin() + static_cast<std::ptrdiff_t>(m_chunk_begin[c]),
                                   m_host_ptrs.begin() + static_cast<std::ptrdiff_t>(m_chunk_begin[c + 1]));
      m_inner->step(*m_cpu[c], part);  // element-wise: the parts are independent
    }));
  }
  const ParamBuffer up = m_fp32 ? ParamBuffer::Master : ParamBuffer::Value;
  std::exception_ptr error;  // the first update's failure, rethrown once every thread has ended
  for (size_t c = 0; c < parts; ++c) {
    try {
      updates[c].get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    if (error) continue;
    Tensor dst = device.range(up, first(c), last(c));  // while later parts still update
    be.copy_from_host_async(host.range(up, first(c), last(c)), dst);
  }
  be.join_transfers();
  if (error) std::rethrow_exception(error);
}

void OffloadedOptimizer::create_state(Backend& be, const std::vector<Parameter*>& params) {
  attach(be, params);
  if (m_fp32 && !params.empty())
    be.download(FlatParams(params).buffer(ParamBuffer::Master), m_master.raw(), DType::F32);
}

std::vector<Optimizer::StateView> OffloadedOptimizer::state_views(const std::vector<Parameter*>& params) const {
  if (m_device.empty()) return {};
  if (params != m_device) throw Error("internal: an offloaded optimizer's state asked for other parameters");
  return m_inner->state_views(m_host_ptrs);
}

}  // namespace trainlab
