#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "util/error.h"

namespace trainlab::dist {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_mpi(int code, const std::string& what) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  throw Error("MPI " + what + " failed: " + std::string(buf, static_cast<size_t>(len)));
}

void check(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw_mpi(code, what);
}

// 16-bit sums: each pair of elements added in fp32 and rounded back (RNE), as NCCL does.
template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Store(Load(a[i]) + Load(b[i]));
}

struct Runtime {
  MPI_Op bf16_sum = MPI_OP_NULL, f16_sum = MPI_OP_NULL;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

void finalize_at_exit() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return;
  Runtime& r = runtime();
  if (r.bf16_sum != MPI_OP_NULL) MPI_Op_free(&r.bf16_sum);
  if (r.f16_sum != MPI_OP_NULL) MPI_Op_free(&r.f16_sum);
  MPI_Finalize();
}

void ensure_initialized() {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Runtime& r = runtime();
  check(MPI_Op_create(&sum16<bf16_to_f32, f32_to_bf16>, 1, &r.bf16_sum), "MPI_Op_create");
  check(MPI_Op_create(&sum16<f16_to_f32, f32_to_f16>, 1, &r.f16_sum), "MPI_Op_create");
  std::atexit(finalize_at_exit);
}

// The MPI element type of a tensor format; 1-byte formats (and packed int4) travel as bytes.
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F16:
    case DType::BF16: return MPI_UINT16_T;
    case DType::I32: return MPI_INT32_T;
    default: return MPI_BYTE;
  }
}

// Elements of t as counted in mpi_type(t).
int64_t mpi_elems(DType t, int64_t n) { return mpi_type(t) == MPI_BYTE ? static_cast<int64_t>(dtype_bytes(t, n)) : n; }

MPI_Op sum_op(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return MPI_SUM;
    case DType::BF16: return runtime().bf16_sum;
    case DType::F16: return runtime().f16_sum;
    default: throw Error(std::string("a sum over ranks of ") + dtype_name(t) + " tensors is not supported");
  }
}

int as_int(int64_t n, const char* what) {
  if (n > INT_MAX) throw Error(std::string(what) + " of more than 2^31 elements in one call (make dist.bucket_mb smaller)");
  return static_cast<int>(n);
}

