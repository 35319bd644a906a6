// Launch: where this process stands among the ranks of a job, read from the launcher's
// environment before anything else starts (so that each rank can pick its GPU by local rank), and
// the command line that starts N local ranks through mpirun (trainlab-cli train --ranks N).
//
// Launchers and their variables, first match wins:
//   Open MPI's mpirun   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (+ _LOCAL_SIZE)
//   Slurm's srun        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ SLURM_NTASKS_PER_NODE), in a job
//                       step (SLURM_STEP_ID: a batch script itself is not one of the ranks)
//   PMIx (prterun, ...) PMIX_RANK, with the size from PMIX_SIZE or OMPI_COMM_WORLD_SIZE
//   MPICH's hydra       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
// A variable that is set but not an integer in range is an Error naming it (a job half-configured
// must not train as one rank).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace trainlab::dist {

struct LaunchInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks of this machine
  std::string launcher;                // "" (none), "mpirun", "slurm", "pmix", "hydra"
  bool launched() const { return !launcher.empty(); }
};

using EnvLookup = std::function<const char*(const char*)>;
// This process's place, from `env` (std::getenv when empty).
LaunchInfo launch_info(const EnvLookup& env = {});

// argv of `mpirun -np N [--allow-run-as-root] --oversubscribe --bind-to none -x ... <exe> <args...>`:
// N local ranks of the same command. Open MPI refuses to run as root without the flag, and
// oversubscription lets N exceed the cores (the CI machine has two); no core binding, because each
// rank's OpenBLAS and the app pick their own threads. The ranks get NCCL's NVLink multicast (NVLS)
// off (NCCL_NVLS_ENABLE=0) and an equal share of the cores for the CPU backend
// (TRAINLAB_THREADS = cores / N, at least 1), each unless the caller's environment sets it.
std::vector<std::string> mpirun_argv(int ranks, const std::string& exe, const std::vector<std::string>& args,
                                     bool as_root);

// Replaces this process with mpirun running `argv` (mpirun_argv's). Returns only on failure, by
// throwing Error (mpirun not found: Open MPI's openmpi-bin is needed).
[[noreturn]] void exec_mpirun(const std::vector<std::string>& argv);

// Runs `argv` (argv[0] searched on the PATH) as a child process and waits for it: its exit status
// (128 + the signal's number when a signal ended it). Throws Error when it cannot be started.
int run_and_wait(const std::vector<std::string>& argv);

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace trainlab::dist
