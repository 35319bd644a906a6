#include "dist/staged_communicator.h"

#include <functional>
#include <vector>

#include "util/error.h"

namespace trainlab::dist {

namespace {

// Each region of a staging buffer starts on a 64-byte boundary (a cache line; pinned memory is
// page-aligned, so a region's start is as aligned as a fresh allocation's for MPI and the DMA).
constexpr size_t kStageAlign = 64;
size_t stage_align(size_t n) { return (n + kStageAlign - 1) / kStageAlign * kStageAlign; }

// A staging buffer, held by one collective from its start until its result is queued back to the
// device. The copy back may still read it then; the buffer is reused anyway, because every
// collective that writes staging memory from the host first copies its own send to the host and
// waits for that copy (to_host): the transfer stream runs its copies in order, so the earlier copy
// back has read the buffer by then.
struct StageSlot {
  Tensor bytes;  // I8 [capacity], from Backend::empty_host
  bool busy = false;
};

class StagedComm;

class StagedRequest final : public CommRequest {
 public:
  StagedRequest(StagedComm& comm, size_t slot, CommHandle host, Tensor staged, Tensor device)
      : m_comm(comm), m_slot(slot), m_host(std::move(host)), m_staged(std::move(staged)), m_device(std::move(device)) {}
  bool test() override;
  void wait() override;

 private:
  void finish();
  StagedComm& m_comm;
  size_t m_slot;
  CommHandle m_host;
  Tensor m_staged, m_device;  // the result on the host, and where it goes
  bool m_done = false;
};

class StagedComm final : public HostBackedCommunicator {
 public:
  StagedComm(Backend& be, std::unique_ptr<Communicator> host)
      : HostBackedCommunicator(std::move(host)), m_be(be), m_device(be.info().kind) {}
  std::string kind() const override { return "mpi-staged"; }
  DeviceKind device() const override { return m_device; }

  CommHandle all_reduce(Tensor& t) override {
    check_tensor(t, "all-reduce");
    const size_t s = acquire(t.bytes());
    Tensor h = view(s, 0, t.dtype(), t.numel());
    to_host(t, h);
    count_bytes(Collective::AllReduce, static_cast<int64_t>(t.bytes()));
    return started(s, [&] { return m_host->all_reduce(h); }, h, t);
  }

  // Staged as [in | out], each region aligned.
  CommHandle reduce_scatter(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(in, out, counts, Collective::ReduceScatter);
    const size_t at = stage_align(in.bytes());
    const size_t s = acquire(at + out.bytes());
    Tensor hin = view(s, 0, in.dtype(), in.numel()), hout = view(s, at, out.dtype(), out.numel());
    to_host(in, hin);
    count_bytes(Collective::ReduceScatter, static_cast<int64_t>(in.bytes()));
    return started(s, [&] { return m_host->reduce_scatter(hin, hout, counts); }, hout, out);
  }

  // This rank's part goes to its place in the staged whole, which the host gathers in place.
  CommHandle all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(out, in, counts, Collective::AllGather);
    int64_t mine = 0;
    for (int r = 0; r < m_rank; ++r) mine += counts[static_cast<size_t>(r)];
    const size_t s = acquire(out.bytes());
    Tensor whole = view(s, 0, out.dtype(), out.numel());
    Tensor part = element_range(whole, mine, mine + in.numel());
    if (in.numel() > 0)
      to_host(in, part);
    else
      to_host(out, whole);  // nothing of this rank's to send: the whole copied as to_host's fence
    count_bytes(Collective::AllGather, static_cast<int64_t>(out.bytes()));
    return started(s, [&] { return m_host->all_gather(part, whole, counts); }, whole, out);
  }

  // Only the root's tensor is sent; the others copy theirs too, as to_host's fence before MPI
  // writes the staging buffer.
  CommHandle broadcast(Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    const size_t s = acquire(t.bytes());
    Tensor h = view(s, 0, t.dtype(), t.numel());
    to_host(t, h);
    count_bytes(Collective::Broadcast, m_rank == root ? static_cast<int64_t>(t.bytes()) : 0);
    return started(s, [&] { return m_host->broadcast(h, root); }, h, t);
  }

