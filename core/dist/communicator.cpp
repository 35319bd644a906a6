#include "dist/communicator.h"

#include <cstdio>
#include <numeric>

#include "util/error.h"

namespace trainlab::dist {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all-reduce";
    case Collective::ReduceScatter: return "reduce-scatter";
    case Collective::AllGather: return "all-gather";
    case Collective::Broadcast: return "broadcast";
    case Collective::Barrier: return "barrier";
    case Collective::Send: return "send";
    case Collective::Recv: return "receive";
  }
  return "?";
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  if (bytes >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

Tensor element_range(const Tensor& t, int64_t begin, int64_t end) {
  if (begin < 0 || end > t.numel() || begin > end)
    throw Error("internal: element range [" + std::to_string(begin) + ", " + std::to_string(end) + ") of a tensor of " +
                std::to_string(t.numel()) + " elements");
  const size_t base = static_cast<size_t>(static_cast<const char*>(t.raw()) - static_cast<const char*>(t.storage()->data()));
  return Tensor(t.storage(), {end - begin}, t.dtype(), base + dtype_bytes(t.dtype(), static_cast<size_t>(begin)));
}

void Communicator::check_parts(const Tensor& whole, const Tensor& part, std::span<const int64_t> counts,
                               Collective c) const {
  const char* what = collective_name(c);
  if (static_cast<int>(counts.size()) != m_size)
    throw Error(std::string("internal: ") + what + " with " + std::to_string(counts.size()) + " counts for " +
                std::to_string(m_size) + " ranks");
  int64_t total = 0;
  for (int64_t n : counts) {
    if (n < 0) throw Error(std::string("internal: ") + what + " with a negative count");
    total += n;
  }
  check_tensor(whole, what);
  check_tensor(part, what);
  if (whole.numel() != total || part.numel() != counts[static_cast<size_t>(m_rank)] || whole.dtype() != part.dtype())
    throw Error(std::string("internal: ") + what + " sizes or formats disagree");
}

void Communicator::check_tensor(const Tensor& t, const char* what) const {
  if (!t.defined()) throw Error(std::string("internal: ") + what + " of an undefined tensor");
  if (t.device() != device())
    throw Error(std::string(what) + " of a " + (t.device() == DeviceKind::Cuda ? "GPU" : "host") + " tensor on the " +
                kind() + " communicator, which takes " + (device() == DeviceKind::Cuda ? "GPU" : "host") + " tensors");
}

void Communicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= m_size || peer == m_rank)
    throw Error(std::string(what) + " with rank " + std::to_string(peer) + " from rank " + std::to_string(m_rank) +
                " of a group of " + std::to_string(m_size) + ": expected another rank of the group");
}

void Communicator::check_stream(int stream) const {
  if (stream < 0 || stream > kMaxStream)
    throw Error("point-to-point stream " + std::to_string(stream) + ": expected 0 to " + std::to_string(kMaxStream));
}

void Communicator::count_bytes(Collective c, int64_t bytes) {
  if (m_size <= 1) return;
  const double n = m_size;
  switch (c) {
    case Collective::AllReduce: m_bytes_sent += static_cast<int64_t>(2.0 * (n - 1) / n * static_cast<double>(bytes)); break;
    case Collective::ReduceScatter:
    case Collective::AllGather: m_bytes_sent += static_cast<int64_t>((n - 1) / n * static_cast<double>(bytes)); break;
    case Collective::Broadcast:
    case Collective::Send: m_bytes_sent += bytes; break;
    case Collective::Barrier:
    case Collective::Recv: break;
  }
}

std::string Communicator::timeout_message(const std::string& what) const {
  char t[32];
  std::snprintf(t, sizeof t, "%g", m_timeout_s);
  return "rank " + std::to_string(m_rank) + " of " + std::to_string(m_size) + ": " + what + " did not complete within " +
         t + " s (dist.timeout_s): another rank stopped, crashed or hangs";
}

namespace {

class Completed final : public CommRequest {
 public:
  bool test() override { return true; }
  void wait() override {}
};

// One rank: a reduction over one rank is the identity; gathers and scatters are copies.
class SingleRank final : public Communicator {
 public:
  SingleRank(Backend& be, double timeout_s) : Communicator(0, 1, timeout_s), m_be(be) {}
  std::string kind() const override { return "single"; }
  DeviceKind device() const override { return m_be.info().kind; }

  CommHandle all_reduce(Tensor& t) override {
    check_tensor(t, "all-reduce");
    return completed_request();
  }
  CommHandle reduce_scatter(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(in, out, counts, Collective::ReduceScatter);
    if (in.numel() > 0) m_be.copy(in, out);
    return completed_request();
  }
  CommHandle all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) override {
    check_parts(out, in, counts, Collective::AllGather);
    if (out.numel() > 0 && in.raw() != out.raw()) m_be.copy(in, out);
    return completed_request();
  }
  CommHandle broadcast(Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    if (root != 0) throw Error("internal: broadcast from rank " + std::to_string(root) + " of 1");
    return completed_request();
  }
  CommHandle send(const Tensor& t, int peer, int) override {
    check_peer(peer, "a send");  // one rank has no other
    return completed_request();
  }
  CommHandle recv(Tensor& t, int peer, int) override {
    check_peer(peer, "a receive");
    return completed_request();
  }
  void barrier() override {}
  void all_reduce_host(std::span<double>, HostReduce) override {}
  std::vector<uint64_t> all_gather_host(uint64_t v) override { return {v}; }
  std::vector<double> all_gather_host(std::span<const double> v) override { return {v.begin(), v.end()}; }
  void broadcast_host(std::vector<uint8_t>&, int) override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SingleRank>(m_be, m_timeout_s); }

 private:
  Backend& m_be;
};

}  // namespace

CommHandle completed_request() { return std::make_unique<Completed>(); }

std::unique_ptr<Communicator> make_single_rank(Backend& be, double timeout_s) {
  return std::make_unique<SingleRank>(be, timeout_s);
}

}  // namespace trainlab::dist
