// parallel_for's lasting pool of worker threads: see parallel.h.
#include "util/parallel.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <vector>

namespace trainlab {
namespace {

using PartFn = std::function<void(int, int64_t, int64_t)>;
using Clock = std::chrono::steady_clock;

// How long a worker out of parts, or a caller whose parts are still running, waits awake before it
// sleeps: the CPU backend's products come tens of microseconds apart in a training step, and a
// sleeping thread takes about as long to wake. The first microseconds it only pauses; then it
// yields its core to any other thread that wants it (OpenBLAS's, other programs').
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr auto kPauseOnly = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Waits awake until ready() or kSpin has passed; returns ready().
template <class Ready>
bool spin_until(const Ready& ready) {
  const Clock::time_point start = Clock::now();
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    const auto spent = Clock::now() - start;
    if (spent > kSpin) return ready();
    if (spent > kPauseOnly) std::this_thread::yield();
  }
}

// One parallel_for call: its parts are taken one at a time (next, under the pool's mutex) by the
// caller and the workers; done counts the parts finished.
struct Job {
  const PartFn* fn = nullptr;
  int64_t n = 0;
  int parts = 1;
  int next = 1;  // part 0 is the caller's
  std::atomic<int> done{0};
  std::vector<std::exception_ptr> errors;

  void run(int w) noexcept {
    try {
      (*fn)(w, n * w / parts, n * (w + 1) / parts);
    } catch (...) {
      errors[static_cast<size_t>(w)] = std::current_exception();
    }
  }
};

class Pool {
 public:
  // Runs every part of job (some on the workers) and returns when all have ended.
  void run(Job& job);
  int workers() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(threads_.size());
  }

 private:
  void grow(int wanted);                  // under mu_
  bool take(Job*& job, int& w, Job* own);  // under mu_: the next part waiting (of `own` only, if given)
  void work();
  void finished(Job& job);

  std::mutex mu_;
  std::condition_variable wake_;      // workers: a job was queued
  std::condition_variable all_done_;  // callers: a part ended
  std::deque<Job*> queue_;            // jobs with parts not taken yet
  std::atomic<int> queued_{0};        // queue_.size(), read by spinning workers
  std::atomic<int> sleeping_callers_{0};
  int sleeping_workers_ = 0;
  std::vector<std::thread> threads_;
  // The most workers: the hardware threads less the caller's (asked once: glibc reads a file).
  const int most_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1;
};

void Pool::grow(int wanted) {
  while (static_cast<int>(threads_.size()) < std::min(wanted, most_)) {
    try {
      threads_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      return;  // no more threads to be had: the callers run the parts themselves
    }
  }
}

bool Pool::take(Job*& job, int& w, Job* own) {
  if (own && own->next >= own->parts) return false;
  if (!own && queue_.empty()) return false;
  job = own ? own : queue_.front();
  w = job->next++;
  if (job->next >= job->parts) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), job));
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
  }
  return true;
}

// A worker's part has ended: after the increment the job may be gone (its caller returns).
void Pool::finished(Job& job) {
  job.done.fetch_add(1);
  if (sleeping_callers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    all_done_.notify_all();
  }
}

void Pool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Job* job = nullptr;
    int w = 0;
    if (!take(job, w, nullptr)) {
      lock.unlock();
      spin_until([this] { return queued_.load(std::memory_order_relaxed) > 0; });
      lock.lock();
      if (!take(job, w, nullptr)) {  // asleep until a job is queued, then awake a while again
        ++sleeping_workers_;
        wake_.wait(lock);
        --sleeping_workers_;
        continue;
      }
    }
    lock.unlock();
    job->run(w);
    finished(*job);
    lock.lock();
  }
}

void Pool::run(Job& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    grow(job.parts - 1);
    queue_.push_back(&job);
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
    for (int i = 0; i < std::min(job.parts - 1, sleeping_workers_); ++i) wake_.notify_one();
  }
  job.run(0);
  int done = 1;
  for (;;) {  // the parts no worker has taken yet
    Job* mine = nullptr;
    int w = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!take(mine, w, &job)) break;
    }
    job.run(w);
    ++done;
  }
  const auto all = [&] { return job.done.load() + done >= job.parts; };
  if (spin_until(all)) return;
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_callers_.fetch_add(1);
  all_done_.wait(lock, all);
  sleeping_callers_.fetch_sub(1);
}

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: its workers may outlive static destruction
  return *p;
}

}  // namespace

void parallel_for(int64_t n, int threads, const PartFn& fn) {
  const int t = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  if (t == 1) return fn(0, 0, n);
  Job job;
  job.fn = &fn;
  job.n = n;
  job.parts = t;
  job.errors.resize(static_cast<size_t>(t));
  pool().run(job);
  for (const auto& e : job.errors)
    if (e) std::rethrow_exception(e);
}

int parallel_pool_workers() { return pool().workers(); }

}  // namespace trainlab
