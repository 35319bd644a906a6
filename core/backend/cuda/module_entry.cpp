// The C entry points of libtrainlab_cuda.so (see backend/cuda_entry.h).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_entry.h"

namespace {
void put(char* dst, int len, const std::string& s) {
  if (!dst || len <= 0) return;
  std::snprintf(dst, static_cast<size_t>(len), "%s", s.c_str());
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int trainlab_cuda_abi() { return TRAINLAB_CUDA_MODULE_ABI; }

extern "C" __attribute__((visibility("default"))) int trainlab_cuda_device_count(char* why, int why_len) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::string reason;
    if (e == cudaErrorNoDevice) {
      reason = "no CUDA GPU found";
    } else if (e == cudaErrorInsufficientDriver) {
      int drv = 0, rt = 0;
      cudaDriverGetVersion(&drv);
      cudaRuntimeGetVersion(&rt);
      reason = drv == 0 ? "no NVIDIA driver installed"
                        : "the NVIDIA driver (CUDA " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10) +
                              ") is older than this build's CUDA runtime (" + std::to_string(rt / 1000) + "." +
                              std::to_string(rt % 1000 / 10) + ")";
    } else {
      reason = std::string("CUDA cannot start: ") + cudaGetErrorString(e);
    }
    put(why, why_len, reason);
    return 0;
  }
  if (n == 0) put(why, why_len, "no CUDA GPU found");
  return n;
}

extern "C" __attribute__((visibility("default"))) trainlab::Backend* trainlab_cuda_create(
    int index, const trainlab::DeviceOptions* options, char* err, int err_len) {
  try {
    return new trainlab::cuda::CudaBackend(index, options ? *options : trainlab::DeviceOptions{});
  } catch (const std::exception& e) {
    put(err, err_len, e.what());
  } catch (...) {
    put(err, err_len, "unknown error creating the CUDA backend");
  }
  return nullptr;
}
