#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/backend_checks.h"
#include "backend/cuda/cuda_checks.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/lt_gemm.h"
#include "elementwise.cuh"
#include "optim.cuh"
#include "softmax_xent.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

namespace trainlab::cuda {

using namespace trainlab::kern;

// --- timing ----------------------------------------------------------------------------------
TimedOp::TimedOp(CudaBackend* be, const char* name, bool on, const OpCost& cost)
    : m_be(be), m_on(on && !be->m_ctx.capturing) {
  if (m_on) m_be->timing_begin(name, cost);
}
TimedOp::~TimedOp() {
  if (m_on) m_be->timing_end();
}

void CudaBackend::timing_begin(const char* name, const OpCost& cost) {
  auto take = [&]() {
    cudaEvent_t e;
    if (!m_ctx.free_events.empty()) {
      e = m_ctx.free_events.back();
      m_ctx.free_events.pop_back();
    } else {
      TL_CUDA_CHECK(cudaEventCreate(&e));
    }
    return e;
  };
  PendingTiming p{name, take(), take(), cost};
  TL_CUDA_CHECK(cudaEventRecord(p.start, m_ctx.stream));
  m_ctx.pending.push_back(p);
}
void CudaBackend::timing_end() { TL_CUDA_CHECK(cudaEventRecord(m_ctx.pending.back().stop, m_ctx.stream)); }

void CudaBackend::collect_timings() const {
  if (m_ctx.pending.empty()) return;
  TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
  for (auto& p : m_ctx.pending) {
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    KernelTime& k = m_ctx.times[p.name];
    k.name = p.name;
    k.ms += ms;
    k.calls += 1;
    k.flops += p.cost.flops;
    k.bytes += p.cost.bytes;
    m_ctx.free_events.push_back(p.start);
    m_ctx.free_events.push_back(p.stop);
  }
  m_ctx.pending.clear();
}

void CudaBackend::set_kernel_timing(bool on) {
  Backend::set_kernel_timing(on);
  invalidate_captures();
}
std::vector<KernelTime> CudaBackend::kernel_times() const {
  bind();
  collect_timings();
  std::vector<KernelTime> out;
  for (auto& [n, k] : m_ctx.times) out.push_back(k);
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}
void CudaBackend::reset_kernel_times() {
  collect_timings();
  m_ctx.times.clear();
}

// --- lifetime, info --------------------------------------------------------------------------
CudaBackend::CudaBackend(int device, const DeviceOptions& options) : m_options(options) {
  m_ctx.device = device;
  TL_CUDA_CHECK(cudaSetDevice(device));
  TL_CUDA_CHECK(cudaFree(nullptr));  // creates the runtime context
  size_t free_b = 0, total_b = 0;
  TL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  m_ctx.context_bytes = static_cast<int64_t>(total_b - free_b);
  TL_CUDA_CHECK(cudaGetDeviceProperties(&m_ctx.props, device));
  TL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_ctx.stream, cudaStreamNonBlocking));
  m_ctx.alloc = std::make_shared<DeviceAllocator>(device);
  TL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_ctx.scalars), sizeof(DevScalars)));
  TL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_ctx.flag), sizeof(int)));
  TL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m_ctx.flag_host), sizeof(int)));
  TL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m_ctx.pinned), CudaContext::kSlots * CudaContext::kSlotBytes));
  for (auto& e : m_ctx.slot_done) TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const DevScalars init{0.0f, 1.0f, 1.0f, 1.0f};
  TL_CUDA_CHECK(cudaMemcpy(m_ctx.scalars, &init, sizeof(init), cudaMemcpyHostToDevice));
  m_fp8_units = supports(DType::F8E4M3);
  m_fp8_gemm = std::make_unique<Fp8Gemm>(*this, m_fp8_units);
  m_lt_gemm = std::make_unique<LtGemm>(*this, m_options.fp32_gemm, m_options.lt_autotune);
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(m_ctx.device);
  cudaStreamSynchronize(m_ctx.stream);
  for (auto& [k, g] : m_ctx.graphs) {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    if (g.graph) cudaGraphDestroy(g.graph);
  }
  m_fp8_gemm.reset();
  m_lt_gemm.reset();
  m_reduce_scratch = Tensor();
  for (auto& w : m_workspace) w = Tensor();
  for (auto& p : m_ctx.pending) m_ctx.free_events.push_back(p.start), m_ctx.free_events.push_back(p.stop);
  for (auto e : m_ctx.free_events) cudaEventDestroy(e);
  for (auto e : m_ctx.slot_done) cudaEventDestroy(e);
  for (auto e : m_ctx.xfer_events) cudaEventDestroy(e);
  if (m_ctx.xfer) cudaStreamSynchronize(m_ctx.xfer), cudaStreamDestroy(m_ctx.xfer);
  cudaFreeHost(m_ctx.pinned);
  cudaFreeHost(m_ctx.flag_host);
  cudaFree(m_ctx.scalars);
  cudaFree(m_ctx.flag);
  cudaStreamDestroy(m_ctx.stream);
  // m_ctx.alloc lives on while tensors that still hold blocks exist (their deleters own a share).
}

