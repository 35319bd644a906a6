// Work split over threads, for loops whose iterations are independent: the CPU backend's row
// loops and the reader of steps.bin's compressed blocks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace trainlab {

// Splits [0, n) into `threads` contiguous parts run at once (the caller runs the first part) and
// returns when all are done. Each index is computed by exactly one thread with the same
// arithmetic, so results do not depend on the thread count. An exception thrown by a part is
// rethrown here after every thread has ended (the first part's first), never left to terminate.
inline void parallel_for(int64_t n, int threads, const std::function<void(int, int64_t, int64_t)>& fn) {
  const int t = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(t));
  auto part = [&](int w) {
    try {
      fn(w, n * w / t, n * (w + 1) / t);
    } catch (...) {
      errors[static_cast<size_t>(w)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < t; ++w) pool.emplace_back(part, w);
  part(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The threads a parallel_for over `n` items worth about `grain` items each should use: at least 1,
// at most the machine's hardware threads.
inline int parallel_threads(int64_t n, int64_t grain) {
  const int64_t hw = std::max<unsigned>(1, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(1, grain), 1, hw));
}

}  // namespace trainlab
