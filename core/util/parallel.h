// Work split over threads, for loops whose iterations are independent: the CPU backend's products
// and row loops and the reader of steps.bin's compressed blocks (parallel.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>

namespace trainlab {

// Splits [0, n) into `threads` contiguous parts, part w being [n w / t, n (w + 1) / t) with
// t = min(threads, n), and returns when all are done. The calling thread runs part 0 and any part
// no worker has taken; the others run on a pool of worker threads that lasts for the process (at
// most the machine's hardware threads less one, started on first use), which wait a moment for
// the next parts before they sleep, so a call costs a wake-up, not a thread start. Each part runs
// exactly once, on one thread, with its index w, so results do not depend on the thread count
// or on which thread ran which part. An exception thrown by a part is rethrown here after every
// part has ended (the lowest part's), never left to terminate. Callers on several threads at once
// and parts that call parallel_for themselves are served: a caller runs its own parts that are
// still waiting rather than waiting for a worker.
void parallel_for(int64_t n, int threads, const std::function<void(int, int64_t, int64_t)>& fn);

// The threads a parallel_for over `n` items worth about `grain` items each should use: at least 1,
// at most the machine's hardware threads.
inline int parallel_threads(int64_t n, int64_t grain) {
  const int64_t hw = std::max<unsigned>(1, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(1, grain), 1, hw));
}

// The pool's worker threads started so far (for tests and the backend's description).
int parallel_pool_workers();

}  // namespace trainlab
