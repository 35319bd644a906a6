#include "dist/world.h"

#include "dist/nccl_communicator.h"
#include "dist/staged_communicator.h"
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

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::Single: return "single";
    case Transport::Mpi: return "mpi";
    case Transport::Nccl: return "nccl";
    case Transport::MpiStaged: return "mpi-staged";
  }
  return "?";
}

namespace {

void check_transport_name(const std::string& transport) {
  if (transport != "auto" && transport != "nccl" && transport != "mpi")
    throw Error("dist.transport '" + transport + "': expected auto, nccl or mpi");
}

std::string ranks_on_gpus(const LaunchInfo& place, int gpu_count) {
  return std::to_string(place.local_size) + " ranks on this machine and " + std::to_string(gpu_count) + " GPU" +
         (gpu_count == 1 ? "" : "s");
}

int machine_gpu_count() { return static_cast<int>(available_devices().size()) - 1; }

}  // namespace

TransportChoice choose_transport(DeviceKind device, const std::string& transport, const LaunchInfo& place,
                                 int gpu_count) {
  check_transport_name(transport);
  if (place.size <= 1) return {Transport::Single, ""};
  if (device == DeviceKind::Cpu) {
    if (transport == "nccl")
      throw Error("dist.transport nccl moves GPU tensors, but this rank runs on the CPU (device cpu): use "
                  "dist.transport=auto or mpi for CPU ranks, or device.name=cuda");
    return {Transport::Mpi, ""};
  }
  const bool own_gpu = place.local_size <= gpu_count;
  if (transport == "mpi") return {Transport::MpiStaged, ""};
  if (transport == "nccl") {
    if (!own_gpu)
      throw Error("dist.transport nccl needs a GPU for each rank, and there are " + ranks_on_gpus(place, gpu_count) +
                  " (NCCL refuses two ranks on one GPU): use dist.transport=mpi (tensors staged through host "
                  "memory; slower), or start no more ranks on a machine than it has GPUs");
    return {Transport::Nccl, ""};
  }
  if (own_gpu) return {Transport::Nccl, ""};
  return {Transport::MpiStaged, "dist.transport auto: " + ranks_on_gpus(place, gpu_count) +
                                    ", and NCCL refuses two ranks on one GPU: the ranks' tensors go through host "
                                    "memory and MPI (mpi-staged), a correctness setup, not a fast one"};
}

std::string rank_device(const std::string& device, const LaunchInfo& place, const std::string& transport,
                        int gpu_count) {
  check_transport_name(transport);
  if (place.local_size <= 1 && place.size <= 1) return device;
  if (device == "cpu") {
    choose_transport(DeviceKind::Cpu, transport, place, 0);  // nccl on the CPU: its Error, before any backend
    return device;
  }
  if (device == "cuda" || device == "auto") {
    if (gpu_count <= 0) return device == "auto" ? device : "cuda:" + std::to_string(place.local_rank);
    choose_transport(DeviceKind::Cuda, transport, place, gpu_count);  // nccl on shared GPUs: its Error
    return "cuda:" + std::to_string(place.local_rank % gpu_count);
  }
  if (device.rfind("cuda:", 0) == 0 && place.local_size > 1 && transport != "mpi")
    throw Error("device.name " + device + " names one GPU for the " + std::to_string(place.local_size) +
                " ranks on this machine: use cuda (each rank takes the GPU of its local rank), or dist.transport=mpi "
                "to run them all on " + device + " (staged through host memory; slower)");
  return device;
}

std::string rank_device(const std::string& device, const LaunchInfo& place, const std::string& transport) {
  const bool asks = (place.local_size > 1 || place.size > 1) && (device == "cuda" || device == "auto");
  return rank_device(device, place, transport, asks ? machine_gpu_count() : 0);
}

std::unique_ptr<Communicator> make_world(const LaunchInfo& place, Backend& be, double timeout_s,
                                         const std::string& transport, std::string* notice) {
  const DeviceKind kind = be.info().kind;
  const TransportChoice c =
      choose_transport(kind, transport, place, kind == DeviceKind::Cuda && place.size > 1 ? machine_gpu_count() : 0);
  if (notice) *notice = c.notice;
  if (c.transport == Transport::Single) return make_single_rank(be, timeout_s);
  auto host = host_world(place, timeout_s);
  if (c.transport == Transport::Mpi) return host;
  if (c.transport == Transport::MpiStaged) return make_staged_communicator(be, std::move(host));
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
