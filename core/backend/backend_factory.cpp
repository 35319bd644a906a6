#include <cstdlib>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "util/error.h"
#ifdef TRAINLAB_WITH_CUDA
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
int gpu_count(std::string* why) {
#ifdef TRAINLAB_WITH_CUDA
  return cuda_device_count(why);
#else
  if (why) *why = "this build of TrainLab has no CUDA backend";
  return 0;
#endif
}

int cpu_threads() {
  if (const char* env = std::getenv("TRAINLAB_THREADS")) return std::atoi(env);
  return 0;
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
  if (device == "cpu") return std::make_unique<CpuBackend>(cpu_threads());
  if (device == "auto") {
    std::string why;
    if (gpu_count(&why) > 0) {
#ifdef TRAINLAB_WITH_CUDA
      try {
        return create_cuda_backend(0);
      } catch (const Error& e) {
        why = e.what();
      }
#endif
    }
    if (notice) *notice = "no usable GPU (" + why + "): training on the CPU";
    return std::make_unique<CpuBackend>(cpu_threads());
  }
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (device.size() > 5) {
      const std::string num = device.substr(5);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos)
        throw Error("device '" + device + "': expected cpu, auto, cuda or cuda:N with N a GPU index");
      index = std::stoi(num);
    }
    std::string why;
    const int n = gpu_count(&why);
    if (n == 0) throw Error("device '" + device + "' is not available: " + why + " (use --device cpu or auto)");
    if (index >= n)
      throw Error("device '" + device + "' does not exist: this machine has " + std::to_string(n) +
                  " GPU(s), cuda:0..cuda:" + std::to_string(n - 1));
#ifdef TRAINLAB_WITH_CUDA
    return create_cuda_backend(index);
#endif
  }
  throw Error("unknown device '" + device + "': expected cpu, auto, cuda or cuda:N");
}

}  // namespace trainlab