void CudaBackend::bind() const {
  cudaSetDevice(m_ctx.device);
  if (!m_gathers.empty()) flush_gathers();  // writes pending step scalars too
  if (m_ctx.scalars_dirty) {
    launch_set_scalars(m_ctx.scalars, m_ctx.host_scalars, m_ctx.stream);
    m_ctx.scalars_dirty = false;
  }
}

void CudaBackend::flush_gathers() const {
  if (m_gathers.empty()) return;
  std::vector<GatherJob> jobs;
  jobs.swap(m_gathers);
  const bool timed = m_kernel_timing && !m_ctx.capturing;
  auto* self = const_cast<CudaBackend*>(this);
  if (timed) self->timing_begin("gather_rows");
  // Pending step scalars ride on this launch. Inside a capture the gather always writes them, so
  // that replays can be given new values through the node's parameters (run_step).
  const bool write =
      m_ctx.scalars_dirty || (m_ctx.capturing && !m_ctx.capture_scalars_written && !m_ctx.capture_scalars_read);
  if (write && m_ctx.capturing) m_ctx.capture_scalars_written = true;
  launch_gather_multi(jobs.data(), static_cast<int>(jobs.size()), m_ctx.scalars, write ? &m_ctx.host_scalars : nullptr,
                      m_ctx.stream);
  m_ctx.scalars_dirty = false;
  if (timed) self->timing_end();
}

DeviceInfo CudaBackend::info() const {
  bind();
  DeviceInfo d;
  d.kind = DeviceKind::Cuda;
  d.index = m_ctx.device;
  d.name = m_ctx.props.name;
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  d.software = "CUDA driver " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10) + ", runtime " +
               std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    d.total_bytes = static_cast<int64_t>(total_b);
    d.used_bytes = static_cast<int64_t>(total_b - free_b);
  }
  d.runtime_context_bytes = m_ctx.context_bytes;
  const int cc = m_ctx.props.major * 10 + m_ctx.props.minor;
  d.formats = {DType::F32, DType::F16};
  if (cc >= 80) d.formats.push_back(DType::BF16);
  if (cc >= 89) {
    d.formats.push_back(DType::F8E4M3);
    d.formats.push_back(DType::F8E5M2);
  }
  // Datasheet dense peaks (TFLOP/s): backend.h's one table (H100/H200 SXM, A100).
  d.peak_tflops = datasheet_peaks(cc);
  return d;
}

bool CudaBackend::supports(DType t) const {
  const int cc = m_ctx.props.major * 10 + m_ctx.props.minor;
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::I32: return true;
    case DType::BF16: return cc >= 80;
    case DType::F8E4M3:
    case DType::F8E5M2: return cc >= 89;
    default: return false;
  }
}

bool CudaBackend::supports(Op op, DType t) const {
  // The kernels read and write fp32, bf16 and fp16 tensors; the products and the quantizers also
  // take fp8 tensors (converted on load), and fp8 computation itself is MatmulMode::Fp8's.
  const bool kernel_format = (t == DType::F32 || t == DType::BF16 || t == DType::F16) && supports(t);
  switch (op) {
    case Op::GatherRows: return true;        // rows copied as bytes, any format
    case Op::GemmI8: return t == DType::I8;  // int8 operands, int32 result (cuBLASLt)
    case Op::Decode:                         // the decoder's weight formats (kernels/decode.cu)
      return t == DType::F32 || t == DType::I8 || t == DType::I4 || (t == DType::BF16 && supports(t));
    case Op::Gemm:
    case Op::LinearForward:
    case Op::LinearForwardResidual:
    case Op::LinearBackward:
    case Op::FakeQuantize:
    case Op::QuantizeI8:
    case Op::Int8Linear: return dtype_is_float(t) && supports(t);
    default: return kernel_format;
  }
}