  // The message leaves from staging; nothing comes back to the device.
  CommHandle send(const Tensor& t, int peer, int stream) override {
    check_tensor(t, "send");
    check_peer(peer, "a send");
    const size_t s = acquire(t.bytes());
    Tensor h = view(s, 0, t.dtype(), t.numel());
    to_host(t, h);
    count_bytes(Collective::Send, static_cast<int64_t>(t.bytes()));
    Tensor nothing = element_range(h, 0, 0);
    return started(s, [&] { return m_host->send(h, peer, stream); }, h, nothing);
  }

  // t is copied to staging first only as to_host's fence before MPI writes the buffer.
  CommHandle recv(Tensor& t, int peer, int stream) override {
    check_tensor(t, "receive");
    check_peer(peer, "a receive");
    const size_t s = acquire(t.bytes());
    Tensor h = view(s, 0, t.dtype(), t.numel());
    to_host(t, h);
    return started(s, [&] { return m_host->recv(h, peer, stream); }, h, t);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<StagedComm>(m_be, m_host->split(color, key));
  }

  // The result's way back: queued on the transfer stream, the device's later work waits for it.
  void from_host(size_t slot, const Tensor& staged, Tensor& device) {
    if (device.numel() > 0) {
      m_be.copy_from_host_async(staged, device);
      m_be.join_transfers();
    }
    m_slots[slot].busy = false;
  }

 private:
  // A buffer of at least `bytes` that no collective in flight holds: the smallest that fits, else
  // one of them grown, else a new one. A grown buffer's old memory is kept until the next
  // to_host (a queued copy back may still read it).
  size_t acquire(size_t bytes) {
    bytes = std::max(bytes, kStageAlign);
    size_t pick = m_slots.size();
    for (size_t i = 0; i < m_slots.size(); ++i) {
      if (m_slots[i].busy) continue;
      const size_t cap = m_slots[i].bytes.bytes(), best = pick < m_slots.size() ? m_slots[pick].bytes.bytes() : 0;
      const bool fits = cap >= bytes, best_fits = pick < m_slots.size() && best >= bytes;
      if (pick == m_slots.size() || (fits && (!best_fits || cap < best)) || (!best_fits && cap > best)) pick = i;
    }
    if (pick == m_slots.size()) m_slots.emplace_back();
    StageSlot& slot = m_slots[pick];
    if (!slot.bytes.defined() || slot.bytes.bytes() < bytes) {
      if (slot.bytes.defined()) m_retired.push_back(slot.bytes);
      slot.bytes = m_be.empty_host({static_cast<int64_t>(bytes)}, DType::I8, MemCategory::Communication);
    }
    slot.busy = true;
    return pick;
  }

  Tensor view(size_t slot, size_t byte_offset, DType dtype, int64_t n) const {
    const Tensor& b = m_slots[slot].bytes;
    return Tensor(b.storage(), {n}, dtype, b.byte_offset() + byte_offset);
  }

  // Blocks until src (after the compute stream's work so far) is in `staged`. Every copy queued
  // on the transfer stream before it has then completed: the host may write any buffer not in
  // flight, and the retired ones are read no more. A collective of nothing writes nothing.
  void to_host(const Tensor& src, Tensor& staged) {
    if (src.numel() == 0) return;
    m_be.wait_transfer(m_be.copy_to_host_async(src, staged));
    m_retired.clear();
  }

  CommHandle started(size_t slot, const std::function<CommHandle()>& start, const Tensor& staged, Tensor& device) {
    try {
      return std::make_unique<StagedRequest>(*this, slot, start(), staged, device);
    } catch (...) {
      m_slots[slot].busy = false;
      throw;
    }
  }

  Backend& m_be;
  DeviceKind m_device;
  std::vector<StageSlot> m_slots;
  std::vector<Tensor> m_retired;
};

bool StagedRequest::test() {
  if (!m_done && m_host->test()) finish();
  return m_done;
}

void StagedRequest::wait() {
  if (m_done) return;
  m_host->wait();  // the host communicator's watchdog and its timeout message
  finish();
}

void StagedRequest::finish() {
  m_comm.from_host(m_slot, m_staged, m_device);
  m_done = true;
}

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(Backend& be, std::unique_ptr<Communicator> host) {
  if (host->device() != DeviceKind::Cpu)
    throw Error("internal: the staged communicator needs a communicator of host tensors, not " + host->kind());
  return std::make_unique<StagedComm>(be, std::move(host));
}

}  // namespace trainlab::dist
