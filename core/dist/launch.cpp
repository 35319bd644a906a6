#include "dist/launch.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace trainlab::dist {

namespace {

// The integer value of `name` in [lo, hi]; nullopt-like -1 when unset. Throws Error when set but
// malformed (the value itself is named: it came from the user's environment, not from a file).
int env_int(const EnvLookup& env, const char* name, int lo, int hi, bool* set) {
  const char* v = env(name);
  *set = v != nullptr;
  if (!v) return 0;
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi)
    throw Error("environment variable " + std::string(name) + "='" + std::string(v).substr(0, 32) +
                "': expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int>(x);
}

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr int kMaxRanks = 1 << 20;

}  // namespace

LaunchInfo launch_info(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  // Open MPI before PMIx: mpirun sets both, and OMPI_* carries the local rank.
  static const Scheme schemes[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE", nullptr, nullptr},
      {"hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  LaunchInfo info;
  for (const Scheme& s : schemes) {
    bool has_rank = false, has_size = false, has_local = false, has_local_size = false;
    if (!env(s.rank)) continue;
    // A batch script (sbatch) sees SLURM_PROCID=0 and SLURM_NTASKS=N before any srun: only a job
    // step started by srun (SLURM_STEP_ID set) is one of N ranks.
    if (std::string(s.launcher) == "slurm" && !env("SLURM_STEP_ID")) continue;
    const int rank = env_int(env, s.rank, 0, kMaxRanks - 1, &has_rank);
    const int size = env_int(env, s.size, 1, kMaxRanks, &has_size);
    info.launcher = s.launcher;
    info.rank = rank;
    info.size = has_size ? size : 0;
    if (!has_size && std::string(s.launcher) == "pmix") {  // prterun's ranks also see OMPI_COMM_WORLD_SIZE
      bool set = false;
      info.size = env_int(env, "OMPI_COMM_WORLD_SIZE", 1, kMaxRanks, &set);
      has_size = set;
    }
    if (!has_size)
      throw Error(std::string("environment variable ") + s.rank + " is set but " + s.size +
                  " is not: the launcher's number of ranks is unknown");
    if (info.rank >= info.size)
      throw Error(std::string("environment variable ") + s.rank + "=" + std::to_string(info.rank) +
                  ": expected an integer from 0 to " + std::to_string(info.size - 1) + " (" + s.size + "=" +
                  std::to_string(info.size) + ")");
    if (s.local_rank) info.local_rank = env_int(env, s.local_rank, 0, info.size - 1, &has_local);
    if (s.local_size) {
      // Slurm writes SLURM_NTASKS_PER_NODE as "2" or "2(x3)"; only a plain number is taken.
      const char* v = env(s.local_size);
      if (v && std::strchr(v, '(') == nullptr) info.local_size = env_int(env, s.local_size, 1, info.size, &has_local_size);
    }
    if (!has_local) info.local_rank = info.size == 1 ? 0 : info.rank;  // unknown: assume one machine
    if (!has_local_size) info.local_size = has_local ? info.local_rank + 1 : info.size;
    return info;
  }
  return info;
}

std::vector<std::string> mpirun_argv(int ranks, const std::string& exe, const std::vector<std::string>& args,
                                     bool as_root) {
  std::vector<std::string> a{"mpirun", "-np", std::to_string(ranks)};
  if (as_root) a.push_back("--allow-run-as-root");
  for (const char* f : {"--oversubscribe", "--bind-to", "none"}) a.emplace_back(f);
  // -x NAME=VALUE sets a variable for the ranks (the caller's environment reaches them anyway).
  if (!std::getenv("NCCL_NVLS_ENABLE")) a.insert(a.end(), {"-x", "NCCL_NVLS_ENABLE=0"});
  if (!std::getenv("TRAINLAB_THREADS")) {  // the machine's cores shared out, not each rank taking all
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    a.insert(a.end(), {"-x", "TRAINLAB_THREADS=" + std::to_string(std::max(1u, cores / static_cast<unsigned>(ranks)))});
  }
  a.push_back(exe);
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

void exec_mpirun(const std::vector<std::string>& argv) {
  std::vector<char*> c;
  for (const auto& s : argv) c.push_back(const_cast<char*>(s.c_str()));
  c.push_back(nullptr);
  execvp(c[0], c.data());
  const int e = errno;
  throw Error("cannot start " + argv.at(0) + " (" + std::strerror(e) +
              "): starting several ranks needs Open MPI's mpirun on the PATH (Debian: apt-get install openmpi-bin)");
}

int run_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> c;
  for (const auto& s : argv) c.push_back(const_cast<char*>(s.c_str()));
  c.push_back(nullptr);
  pid_t pid = 0;
  if (const int e = posix_spawnp(&pid, c[0], nullptr, nullptr, c.data(), environ); e != 0)
    throw Error("cannot start " + argv.at(0) + " (" + std::strerror(e) + ")");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error("lost " + argv.at(0) + " (" + std::strerror(errno) + ")");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string self_executable() {
  char exe[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) throw Error("cannot find the running executable (/proc/self/exe)");
  return std::string(exe, static_cast<size_t>(len));
}

}  // namespace trainlab::dist
