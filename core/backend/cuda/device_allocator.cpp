#include "backend/cuda/device_allocator.h"

#include <cuda_runtime_api.h>

#include "common.cuh"
#include "util/error.h"

namespace trainlab::cuda {

size_t DeviceAllocator::round_up(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (1u << 20)) return (bytes + 511) / 512 * 512;       // small: 512-byte steps
  return (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);        // large: 2 MiB steps
}

DeviceAllocator::~DeviceAllocator() {
  std::lock_guard<std::mutex> lock(m_mutex);
  for (auto& [p, size] : m_size) cudaFree(p);  // cached and any still-live blocks
}

void* DeviceAllocator::allocate(size_t bytes) {
  const size_t r = round_up(bytes);
  std::lock_guard<std::mutex> lock(m_mutex);
  auto it = m_free.lower_bound(r);
  if (it != m_free.end() && it->first <= r + r / 4) {
    void* p = it->second;
    m_free.erase(it);
    return p;
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, r);
  if (e != cudaSuccess) {
    cudaGetLastError();
    for (auto& [size, q] : m_free) {
      cudaFree(q);
      m_size.erase(q);
      m_reserved -= static_cast<int64_t>(size);
    }
    m_free.clear();
    e = cudaMalloc(&p, r);
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("out of GPU memory allocating " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(m_device) +
                  " (" + std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) + " MiB)");
    }
  }
  m_size[p] = r;
  m_reserved += static_cast<int64_t>(r);
  return p;
}

void DeviceAllocator::release(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(m_mutex);
  auto it = m_size.find(p);
  if (it == m_size.end()) return;
  m_free.emplace(it->second, p);
}

void DeviceAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(m_mutex);
  for (auto& [size, q] : m_free) {
    cudaFree(q);
    m_size.erase(q);
    m_reserved -= static_cast<int64_t>(size);
  }
  m_free.clear();
}

}  // namespace trainlab::cuda
