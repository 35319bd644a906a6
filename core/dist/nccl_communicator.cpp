#include "dist/nccl_communicator.h"

#include <chrono>
#include <thread>

#include "backend/collectives.h"
#include "util/error.h"

namespace trainlab::dist {

namespace {

using Clock = std::chrono::steady_clock;

class NcclComm;

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(NcclComm& comm, uint64_t seq, std::string what) : m_comm(comm), m_seq(seq), m_what(std::move(what)) {}
  bool test() override;
  void wait() override;

 private:
  NcclComm& m_comm;
  uint64_t m_seq;
  std::string m_what;
  bool m_done = false;
};

class NcclComm final : public HostBackedCommunicator {
 public:
  NcclComm(std::unique_ptr<DeviceCollectives> dc, std::unique_ptr<Communicator> host)
      : HostBackedCommunicator(std::move(host)), m_dc(std::move(dc)) {}
  std::string kind() const override { return "nccl"; }
  DeviceKind device() const override { return DeviceKind::Cuda; }
  DeviceCollectives& dc() { return *m_dc; }
  std::string timeout_of(const std::string& what) const { return timeout_message(what); }

  CommHandle all_reduce(Tensor& t) override {
    check_tensor(t, "all-reduce");
    return started(Collective::AllReduce, t.bytes(), m_dc->all_reduce_sum(t));
  }
  CommHandle reduce_scatter(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(in, out, counts, Collective::ReduceScatter);
    return started(Collective::ReduceScatter, in.bytes(), m_dc->reduce_scatter_sum(in, out, counts));
  }
  CommHandle all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(out, in, counts, Collective::AllGather);
    return started(Collective::AllGather, out.bytes(), m_dc->all_gather(in, out, counts));
  }
  CommHandle broadcast(Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    return started(Collective::Broadcast, m_rank == root ? t.bytes() : 0, m_dc->broadcast(t, root));
  }

  CommHandle send(const Tensor& t, int peer, int) override {  // no streams: posting order
    check_tensor(t, "send");
    check_peer(peer, "a send");
    return started(Collective::Send, t.bytes(), m_dc->send(t, peer));
  }

  CommHandle recv(Tensor& t, int peer, int) override {
    check_tensor(t, "receive");
    check_peer(peer, "a receive");
    return started(Collective::Recv, t.bytes(), m_dc->recv(t, peer));
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    auto host = m_host->split(color, key);
    return std::make_unique<NcclComm>(m_dc->split(color, key), std::move(host));
  }

 private:
  CommHandle started(Collective c, size_t bytes, uint64_t seq) {
    count_bytes(c, static_cast<int64_t>(bytes));
    return std::make_unique<NcclRequest>(*this, seq,
                                         std::string(collective_name(c)) + " of " + format_bytes(static_cast<int64_t>(bytes)));
  }

  std::unique_ptr<DeviceCollectives> m_dc;
};

bool NcclRequest::test() {
  if (!m_done) m_done = m_comm.dc().done(m_seq);
  return m_done;
}

void NcclRequest::wait() {
  const auto deadline = Clock::now() + std::chrono::duration<double>(m_comm.timeout_s());
  for (int polls = 0; !test(); ++polls) {
    if (polls < 200) continue;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (Clock::now() > deadline) {
      m_comm.dc().abort();
      throw Error(m_comm.timeout_of(m_what));
    }
  }
  m_comm.dc().join(m_seq);
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Backend& be, std::unique_ptr<Communicator> host) {
  if (!be.supports_collectives())
    throw Error("GPU ranks need NCCL, and " + be.info().name + " has no device collectives in this build " +
                "(build with the CUDA toolkit and NCCL: TRAINLAB_WITH_NCCL)");
  std::vector<uint8_t> id;
  if (host->rank() == 0) id = be.new_collectives_id();
  host->broadcast_host(id, 0);
  auto dc = be.create_collectives(id, host->rank(), host->size());
  return std::make_unique<NcclComm>(std::move(dc), std::move(host));
}

}  // namespace trainlab::dist