class MpiComm;

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(const MpiComm& comm, std::string what) : m_comm(comm), m_what(std::move(what)) {}
  bool test() override;
  void wait() override;
  MPI_Request req = MPI_REQUEST_NULL;
  std::vector<int> counts, displs;  // kept alive until the collective completes

 private:
  const MpiComm& m_comm;
  std::string m_what;
  bool m_done = false;
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm comm, bool owned, double timeout_s)
      : Communicator(rank_of(comm), size_of(comm), timeout_s), m_comm(comm), m_owned(owned) {}
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (m_owned && !fin) MPI_Comm_free(&m_comm);
  }
  std::string kind() const override { return "mpi"; }
  DeviceKind device() const override { return DeviceKind::Cpu; }
  std::string timeout_of(const std::string& what) const { return timeout_message(what); }

  CommHandle all_reduce(Tensor& t) override {
    check_tensor(t, "all-reduce");
    auto r = start(Collective::AllReduce, t.bytes());
    check(MPI_Iallreduce(MPI_IN_PLACE, t.raw(), as_int(t.numel(), "all-reduce"), mpi_type(t.dtype()), sum_op(t.dtype()),
                         m_comm, &r->req),
          "MPI_Iallreduce");
    return r;
  }

  CommHandle reduce_scatter(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(in, out, counts, Collective::ReduceScatter);
    auto r = start(Collective::ReduceScatter, in.bytes());
    for (int64_t c : counts) r->counts.push_back(as_int(c, "reduce-scatter"));
    check(MPI_Ireduce_scatter(in.raw(), out.raw(), r->counts.data(), mpi_type(in.dtype()), sum_op(in.dtype()), m_comm,
                              &r->req),
          "MPI_Ireduce_scatter");
    return r;
  }

  CommHandle all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(out, in, counts, Collective::AllGather);
    auto r = start(Collective::AllGather, out.bytes());
    int64_t at = 0, mine = 0;
    for (int i = 0; i < m_size; ++i) {
      const int64_t c = counts[static_cast<size_t>(i)];
      if (i == m_rank) mine = at;
      r->counts.push_back(as_int(mpi_elems(out.dtype(), c), "all-gather"));
      r->displs.push_back(as_int(mpi_elems(out.dtype(), at), "all-gather"));
      at += c;
    }
    const char* own = static_cast<const char*>(out.raw()) + dtype_bytes(out.dtype(), static_cast<size_t>(mine));
    const void* send = in.raw() == own ? MPI_IN_PLACE : in.raw();
    const MPI_Datatype type = mpi_type(out.dtype());
    check(MPI_Iallgatherv(send, r->counts[static_cast<size_t>(m_rank)], type, out.raw(), r->counts.data(),
                          r->displs.data(), type, m_comm, &r->req),
          "MPI_Iallgatherv");
    return r;
  }

  CommHandle broadcast(Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    auto r = start(Collective::Broadcast, m_rank == root ? t.bytes() : 0);
    check(MPI_Ibcast(t.raw(), as_int(mpi_elems(t.dtype(), t.numel()), "broadcast"), mpi_type(t.dtype()), root, m_comm,
                     &r->req),
          "MPI_Ibcast");
    return r;
  }

  // The stream is the tag: MPI keeps each pair's messages of a tag in the order they were posted.
  CommHandle send(const Tensor& t, int peer, int stream) override {
    check_tensor(t, "send");
    check_peer(peer, "a send");
    check_stream(stream);
    auto r = start(Collective::Send, t.bytes());
    check(MPI_Isend(t.raw(), as_int(mpi_elems(t.dtype(), t.numel()), "send"), mpi_type(t.dtype()), peer, stream, m_comm,
                    &r->req),
          "MPI_Isend");
    return r;
  }

  CommHandle recv(Tensor& t, int peer, int stream) override {
    check_tensor(t, "receive");
    check_peer(peer, "a receive");
    check_stream(stream);
    auto r = start(Collective::Recv, t.bytes());
    check(MPI_Irecv(t.raw(), as_int(mpi_elems(t.dtype(), t.numel()), "receive"), mpi_type(t.dtype()), peer, stream, m_comm,
                    &r->req),
          "MPI_Irecv");
    return r;
  }

  void barrier() override {
    auto r = std::make_unique<MpiRequest>(*this, "barrier");
    check(MPI_Ibarrier(m_comm, &r->req), "MPI_Ibarrier");
    r->wait();
  }

  void all_reduce_host(std::span<double> v, HostReduce op) override {
    auto r = std::make_unique<MpiRequest>(*this, "all-reduce of " + std::to_string(v.size()) + " host values");
    check(MPI_Iallreduce(MPI_IN_PLACE, v.data(), as_int(static_cast<int64_t>(v.size()), "all-reduce"), MPI_DOUBLE,
                         op == HostReduce::Sum ? MPI_SUM : MPI_MAX, m_comm, &r->req),
          "MPI_Iallreduce");
    r->wait();
  }

  std::vector<uint64_t> all_gather_host(uint64_t v) override {
    std::vector<uint64_t> all(static_cast<size_t>(m_size));
    auto r = std::make_unique<MpiRequest>(*this, "all-gather of host values");
    check(MPI_Iallgather(&v, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, m_comm, &r->req), "MPI_Iallgather");
    r->wait();
    return all;
  }

  std::vector<double> all_gather_host(std::span<const double> v) override {
    std::vector<double> all(v.size() * static_cast<size_t>(m_size));
    auto r = std::make_unique<MpiRequest>(*this, "all-gather of host values");
    const int n = as_int(static_cast<int64_t>(v.size()), "all-gather");
    check(MPI_Iallgather(v.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, m_comm, &r->req), "MPI_Iallgather");
    r->wait();
    return all;
  }

  void broadcast_host(std::vector<uint8_t>& bytes, int root) override {
    uint64_t n = bytes.size();
    {
      auto r = std::make_unique<MpiRequest>(*this, "broadcast of a length");
      check(MPI_Ibcast(&n, 1, MPI_UINT64_T, root, m_comm, &r->req), "MPI_Ibcast");
      r->wait();
    }
    bytes.resize(n);
    auto r = std::make_unique<MpiRequest>(*this, "broadcast of " + format_bytes(static_cast<int64_t>(n)));
    check(MPI_Ibcast(bytes.data(), as_int(static_cast<int64_t>(n), "broadcast"), MPI_BYTE, root, m_comm, &r->req),
          "MPI_Ibcast");
    r->wait();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(m_comm, color, key, &sub), "MPI_Comm_split");
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    return std::make_unique<MpiComm>(sub, true, m_timeout_s);
  }

 private:
  static int rank_of(MPI_Comm c) {
    int r = 0;
    check(MPI_Comm_rank(c, &r), "MPI_Comm_rank");
    return r;
  }
  static int size_of(MPI_Comm c) {
    int n = 0;
    check(MPI_Comm_size(c, &n), "MPI_Comm_size");
    return n;
  }
  std::unique_ptr<MpiRequest> start(Collective c, size_t bytes) {
    count_bytes(c, static_cast<int64_t>(bytes));
    return std::make_unique<MpiRequest>(*this, std::string(collective_name(c)) + " of " +
                                                   format_bytes(static_cast<int64_t>(bytes)));
  }

  MPI_Comm m_comm;
  bool m_owned;
};

bool MpiRequest::test() {
  if (m_done) return true;
  int flag = 0;
  check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test (" + m_what + ")");
  m_done = flag != 0;
  return m_done;
}

void MpiRequest::wait() {
  if (m_done) return;
  const auto deadline = Clock::now() + std::chrono::duration<double>(m_comm.timeout_s());
  // Poll: a blocking MPI_Wait could not give up. Short sleeps after the first polls leave the
  // core to the other ranks when there are more ranks than cores.
  for (int polls = 0;; ++polls) {
    if (test()) return;
    if (polls >= 200) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (Clock::now() > deadline) throw Error(m_comm.timeout_of(m_what));
    }
  }
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_world(double timeout_s) {
  ensure_initialized();
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, timeout_s);
}

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
}

}  // namespace trainlab::dist
