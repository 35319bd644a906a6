// Communicator: the collectives of a group of ranks (processes, one device each), asynchronous
// with a handle to wait on, on the tensors of one kind of device:
//   SingleRank  one rank, no MPI, no NCCL: every collective is a local copy or nothing;
//   MPI         CPU ranks: non-blocking MPI (MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv,
//               MPI_Ibcast) on host tensors; progress happens inside test() and wait();
//   NCCL        GPU ranks: the backend's device collectives (backend/collectives.h), queued on a
//               stream of their own after the compute stream's work so far; the NCCL unique id
//               is broadcast over MPI;
//   MPI staged  GPU ranks that share a GPU (dist.transport mpi): device tensors copied to pinned
//               host buffers, reduced by the MPI communicator, copied back (dist/staged_communicator.h).
// make_world (dist/world.h) picks one. Sub-communicators by colour (split) are the groups that
// dist/process_groups.h makes.
//
// Numerics: all_reduce and reduce_scatter sum in the tensor's format (fp32 sums in fp32; MPI sums
// 16-bit formats pairwise in fp32, rounded to the format after each addition, as NCCL does). The
// result is the same on every rank. For a given world size and message the order of additions is
// fixed, so two runs give the same bits.
//
// Watchdog: every wait (and every host collective) gives up after the communicator's timeout
// (dist.timeout_s) with an Error naming the collective, this rank and the bytes, so that a rank
// that died or hangs never leaves the others waiting for ever; the caller then ends the job
// (abort_job). Bytes sent are counted with the ring algorithm's per-rank figure (what NCCL's
// tests call bus bytes): all-reduce 2(N-1)/N of the buffer, reduce-scatter and all-gather (N-1)/N
// of the whole, broadcast the buffer (root), a send its buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace trainlab::dist {

enum class Collective : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, Send, Recv };
const char* collective_name(Collective c);  // "all-reduce", ...

// One collective in flight. A handle destroyed before it completed is abandoned (its buffers must
// outlive the transfer): that happens only on the way out of a failed run, which ends the job.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // True once complete (also drives the transfer: MPI progresses only inside MPI calls).
  virtual bool test() = 0;
  // Returns once complete; throws Error after the communicator's timeout.
  virtual void wait() = 0;
};
using CommHandle = std::unique_ptr<CommRequest>;

enum class HostReduce : uint8_t { Sum, Max };

