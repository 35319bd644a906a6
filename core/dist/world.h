// The world of a run: every rank the launcher started (dist/launch.h), as one communicator on
// the run's device, and what a run checks across ranks before its first step. world.cpp is the
// one place that asks whether this build has MPI (TRAINLAB_WITH_MPI).
//
//   one rank               the single-rank communicator (no MPI, no NCCL)
//   several ranks, CPU     MPI on host tensors
//   several ranks, CUDA    NCCL on device tensors, its unique id broadcast over MPI
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "dist/launch.h"

namespace trainlab::dist {

bool built_with_mpi();

// The device this rank uses for the configured `device` name: with several ranks on one machine,
// "cuda" and "auto" become "cuda:<local rank>" (each rank its own GPU); a named "cuda:N" for
// several local ranks is an Error (they would share one GPU, which NCCL refuses).
std::string rank_device(const std::string& device, const LaunchInfo& place);

// The communicator of every rank for `be`'s tensors. Throws Error when this build cannot serve it
// (no MPI for several ranks; no NCCL for several GPU ranks) or when MPI disagrees with the
// launcher's environment about this rank's place.
std::unique_ptr<Communicator> make_world(const LaunchInfo& place, Backend& be, double timeout_s);

// Throws CollectiveError on every rank unless every rank's `config_text` is the same (a hash of
// it is gathered), naming the ranks whose config differs from rank 0's.
void check_same_config(Communicator& world, const std::string& config_text);

// FNV-1a, 64 bits.
uint64_t text_hash(const std::string& text);

// Ends every rank of the job now (MPI_Abort) when MPI runs in this process; returns otherwise. For
// the command line after an error, so that no rank waits for this one for ever.
void abort_job(int code);

}  // namespace trainlab::dist
