#include <cstdlib>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "config/number_range.h"
#include "util/error.h"
#ifdef TRAINLAB_WITH_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <vector>

#include "backend/cuda_entry.h"
#endif

namespace trainlab {

bool built_with_cuda() {
#ifdef TRAINLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

namespace {
#ifdef TRAINLAB_WITH_CUDA
// The CUDA backend module (see cuda_entry.h), loaded once on first use. Looked up in
// $TRAINLAB_CUDA_MODULE, next to the executable, in ../lib and ../lib/trainlab beside it, and in
// the build tree it was built in.
struct CudaModule {
  trainlab_cuda_device_count_fn count = nullptr;
  trainlab_cuda_create_fn create = nullptr;
  std::string error;  // why it could not be loaded
};

const CudaModule& cuda_module() {
  static const CudaModule mod = [] {
    CudaModule m;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("TRAINLAB_CUDA_MODULE")) candidates.emplace_back(env);
    char exe[PATH_MAX];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
      std::string dir(exe, static_cast<size_t>(len));
      dir = dir.substr(0, dir.rfind('/'));
      candidates.push_back(dir + "/libtrainlab_cuda.so");
      candidates.push_back(dir + "/../lib/libtrainlab_cuda.so");
      candidates.push_back(dir + "/../lib/trainlab/libtrainlab_cuda.so");
    }
#ifdef TRAINLAB_CUDA_MODULE_DIR
    candidates.push_back(std::string(TRAINLAB_CUDA_MODULE_DIR) + "/libtrainlab_cuda.so");
#endif
    std::string first_error;
    for (const auto& path : candidates) {
      if (access(path.c_str(), F_OK) != 0) continue;
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        if (first_error.empty()) first_error = dlerror();
        continue;
      }
      auto abi = reinterpret_cast<trainlab_cuda_abi_fn>(dlsym(h, "trainlab_cuda_abi"));
      m.count = reinterpret_cast<trainlab_cuda_device_count_fn>(dlsym(h, "trainlab_cuda_device_count"));
      m.create = reinterpret_cast<trainlab_cuda_create_fn>(dlsym(h, "trainlab_cuda_create"));
      if (!abi || abi() != TRAINLAB_CUDA_MODULE_ABI || !m.count || !m.create) {
        m.count = nullptr;
        m.create = nullptr;
        if (first_error.empty()) first_error = path + " is not a matching TrainLab CUDA module";
        dlclose(h);
        continue;
      }
      return m;
    }
    m.error = first_error.empty() ? "the CUDA backend module libtrainlab_cuda.so was not found"
                                  : "the CUDA backend cannot load (" + first_error + ")";
    return m;
  }();
  return mod;
}

int cuda_device_count(std::string* why) {
  const CudaModule& m = cuda_module();
  if (!m.count) {
    if (why) *why = m.error;
    return 0;
  }
  char buf[512] = {0};
  const int n = m.count(buf, sizeof(buf));
  if (n == 0 && why) *why = buf;
  return n;
}

std::unique_ptr<Backend> create_cuda_backend(int index, const DeviceOptions& options) {
  const CudaModule& m = cuda_module();
  if (!m.create) throw Error(m.error);
  char buf[1024] = {0};
  Backend* b = m.create(index, &options, buf, sizeof(buf));
  if (!b) throw Error("cannot use cuda:" + std::to_string(index) + ": " + buf);
  return std::unique_ptr<Backend>(b);
}
#endif

int gpu_count(std::string* why) {
#ifdef TRAINLAB_WITH_CUDA
  return cuda_device_count(why);
#else
  if (why) *why = "this build of TrainLab has no CUDA backend";
  return 0;
#endif
}

// TRAINLAB_THREADS: a deployment setting (how many cores this machine lends the lab), not a
// choice of the run: it stays an environment variable (0 or unset: OpenBLAS's own choice).
int cpu_threads() {
  const char* env = std::getenv("TRAINLAB_THREADS");
  if (!env || !*env) return 0;
  int64_t n = 0;
  const std::string err = check_number(integers(0, 4096), env, nullptr, &n);
  if (!err.empty()) throw Error("TRAINLAB_THREADS: " + err + " (0: OpenBLAS's choice)");
  return static_cast<int>(n);
}
}  // namespace

std::vector<std::string> available_devices() {
  std::vector<std::string> out{"cpu"};
  std::string why;
  const int n = gpu_count(&why);
  for (int i = 0; i < n; ++i) out.push_back("cuda:" + std::to_string(i));
  return out;
}

std::unique_ptr<Backend> create_backend(const std::string& device, std::string* notice) {
  return create_backend(device, DeviceOptions{}, notice);
}

std::unique_ptr<Backend> create_backend(const std::string& device, const DeviceOptions& options, std::string* notice) {
  if (device == "cpu") return std::make_unique<CpuBackend>(cpu_threads());
  if (device == "auto") {
    std::string why;
    if (gpu_count(&why) > 0) {
#ifdef TRAINLAB_WITH_CUDA
      try {
        return create_cuda_backend(0, options);
      } catch (const Error& e) {
        why = e.what();
      }
#endif
    }
    // What happened and what it means first; the technical reason after, for a user who expected a GPU.
    if (notice) *notice = "Training on the CPU: no usable GPU was found (" + why + ").";
    return std::make_unique<CpuBackend>(cpu_threads());
  }
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (device.size() > 5) {
      const std::string num = device.substr(5);
      int64_t n = 0;
      if (num.find_first_not_of("0123456789") != std::string::npos || !check_number(integers(0, 1023), num, nullptr, &n).empty())
        throw Error("device '" + device + "': expected cpu, auto, cuda or cuda:N with N a GPU index from 0 to 1023");
      index = static_cast<int>(n);
    }
    std::string why;
    const int n = gpu_count(&why);
    if (n == 0) throw Error("device '" + device + "' is not available: " + why + " (use --device cpu or auto)");
    if (index >= n)
      throw Error("device '" + device + "' does not exist: this machine has " + std::to_string(n) +
                  " GPU(s), cuda:0..cuda:" + std::to_string(n - 1));
#ifdef TRAINLAB_WITH_CUDA
    return create_cuda_backend(index, options);
#endif
  }
  throw Error("unknown device '" + device + "': expected cpu, auto, cuda or cuda:N");
}

}  // namespace trainlab
