#include "dist/world.h"

#include "dist/nccl_communicator.h"
#include "util/error.h"
#ifdef TRAINLAB_WITH_MPI
#include "dist/mpi_communicator.h"
#endif

namespace trainlab::dist {

bool built_with_mpi() {
#ifdef TRAINLAB_WITH_MPI
  return true;
#else
  return false;
#endif
}

namespace {

std::unique_ptr<Communicator> host_world(const LaunchInfo& place, double timeout_s) {
#ifdef TRAINLAB_WITH_MPI
  auto c = make_mpi_world(timeout_s);
  if (c->size() != place.size || c->rank() != place.rank)
    throw Error("MPI says this is rank " + std::to_string(c->rank()) + " of " + std::to_string(c->size()) + ", the " +
                place.launcher + " environment rank " + std::to_string(place.rank) + " of " + std::to_string(place.size) +
                " (an MPI library other than the launcher's?)");
  return c;
#else
  (void)timeout_s;
  throw Error("this run has " + std::to_string(place.size) + " ranks (started by " + place.launcher +
              "), but this build of TrainLab has no MPI (configure with Open MPI installed: libopenmpi-dev)");
#endif
}

}  // namespace

std::string rank_device(const std::string& device, const LaunchInfo& place) {
  if (place.local_size <= 1 && place.size <= 1) return device;
  if (device == "cuda" || device == "auto") return "cuda:" + std::to_string(place.local_rank);
  if (device.rfind("cuda:", 0) == 0 && place.local_size > 1)
    throw Error("device.name " + device + " names one GPU for the " + std::to_string(place.local_size) +
                " ranks on this machine: use cuda (each rank takes the GPU of its local rank)");
  return device;
}

std::unique_ptr<Communicator> make_world(const LaunchInfo& place, Backend& be, double timeout_s) {
  if (place.size <= 1) return make_single_rank(be, timeout_s);
  auto host = host_world(place, timeout_s);
  if (be.info().kind == DeviceKind::Cpu) return host;
  return make_nccl_communicator(be, std::move(host));
}

uint64_t text_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void check_same_config(Communicator& world, const std::string& config_text) {
  const std::vector<uint64_t> all = world.all_gather_host(text_hash(config_text));
  std::string differ;
  int n = 0;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
      ++n;
    }
  if (n > 0)
    throw CollectiveError("the ranks were started with different configs: rank" + std::string(n > 1 ? "s " : " ") +
                          differ + (n > 1 ? " differ" : " differs") +
                          " from rank 0 (every rank needs the same config file and --set options; run.* may differ)");
}

void abort_job(int code) {
#ifdef TRAINLAB_WITH_MPI
  if (mpi_active()) mpi_abort(code);
#else
  (void)code;
#endif
}

}  // namespace trainlab::dist