// --- memory ------------------------------------------------------------------------------------
Tensor CudaBackend::empty(const Shape& shape, DType dtype, MemCategory category) {
  bind();
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  std::shared_ptr<DeviceAllocator> alloc = m_ctx.alloc;
  void* p = alloc->allocate(bytes);
  auto storage = std::make_shared<Storage>(p, bytes, category, DeviceKind::Cuda, &m_ledger,
                                           [alloc](void* q, size_t) { alloc->release(q); });
  return Tensor(std::move(storage), shape, dtype);
}

Tensor CudaBackend::as_format(const Tensor& t, DType want, int slot) {
  if (t.dtype() == want) return t;
  Tensor& w = m_workspace[slot];
  const size_t need = dtype_bytes(want, static_cast<size_t>(t.numel()));
  if (!w.defined() || w.bytes() < need) {
    w = Tensor();
    w = empty({static_cast<int64_t>((need + 3) / 4)}, DType::F32, MemCategory::Workspace);
  }
  Tensor out(w.storage(), t.shape(), want);
  launch_convert(t.raw(), dcode(t.dtype()), out.raw(), dcode(want), t.numel(), m_ctx.stream);
  return out;
}

void CudaBackend::stage_h2d(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes <= CudaContext::kSlotBytes && !m_ctx.capturing) {
    const int slot = m_ctx.next_slot;
    m_ctx.next_slot = (slot + 1) % CudaContext::kSlots;
    TL_CUDA_CHECK(cudaEventSynchronize(m_ctx.slot_done[slot]));  // the slot's last copy has run
    char* host = m_ctx.pinned + static_cast<size_t>(slot) * CudaContext::kSlotBytes;
    std::memcpy(host, src, bytes);
    TL_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyDefault, m_ctx.stream));
    TL_CUDA_CHECK(cudaEventRecord(m_ctx.slot_done[slot], m_ctx.stream));
  } else {
    TL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, m_ctx.stream));
    TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
  }
}

void CudaBackend::upload(Tensor& dst, const void* src, DType src_type) {
  cudaSetDevice(m_ctx.device);
  flush_gathers();  // (pending step scalars may stay pending: the step's gather carries them)
  const size_t n = static_cast<size_t>(dst.numel());
  if (src_type == dst.dtype()) {
    stage_h2d(dst.raw(), src, dst.bytes());
    return;
  }
  std::vector<float> f(n);
  convert_to_f32(src_type, src, f.data(), n);
  std::vector<char> conv(dst.bytes());
  convert_from_f32(f.data(), dst.dtype(), conv.data(), n);
  stage_h2d(dst.raw(), conv.data(), conv.size());
}

void CudaBackend::download(const Tensor& src, void* dst, DType dst_type) {
  bind();
  collect_timings();
  const size_t n = static_cast<size_t>(src.numel());
  TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
  if (dst_type == src.dtype()) {
    TL_CUDA_CHECK(cudaMemcpy(dst, src.raw(), src.bytes(), cudaMemcpyDefault));
    return;
  }
  std::vector<char> raw(src.bytes());
  TL_CUDA_CHECK(cudaMemcpy(raw.data(), src.raw(), src.bytes(), cudaMemcpyDefault));
  std::vector<float> f(n);
  convert_to_f32(src.dtype(), raw.data(), f.data(), n);
  if (dst_type == DType::F32)
    std::memcpy(dst, f.data(), n * sizeof(float));
  else
    convert_from_f32(f.data(), dst_type, dst, n);
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  // The batch's compute-format copy of a pending gather: fused into that gather.
  for (auto& g : m_gathers)
    if (static_cast<void*>(g.dst) == src.raw() && !g.dst2 && src.dtype() == DType::F32 && dst.dtype() != DType::F32 &&
        src.numel() == dst.numel() && src.numel() == g.rows * g.words) {
      g.dst2 = dst.raw();
      g.dst2_dt = dcode(dst.dtype());
      return;
    }
  bind();
  if (src.numel() != dst.numel())
    throw Error("copy between tensors of different sizes: " + shape_str(src.shape()) + " -> " + shape_str(dst.shape()));
  TL_TIMED_COST("copy", stream_cost({&src}, {&dst}));
  if (src.dtype() == dst.dtype()) {
    TL_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDefault, m_ctx.stream));
    return;
  }
  launch_convert(src.raw(), dcode(src.dtype()), dst.raw(), dcode(dst.dtype()), src.numel(), m_ctx.stream);
}