// An error every rank finds alike (the ranks' configs differ, the batch does not split over the
// ranks): rank 0 reports it, the others end quietly.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  Communicator(int rank, int size, double timeout_s) : m_rank(rank), m_size(size), m_timeout_s(timeout_s) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  double timeout_s() const { return m_timeout_s; }
  virtual std::string kind() const = 0;     // "single", "mpi", "nccl", "mpi-staged"
  virtual DeviceKind device() const = 0;   // where the tensors of the collectives live

  // --- tensor collectives (asynchronous) ---------------------------------------------------
  // t = the sum of every rank's t, in place.
  virtual CommHandle all_reduce(Tensor& t) = 0;
  // `in` holds sum(counts) elements, rank r's part at counts[0] + ... + counts[r-1]; out (counts[rank()]
  // elements, not overlapping in) = the sum over ranks of their in's part for this rank. counts may
  // hold zeros (a rank with nothing of this range).
  virtual CommHandle reduce_scatter(const Tensor& in, Tensor& out, std::span<const int64_t> counts) = 0;
  // out (sum(counts) elements) = every rank's in (counts[r] elements), in rank order. `in` may be
  // exactly this rank's part of out (in place).
  virtual CommHandle all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) = 0;
  // t = root's t.
  virtual CommHandle broadcast(Tensor& t, int root) = 0;

  // --- point to point (pipeline stages, asynchronous) ----------------------------------------
  // t to rank `peer` of this group; t from it (the same element count and format). Messages
  // between two ranks are matched per `stream` (0 to kMaxStream: the MPI tag) in the order each
  // side posts them; NCCL has no streams (its messages between two ranks match in posting order
  // alone). A send counts t's bytes.
  static constexpr int kMaxStream = 32767;
  virtual CommHandle send(const Tensor& t, int peer, int stream) = 0;
  virtual CommHandle recv(Tensor& t, int peer, int stream) = 0;
  CommHandle send(const Tensor& t, int peer) { return send(t, peer, 0); }
  CommHandle recv(Tensor& t, int peer) { return recv(t, peer, 0); }

  // --- host values (blocking, with the timeout) ---------------------------------------------
  virtual void barrier() = 0;
  virtual void all_reduce_host(std::span<double> v, HostReduce op) = 0;
  // Every rank's value, in rank order.
  virtual std::vector<uint64_t> all_gather_host(uint64_t v) = 0;
  // Every rank's values (the same count on each), rank after rank.
  virtual std::vector<double> all_gather_host(std::span<const double> v) = 0;
  // bytes = root's bytes (any length: the length goes first).
  virtual void broadcast_host(std::vector<uint8_t>& bytes, int root) = 0;

  // The ranks that pass the same colour, ordered by key then by rank (MPI_Comm_split,
  // ncclCommSplit). Collective: every rank calls it.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Bytes this rank sent (ring model, see above) since construction or reset_counters().
  int64_t bytes_sent() const { return m_bytes_sent; }
  void reset_counters() { m_bytes_sent = 0; }

 protected:
  // Checks shared by the implementations. A reduce-scatter's or all-gather's `whole` holds
  // sum(counts) elements and `part` counts[rank()], one format on this communicator's device.
  void check_parts(const Tensor& whole, const Tensor& part, std::span<const int64_t> counts, Collective c) const;
  void check_tensor(const Tensor& t, const char* what) const;
  // Throws Error unless `peer` is another rank of this group.
  void check_peer(int peer, const char* what) const;
  // Throws Error unless 0 <= stream <= kMaxStream.
  void check_stream(int stream) const;
  void count_bytes(Collective c, int64_t bytes);
  // "rank 1 of 2: all-reduce of 1.5 MiB did not complete within 300 s ..." for a timeout.
  std::string timeout_message(const std::string& what) const;

  int m_rank, m_size;
  double m_timeout_s;
  int64_t m_bytes_sent = 0;
};

// A communicator of device tensors whose host values (and the group's bootstrap) travel over a
// host communicator (MPI) of the same ranks: NCCL's and the staged one share these.
class HostBackedCommunicator : public Communicator {
 public:
  explicit HostBackedCommunicator(std::unique_ptr<Communicator> host)
      : Communicator(host->rank(), host->size(), host->timeout_s()), m_host(std::move(host)) {}
  void barrier() override { m_host->barrier(); }
  void all_reduce_host(std::span<double> v, HostReduce op) override { m_host->all_reduce_host(v, op); }
  std::vector<uint64_t> all_gather_host(uint64_t v) override { return m_host->all_gather_host(v); }
  std::vector<double> all_gather_host(std::span<const double> v) override { return m_host->all_gather_host(v); }
  void broadcast_host(std::vector<uint8_t>& bytes, int root) override { m_host->broadcast_host(bytes, root); }

 protected:
  std::unique_ptr<Communicator> m_host;
};

// A handle that is complete from the start (single rank, empty collectives).
CommHandle completed_request();

// The one-rank communicator on `be`'s tensors (copies go through it): no MPI, no NCCL.
std::unique_ptr<Communicator> make_single_rank(Backend& be, double timeout_s = 300.0);

// Elements [begin, end) of t (any shape, taken row-major) as a 1-D view of the same storage.
Tensor element_range(const Tensor& t, int64_t begin, int64_t end);

// "1.5 MiB", "340 KiB", "12 B" (timeout messages, logs).
std::string format_bytes(int64_t bytes);

}  // namespace trainlab::dist
