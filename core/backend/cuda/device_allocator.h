// DeviceAllocator: a caching allocator over cudaMalloc. Blocks freed by tensors go back to a
// cache and are reused by later allocations of a similar size (never handed to the driver while
// the backend lives, so freeing inside a captured step is safe); the MemoryLedger still sees the
// exact bytes each tensor asked for, per category (Storage reports them), while reserved()
// reports what the cache holds from the driver.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace trainlab::cuda {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : m_device(device) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  void* allocate(size_t bytes);
  void release(void* p);
  // Returns cached blocks to the driver (not while a step is being captured).
  void empty_cache();
  int64_t reserved() const { return m_reserved; }

 private:
  static size_t round_up(size_t bytes);
  int m_device;
  std::mutex m_mutex;
  std::multimap<size_t, void*> m_free;          // block size -> block
  std::unordered_map<void*, size_t> m_size;     // every live or cached block -> its size
  int64_t m_reserved = 0;
};

}  // namespace trainlab::cuda