void CudaBackend::fill(Tensor& t, float value) {
  bind();
  if (t.device() == DeviceKind::Cpu) {  // pinned host memory (empty_host): the host writes it
    TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
    std::vector<float> v(static_cast<size_t>(t.numel()), value);
    std::vector<char> conv(t.bytes());
    convert_from_f32(v.data(), t.dtype(), conv.data(), v.size());
    std::memcpy(t.raw(), conv.data(), conv.size());
    return;
  }
  TL_TIMED_COST("fill", stream_cost({}, {&t}));
  if (value == 0.0f) {
    TL_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), m_ctx.stream));
    return;
  }
  launch_fill(t.raw(), dcode(t.dtype()), value, t.numel(), m_ctx.stream);
}

void CudaBackend::synchronize() {
  bind();
  TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
}

void CudaBackend::set_step_scalars(const StepScalars& s) {
  // Written to the device lazily: by the next operation, or by the step's first kernel (a gather)
  // whether eager or replayed from a graph -- no launch of its own in front of each step.
  m_scalars = s;
  m_ctx.host_scalars = DevScalars{s.lr, s.loss_scale, s.grad_unscale, s.step};
  m_ctx.scalars_dirty = true;
  if (m_ctx.capturing) bind();
}

// --- elementwise, loss, gather ---------------------------------------------------------------
void CudaBackend::activation_forward(Activation act, const Tensor& x, Tensor& y) {
  bind();
  TL_TIMED_COST("activation_forward", stream_cost({&x}, {&y}, act == Activation::GELU ? op_flops::kGelu : op_flops::kRelu));
  launch_activation_forward(act_code(act), x.raw(), dcode(x.dtype()), y.raw(), dcode(y.dtype()), x.numel(), m_ctx.stream);
}

void CudaBackend::activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  bind();
  TL_TIMED_COST("activation_backward", stream_cost({&x, &dy}, {&dx}, act == Activation::GELU ? op_flops::kGeluBackward : op_flops::kRelu));
  launch_activation_backward(act_code(act), x.raw(), dcode(x.dtype()), dy.raw(), dcode(dy.dtype()), dx.raw(),
                             dcode(dx.dtype()), x.numel(), m_ctx.stream);
}

void CudaBackend::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                               Tensor& stats, bool accumulate_stats) {
  bind();
  check_matrix(logits, "logits");
  const int64_t b = logits.dim(0), c = logits.dim(1);
  if (labels.dtype() != DType::I32 || labels.numel() != b)
    throw Error("softmax_xent: labels must be int32 of length " + std::to_string(b));
  if (stats.dtype() != DType::F32 || stats.numel() < 2) throw Error("softmax_xent: stats must be fp32 [2]");
  const int64_t ws = softmax_xent_workspace_bytes(b);
  void* scratch = ws > 0 ? reduce_scratch((ws + 3) / 4) : nullptr;
  TL_TIMED_COST("softmax_xent", stream_cost({&logits, &labels}, {dlogits}, op_flops::kSoftmaxXent));
  note_scalar_read();
  launch_softmax_xent(logits.raw(), dcode(logits.dtype()), b, c, labels.data<int32_t>(), dlogits ? dlogits->raw() : nullptr,
                      dlogits ? dcode(dlogits->dtype()) : 0, grad_multiplier, m_ctx.scalars, stats.data<float>(),
                      accumulate_stats, scratch, m_ctx.stream);
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) {
  cudaSetDevice(m_ctx.device);
  const size_t row_bytes = gather_rows_row_bytes(src, idx, dst);
  const int64_t rows = idx.numel();
  if (row_bytes % 4 == 0 && dtype_bytes(src.dtype(), 1) == 4 && static_cast<int>(m_gathers.size()) < kMaxGatherJobs) {
    GatherJob j;
    j.src = static_cast<const uint32_t*>(src.raw());
    j.src_rows = src.shape()[0];
    j.words = static_cast<int64_t>(row_bytes / 4);
    j.idx = idx.data<int32_t>();
    j.rows = rows;
    j.dst = static_cast<uint32_t*>(dst.raw());
    m_gathers.push_back(j);  // launched by the next operation (bind())
    return;
  }
  TL_TIMED("gather_rows");
  launch_gather_rows(src.raw(), src.shape()[0], static_cast<int64_t>(row_bytes), idx.data<int32_t>(), rows, dst.raw(),
                     m_ctx.stream);
}

