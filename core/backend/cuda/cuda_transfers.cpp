// Pinned host memory and host <-> device transfers on a stream of their own (optimizer offload,
// optim/offload.h). The transfer stream waits for the compute stream's work queued before each
// device-to-host copy (an event), and the compute stream waits for the transfer stream at
// join_transfers (an event), so neither the host nor the compute stream blocks on a copy that it
// does not need: a part's copy overlaps the host's work on another part.
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_checks.h"

namespace trainlab::cuda {

namespace {
void check_transfer(const Tensor& src, const Tensor& dst, DeviceKind want_dst) {
  if (src.bytes() != dst.bytes() || src.dtype() != dst.dtype())
    throw Error("internal: a host transfer needs tensors of one format and size (" + shape_str(src.shape()) + " " +
                dtype_name(src.dtype()) + " -> " + shape_str(dst.shape()) + " " + dtype_name(dst.dtype()) + ")");
  if (dst.device() != want_dst || src.device() == want_dst)
    throw Error(std::string("internal: a host transfer's ") +
                (want_dst == DeviceKind::Cpu ? "destination must be host memory" : "source must be host memory"));
}
}  // namespace

Tensor CudaBackend::empty_host(const Shape& shape, DType dtype, MemCategory category) {
  cudaSetDevice(m_ctx.device);
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  void* p = nullptr;
  if (bytes > 0) TL_CUDA_CHECK(cudaMallocHost(&p, bytes));
  auto storage = std::make_shared<Storage>(p, bytes, category, DeviceKind::Cpu, &m_ledger, [](void* q, size_t) {
    if (q) cudaFreeHost(q);
  });
  return Tensor(std::move(storage), shape, dtype);
}

cudaEvent_t CudaBackend::next_xfer_event() {
  while (static_cast<int>(m_ctx.xfer_events.size()) <= m_ctx.xfer_used) {
    cudaEvent_t e;
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m_ctx.xfer_events.push_back(e);
  }
  return m_ctx.xfer_events[static_cast<size_t>(m_ctx.xfer_used++)];
}

void CudaBackend::xfer_wait_for_compute() {
  if (!m_ctx.xfer) TL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_ctx.xfer, cudaStreamNonBlocking));
  cudaEvent_t ready = next_xfer_event();
  TL_CUDA_CHECK(cudaEventRecord(ready, m_ctx.stream));
  TL_CUDA_CHECK(cudaStreamWaitEvent(m_ctx.xfer, ready, 0));
}

int CudaBackend::copy_to_host_async(const Tensor& src, Tensor& dst) {
  check_transfer(src, dst, DeviceKind::Cpu);
  bind();  // pending gathers and scalars go first: the copy follows every queued kernel
  xfer_wait_for_compute();
  TL_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToHost, m_ctx.xfer));
  const int ticket = m_ctx.xfer_used;
  TL_CUDA_CHECK(cudaEventRecord(next_xfer_event(), m_ctx.xfer));
  return ticket;
}

void CudaBackend::wait_transfer(int ticket) {
  if (ticket < 0 || ticket >= m_ctx.xfer_used) throw Error("internal: unknown transfer ticket");
  TL_CUDA_CHECK(cudaEventSynchronize(m_ctx.xfer_events[static_cast<size_t>(ticket)]));
}

void CudaBackend::copy_from_host_async(const Tensor& src, Tensor& dst) {
  check_transfer(src, dst, DeviceKind::Cuda);
  bind();
  // The device's earlier work may still read dst (the last forward's weights): wait for it.
  xfer_wait_for_compute();
  TL_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyHostToDevice, m_ctx.xfer));
}

void CudaBackend::join_transfers() {
  if (!m_ctx.xfer) return;
  cudaSetDevice(m_ctx.device);
  if (m_ctx.xfer_events.empty()) {
    cudaEvent_t e;
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m_ctx.xfer_events.push_back(e);
  }
  // Every event before this one has been waited on by a stream already; reusing them after the
  // compute stream's wait below is safe (a later record replaces a completed or waited-on record).
  cudaEvent_t done = m_ctx.xfer_events[0];
  TL_CUDA_CHECK(cudaEventRecord(done, m_ctx.xfer));
  TL_CUDA_CHECK(cudaStreamWaitEvent(m_ctx.stream, done, 0));
  m_ctx.xfer_used = 0;
}

}  // namespace trainlab::cuda
