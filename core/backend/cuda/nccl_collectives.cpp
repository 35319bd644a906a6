// NcclCollectives: backend/collectives.h on NCCL, and CudaBackend's entry points to it. Built into
// the CUDA module only when NCCL was found (TRAINLAB_NCCL; no_nccl.cpp otherwise).
//
// Streams: the collectives run on a stream of their own. Each call records an event on the
// backend's compute stream (after flushing its deferred launches), makes the collectives' stream
// wait for it, launches, and records a completion event; done() queries that event and join()
// makes the compute stream wait for it. Calls with equal counts are one NCCL ring collective
// (ncclReduceScatter, ncclAllGather); unequal counts are a group of ncclReduce / ncclBroadcast
// calls, one per rank that owns a part.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <deque>

#include "backend/collectives.h"
#include "backend/cuda/cuda_backend.h"
#include "util/error.h"

namespace trainlab::cuda {

namespace {

void nccl_check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string msg = std::string("NCCL ") + what + " failed: " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last && *last) msg += std::string(" (") + last + ")";
  throw Error(msg);
}

ncclDataType_t nccl_type(DType t, bool reduce) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    default:
      if (reduce) throw Error(std::string("a sum over GPUs of ") + dtype_name(t) + " tensors is not supported");
      return ncclUint8;
  }
}

// Elements of t as counted in nccl_type (bytes for the 1-byte and packed formats).
size_t nccl_count(DType t, int64_t n) {
  return nccl_type(t, false) == ncclUint8 ? dtype_bytes(t, static_cast<size_t>(n)) : static_cast<size_t>(n);
}

