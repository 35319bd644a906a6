// The MPI communicator (CPU ranks) and MPI's process-wide runtime. Compiled only with
// TRAINLAB_WITH_MPI; dist/world.cpp is the one place that asks.
//
// MPI is initialised on first use (MPI_Init_thread, serialized: the trainer's thread makes every
// call) and finalised when the process exits normally. Errors come back as return codes
// (MPI_ERRORS_RETURN on every communicator) and are thrown as Error. Waits poll MPI_Test, sleeping
// briefly between polls, until done or until the timeout (the watchdog of dist/communicator.h).
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace trainlab::dist {

// MPI_COMM_WORLD as a communicator of host tensors; initialises MPI when needed.
std::unique_ptr<Communicator> make_mpi_world(double timeout_s);
// Whether MPI has been initialised (and not finalised) in this process.
bool mpi_active();
// MPI_Abort(MPI_COMM_WORLD, code): every rank of the job ends now.
[[noreturn]] void mpi_abort(int code);

}  // namespace trainlab::dist
