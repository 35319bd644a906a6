// DeviceCollectives: collectives among the devices of several processes, as a backend offers them
// (NCCL in the CUDA module, core/backend/cuda/nccl_collectives.cpp). core/dist wraps them in a
// Communicator (dist/nccl_communicator.h); the rest of the lab never sees this interface.
//
// Ordering: each call queues the collective on the collectives' own stream, after everything
// queued so far on the backend's compute stream (an event), so a bucket of gradients is reduced
// while the backward pass goes on queueing work. done(seq) asks without blocking; join(seq) makes
// the compute stream wait for it (no host wait). Element counts per rank may differ (grouped
// point-to-root calls) or be equal (one ring collective).
//
// Numerics: sums in the tensors' format (NCCL: fp32, bf16 and fp16 summed in fp32 and rounded).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainlab {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sequence numbers start at 1; every collective of one object completes in order.
  virtual uint64_t all_reduce_sum(Tensor& t) = 0;
  // in: sum(counts) elements; out: counts[rank()] elements = the sum of the ranks' parts for this rank.
  virtual uint64_t reduce_scatter_sum(const Tensor& in, Tensor& out, std::span<const int64_t> counts) = 0;
  // out: sum(counts) elements, rank r's in (counts[r] elements) at its place; in may be that place.
  virtual uint64_t all_gather(const Tensor& in, Tensor& out, std::span<const int64_t> counts) = 0;
  virtual uint64_t broadcast(Tensor& t, int root) = 0;
  // Point to point with rank `peer` (ncclSend / ncclRecv), ordered with the collectives.
  virtual uint64_t send(const Tensor& t, int peer) = 0;
  virtual uint64_t recv(Tensor& t, int peer) = 0;
  // Whether collective `seq` (and every one before it) has completed on the device.
  virtual bool done(uint64_t seq) = 0;
  // Later work on the backend's compute stream runs after collective `seq`.
  virtual void join(uint64_t seq) = 0;
  // Ends the group now (after a timeout: a collective that never completes); later calls throw.
  virtual void abort() = 0;
  // The ranks of the same colour, ordered by key (ncclCommSplit). Collective.
  virtual std::unique_ptr<DeviceCollectives> split(int color, int key) = 0;
};

}  // namespace trainlab
