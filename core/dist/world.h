// The world of a run: every rank the launcher started (dist/launch.h), as one communicator on
// the run's device, and what a run checks across ranks before its first step. world.cpp is the
// one place that asks whether this build has MPI (TRAINLAB_WITH_MPI).
//
//   one rank               the single-rank communicator (no MPI, no NCCL)
//   several ranks, CPU     MPI on host tensors (dist.transport auto or mpi; nccl is an Error)
//   several ranks, CUDA    dist.transport (docs/DISTRIBUTED.md, "Transports"):
//     nccl                 NCCL on device tensors, its unique id broadcast over MPI; one GPU a
//                          rank (NCCL refuses two ranks on one GPU: more local ranks than GPUs is
//                          an Error)
//     mpi                  MPI on device tensors staged through host memory (dist/staged_communicator.h);
//                          local ranks may share GPUs (rank -> cuda:<local rank mod GPUs>)
//     auto                 nccl when every rank of this machine has a GPU of its own (local ranks
//                          <= visible GPUs), else mpi, with a notice saying so
// choose_transport and the four-argument rank_device are the decision alone (no GPU, no MPI), so
// that it is tested for every combination; make_world and rank_device ask the machine's GPU count.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "dist/launch.h"

namespace trainlab::dist {

bool built_with_mpi();

// How a rank's tensors travel; the name is the communicator's kind().
enum class Transport : uint8_t { Single, Mpi, Nccl, MpiStaged };
const char* transport_name(Transport t);  // "single", "mpi", "nccl", "mpi-staged"

struct TransportChoice {
  Transport transport = Transport::Single;
  std::string notice;  // non-empty when auto chose staging: why (one line for the user)
};

// make_world's decision for a rank whose backend is on `device`, given dist.transport (`transport`:
// "auto", "nccl" or "mpi"), the launcher's place and the GPUs this machine shows (`gpu_count`; not
// read for the CPU). Throws Error for another transport name, nccl on the CPU, and nccl with more
// local ranks than GPUs (naming dist.transport=mpi as the fix).
TransportChoice choose_transport(DeviceKind device, const std::string& transport, const LaunchInfo& place,
                                 int gpu_count);

// The device this rank uses for the configured `device` name. With several ranks on one machine
// and `gpu_count` > 0, "cuda" and "auto" become "cuda:<local rank mod gpu_count>": each rank its
// own GPU while there are enough (local rank = GPU), else GPUs shared, which only transport mpi or
// auto (staged) allows; nccl with fewer GPUs than local ranks is choose_transport's Error. A named
// "cuda:N" for several local ranks is an Error (they would share one GPU) unless transport is mpi
// (every local rank on cuda:N). Without GPUs "cuda" becomes "cuda:<local rank>" (the backend then
// says there is none) and "auto" stays "auto" (the backend's CPU fallback).
std::string rank_device(const std::string& device, const LaunchInfo& place, const std::string& transport,
                        int gpu_count);
// The same with this machine's GPU count (asked only for "cuda" and "auto" on several ranks).
std::string rank_device(const std::string& device, const LaunchInfo& place, const std::string& transport);

// The communicator of every rank for `be`'s tensors over `transport` (choose_transport; `notice`,
// when given, receives its notice). Throws Error when this build cannot serve it (no MPI for
// several ranks; no NCCL for nccl) or when MPI disagrees with the launcher's environment about
// this rank's place.
std::unique_ptr<Communicator> make_world(const LaunchInfo& place, Backend& be, double timeout_s,
                                         const std::string& transport, std::string* notice = nullptr);

// Throws CollectiveError on every rank unless every rank's `config_text` is the same (a hash of
// it is gathered), naming the ranks whose config differs from rank 0's.
void check_same_config(Communicator& world, const std::string& config_text);

// FNV-1a, 64 bits.
uint64_t text_hash(const std::string& text);

// Ends every rank of the job now (MPI_Abort) when MPI runs in this process; returns otherwise. For
// the command line after an error, so that no rank waits for this one for ever.
void abort_job(int code);

}  // namespace trainlab::dist
