#include "backend/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "util/error.h"

namespace trainlab {

CopyBandwidth measure_copy_bandwidth(Backend& be, int64_t buffer_bytes, int reps) {
  const DeviceInfo info = be.info();
  const bool cpu = info.kind == DeviceKind::Cpu;
  if (buffer_bytes <= 0) buffer_bytes = cpu ? (256ll << 20) : (1ll << 30);
  if (reps < 1) throw Error("measure_copy_bandwidth: reps must be >= 1, got " + std::to_string(reps));
  static std::mutex mu;
  static std::map<std::string, CopyBandwidth> cache;
  const std::string key = info.name + "/" + std::to_string(buffer_bytes) + "/" + std::to_string(reps);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const int64_t n = buffer_bytes / 4;
  Tensor a = be.empty({n}, DType::F32, MemCategory::Workspace);
  Tensor b = be.empty({n}, DType::F32, MemCategory::Workspace);
  be.fill(a, 1.0f);
  for (int i = 0; i < 2; ++i) be.copy(a, b);
  be.synchronize();
  double best = 0.0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    be.copy(i % 2 ? b : a, i % 2 ? a : b);
    be.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(a.bytes()) / s);
  }
  const CopyBandwidth out{best, static_cast<int64_t>(a.bytes()), reps};
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = out;
  return out;
}

}  // namespace trainlab
