// The staged communicator (dist.transport mpi on GPU ranks): the collectives of a host
// communicator (MPI) on the backend's device tensors, moved through host memory. NCCL refuses two
// ranks on one GPU; staging lets several ranks share one (the one-GPU test machine runs every
// parallel form with several ranks this way). A correctness setup, not a fast one: each collective
// copies its data to the host and back, and the device waits for the host's MPI.
//
// Each tensor collective
//   1. copies the device tensor it sends (all-gather: this rank's part, into its place of the
//      whole) into a host staging buffer (Backend::copy_to_host_async, after the compute stream's
//      work so far) and waits for the copy;
//   2. runs the host communicator's collective on the staging buffer (non-blocking; MPI
//      progresses inside test() and wait());
//   3. on completion copies the result back (copy_from_host_async) and makes the device's later
//      work wait for it (join_transfers).
// The semantics, numerics (16-bit sums pairwise in fp32 as the MPI communicator does), byte counts
// (counted once, by this communicator, with the ring model) and timeout messages are the host
// communicator's. Staging buffers are pinned where the backend offers it (Backend::empty_host),
// counted as Communication memory, kept between calls and grown as needed: one per collective in
// flight (data parallelism has several buckets in flight at once). With the CPU backend staging is
// a host-to-host copy, which is how CPU ranks test this path.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "dist/communicator.h"

namespace trainlab::dist {

// Collectives over `host`'s ranks (a communicator of host tensors) on `be`'s tensors. kind()
// "mpi-staged", device() `be`'s. Host values and barriers go to `host` as they are.
std::unique_ptr<Communicator> make_staged_communicator(Backend& be, std::unique_ptr<Communicator> host);

}  // namespace trainlab::dist