// --- optimizers: cuda_optim.cpp ------------------------------------------------------------

bool CudaBackend::all_finite(std::span<const Tensor* const> tensors) {
  bind();
  std::vector<OptTensor> t;
  for (const Tensor* x : tensors) {
    OptTensor o;
    o.grad = x->raw();
    o.grad_dt = dcode(x->dtype());
    o.n = x->numel();
    t.push_back(o);
  }
  {
    TL_TIMED("all_finite");
    TL_CUDA_CHECK(cudaMemsetAsync(m_ctx.flag, 0, sizeof(int), m_ctx.stream));
    launch_all_finite(t.data(), static_cast<int>(t.size()), m_ctx.flag, m_ctx.stream);
    TL_CUDA_CHECK(cudaMemcpyAsync(m_ctx.flag_host, m_ctx.flag, sizeof(int), cudaMemcpyDeviceToHost, m_ctx.stream));
  }
  TL_CUDA_CHECK(cudaStreamSynchronize(m_ctx.stream));
  return *m_ctx.flag_host == 0;
}

// --- step capture ------------------------------------------------------------------------------
void CudaBackend::run_step(const std::string& key, const std::function<void()>& step) {
  cudaSetDevice(m_ctx.device);
  flush_gathers();
  if (!m_capture || m_kernel_timing) {
    step();
    flush_gathers();
    return;
  }
  CudaContext::Graph& g = m_ctx.graphs[key];
  if (g.eager) {
    step();
    flush_gathers();
    return;
  }
  if (g.exec) {
    if (m_ctx.scalars_dirty && g.scalar_node) {
      set_scalar_gather_node(g.exec, g.scalar_node, m_ctx.host_scalars);
      m_ctx.scalars_dirty = false;
    }
    bind();  // scalars not carried by the graph
    TL_CUDA_CHECK(cudaGraphLaunch(g.exec, m_ctx.stream));
    return;
  }
  if (++g.calls < 2) {  // eager first: buffers and optimizer state get allocated
    m_ctx.host_values_drawn = false;
    step();
    flush_gathers();
    if (m_ctx.host_values_drawn) g.eager = true;  // dropout: per-step seeds, never captured
    return;
  }
  cudaGraph_t graph = nullptr;
  bind();  // the scalars are on the device before the capture (the capture re-writes the same values)
  m_ctx.capture_scalars_read = m_ctx.capture_scalars_written = false;
  m_ctx.capture_refused = false;
  TL_CUDA_CHECK(cudaStreamBeginCapture(m_ctx.stream, cudaStreamCaptureModeRelaxed));
  m_ctx.capturing = true;
  try {
    step();
    flush_gathers();
  } catch (...) {
    m_gathers.clear();
    m_ctx.capturing = false;
    cudaStreamEndCapture(m_ctx.stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  m_ctx.capturing = false;
  TL_CUDA_CHECK(cudaStreamEndCapture(m_ctx.stream, &graph));
  if (m_ctx.capture_refused) {  // nothing ran while capturing: run this step, and later ones, eagerly
    m_ctx.capture_refused = false;
    if (graph) cudaGraphDestroy(graph);
    g.eager = true;
    step();
    flush_gathers();
    return;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) cudaGraphDestroy(graph);
  TL_CUDA_CHECK(e);
  g.graph = graph;
  g.exec = exec;
  if (!find_scalar_gather_node(graph, &g.scalar_node)) g.scalar_node = nullptr;
  TL_CUDA_CHECK(cudaGraphLaunch(g.exec, m_ctx.stream));
}

void CudaBackend::invalidate_captures() {
  bind();
  if (m_ctx.graphs.empty()) return;
  cudaStreamSynchronize(m_ctx.stream);
  for (auto& [k, g] : m_ctx.graphs) {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    if (g.graph) cudaGraphDestroy(g.graph);
  }
  m_ctx.graphs.clear();
}

}  // namespace trainlab::cuda
