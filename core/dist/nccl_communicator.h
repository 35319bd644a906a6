// The NCCL communicator (GPU ranks): the backend's device collectives (backend/collectives.h;
// NCCL lives in the CUDA module) on device tensors, and a host communicator (MPI, or one rank)
// for the host values and for the bootstrap: rank 0 makes the NCCL unique id and broadcasts it
// over the host communicator, then every rank joins (ncclCommInitRank). A wait polls the
// collective's completion event until the timeout, then aborts the NCCL group (ncclCommAbort) and
// throws, so that a hung peer ends in an Error instead of a hang.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "dist/communicator.h"

namespace trainlab::dist {

// Collective over `host`'s ranks (each with its own device). Throws Error when `be` has no device
// collectives (a CPU backend, or a CUDA build without NCCL).
std::unique_ptr<Communicator> make_nccl_communicator(Backend& be, std::unique_ptr<Communicator> host);

}  // namespace trainlab::dist