bool all_equal(std::span<const int64_t> c) {
  for (int64_t x : c)
    if (x != c.front()) return false;
  return true;
}

}  // namespace

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(CudaBackend& be, ncclComm_t comm) : m_be(be), m_comm(comm) {
    nccl_check(ncclCommUserRank(comm, &m_rank), "ncclCommUserRank", comm);
    nccl_check(ncclCommCount(comm, &m_size), "ncclCommCount", comm);
    TL_CUDA_CHECK(cudaSetDevice(be.m_ctx.device));
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  }
  ~NcclCollectives() override {
    cudaSetDevice(m_be.m_ctx.device);
    if (!m_aborted) {
      cudaStreamSynchronize(m_stream);
      ncclCommDestroy(m_comm);
    }
    for (auto& p : m_pending) cudaEventDestroy(p.second);
    for (auto e : m_free) cudaEventDestroy(e);
    cudaStreamDestroy(m_stream);
  }

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }

  uint64_t all_reduce_sum(Tensor& t) override {
    return enqueue("ncclAllReduce", [&] {
      nccl_check(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype(), true), ncclSum,
                               m_comm, m_stream),
                 "ncclAllReduce", m_comm);
    });
  }

  uint64_t reduce_scatter_sum(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    const ncclDataType_t type = nccl_type(in.dtype(), true);
    return enqueue("reduce-scatter", [&] {
      if (all_equal(counts)) {
        nccl_check(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(counts.front()), type, ncclSum, m_comm,
                                     m_stream),
                   "ncclReduceScatter", m_comm);
        return;
      }
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      int64_t at = 0;
      for (int r = 0; r < m_size; ++r) {
        const int64_t c = counts[static_cast<size_t>(r)];
        if (c > 0) {
          const char* src = static_cast<const char*>(in.raw()) + dtype_bytes(in.dtype(), static_cast<size_t>(at));
          nccl_check(ncclReduce(src, out.raw(), static_cast<size_t>(c), type, ncclSum, r, m_comm, m_stream), "ncclReduce",
                     m_comm);
        }
        at += c;
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd", m_comm);
    });
  }

  uint64_t all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    const ncclDataType_t type = nccl_type(out.dtype(), false);
    return enqueue("all-gather", [&] {
      if (all_equal(counts)) {
        nccl_check(ncclAllGather(in.raw(), out.raw(), nccl_count(out.dtype(), counts.front()), type, m_comm, m_stream),
                   "ncclAllGather", m_comm);
        return;
      }
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      int64_t at = 0;
      for (int r = 0; r < m_size; ++r) {
        const int64_t c = counts[static_cast<size_t>(r)];
        if (c > 0) {
          char* dst = static_cast<char*>(out.raw()) + dtype_bytes(out.dtype(), static_cast<size_t>(at));
          nccl_check(ncclBroadcast(r == m_rank ? in.raw() : dst, dst, nccl_count(out.dtype(), c), type, r, m_comm, m_stream),
                     "ncclBroadcast", m_comm);
        }
        at += c;
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd", m_comm);
    });
  }

  uint64_t broadcast(Tensor& t, int root) override {
    return enqueue("ncclBroadcast", [&] {
      nccl_check(ncclBroadcast(t.raw(), t.raw(), nccl_count(t.dtype(), t.numel()), nccl_type(t.dtype(), false), root,
                               m_comm, m_stream),
                 "ncclBroadcast", m_comm);
    });
  }

  uint64_t send(const Tensor& t, int peer) override {
    return enqueue("ncclSend", [&] {
      nccl_check(ncclSend(t.raw(), nccl_count(t.dtype(), t.numel()), nccl_type(t.dtype(), false), peer, m_comm, m_stream),
                 "ncclSend", m_comm);
    });
  }

  uint64_t recv(Tensor& t, int peer) override {
    return enqueue("ncclRecv", [&] {
      nccl_check(ncclRecv(t.raw(), nccl_count(t.dtype(), t.numel()), nccl_type(t.dtype(), false), peer, m_comm, m_stream),
                 "ncclRecv", m_comm);
    });
  }

  bool done(uint64_t seq) override {
    retire();
    return m_pending.empty() || m_pending.front().first > seq;
  }

  void join(uint64_t seq) override {
    for (auto& [s, e] : m_pending)
      if (s >= seq) {
        TL_CUDA_CHECK(cudaStreamWaitEvent(m_be.m_ctx.stream, e, 0));
        return;
      }
  }

  void abort() override {
    if (m_aborted) return;
    m_aborted = true;
    ncclCommAbort(m_comm);
  }

  std::unique_ptr<DeviceCollectives> split(int color, int key) override {
    check_alive();
    ncclComm_t sub = nullptr;
    nccl_check(ncclCommSplit(m_comm, color, key, &sub, nullptr), "ncclCommSplit", m_comm);
    if (!sub) throw Error("internal: ncclCommSplit gave no communicator for colour " + std::to_string(color));
    return std::make_unique<NcclCollectives>(m_be, sub);
  }

 private:
  void check_alive() const {
    if (m_aborted) throw Error("the NCCL group was aborted after a collective timed out");
  }

  template <class Launch>
  uint64_t enqueue(const char* what, Launch launch) {
    check_alive();
    m_be.bind();  // the device, and the compute stream's deferred launches go first
    cudaEvent_t ready = take_event();
    TL_CUDA_CHECK(cudaEventRecord(ready, m_be.m_ctx.stream));
    TL_CUDA_CHECK(cudaStreamWaitEvent(m_stream, ready, 0));
    m_free.push_back(ready);  // reusable once recorded again later: the wait above is already queued
    launch();
    cudaEvent_t finished = take_event();
    TL_CUDA_CHECK(cudaEventRecord(finished, m_stream));
    m_pending.emplace_back(++m_seq, finished);
    (void)what;
    return m_seq;
  }

  cudaEvent_t take_event() {
    if (!m_free.empty()) {
      cudaEvent_t e = m_free.back();
      m_free.pop_back();
      return e;
    }
    cudaEvent_t e;
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  // Completed collectives leave the queue (their events are reused).
  void retire() {
    while (!m_pending.empty()) {
      const cudaError_t q = cudaEventQuery(m_pending.front().second);
      if (q == cudaErrorNotReady) return;
      TL_CUDA_CHECK(q);
      m_free.push_back(m_pending.front().second);
      m_pending.pop_front();
    }
  }

  CudaBackend& m_be;
  ncclComm_t m_comm;
  cudaStream_t m_stream = nullptr;
  int m_rank = 0, m_size = 1;
  uint64_t m_seq = 0;
  bool m_aborted = false;
  std::deque<std::pair<uint64_t, cudaEvent_t>> m_pending;
  std::vector<cudaEvent_t> m_free;
};

bool CudaBackend::supports_collectives() const { return true; }

std::vector<uint8_t> CudaBackend::new_collectives_id() {
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<uint8_t> bytes(sizeof id.internal);
  std::memcpy(bytes.data(), id.internal, sizeof id.internal);
  return bytes;
}

std::unique_ptr<DeviceCollectives> CudaBackend::create_collectives(const std::vector<uint8_t>& id, int rank, int size) {
  ncclUniqueId uid;
  if (id.size() != sizeof uid.internal)
    throw Error("internal: an NCCL group id of " + std::to_string(id.size()) + " bytes, expected " +
                std::to_string(sizeof uid.internal));
  std::memcpy(uid.internal, id.data(), sizeof uid.internal);
  bind();
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, size, uid, rank), "ncclCommInitRank");
  return std::make_unique<NcclCollectives>(*this, comm);
}

}  // namespace trainlab::cuda
