// parallel_for (util/parallel.h) on its lasting pool of workers: every part runs exactly once with
// its bounds, whatever the thread count; parts that call parallel_for themselves and callers on
// several threads at once all finish; an exception from any part reaches the caller only after
// every other part has ended; the pool stays within the machine's threads and its worker takes
// parts the caller has not.
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/parallel.h"

using namespace trainlab;

namespace {

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Each index of [0, n) seen once by parallel_for(n, threads); the parts' bounds as documented.
void check_cover(int64_t n, int threads) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(std::max<int64_t>(n, 1)));
  const int t = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  std::vector<std::atomic<int>> parts(static_cast<size_t>(t));
  std::atomic<int> bad_bounds{0};
  parallel_for(n, threads, [&](int w, int64_t b, int64_t e) {
    if (w < 0 || w >= t || b != n * w / t || e != n * (w + 1) / t) {
      ++bad_bounds;
      return;
    }
    ++parts[static_cast<size_t>(w)];
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
  });
  QCOMPARE(bad_bounds.load(), 0);
  for (int w = 0; w < t; ++w) QCOMPARE(parts[static_cast<size_t>(w)].load(), 1);
  for (int64_t i = 0; i < n; ++i) QCOMPARE(seen[static_cast<size_t>(i)].load(), 1);
}

}  // namespace

class TestParallel : public QObject {
  Q_OBJECT
 private slots:
  // 1 to 64 parts of 0 to 10,007 items, many times over (the pool reused call after call).
  void everyIndexOnceInItsPart() {
    for (int64_t n : {0, 1, 2, 3, 17, 1000, 10007})
      for (int threads : {1, 2, 3, 4, 7, 64}) check_cover(n, threads);
    for (int rep = 0; rep < 2000; ++rep) check_cover(64, 2 + rep % 5);
  }
  // The same sums in the same parts whatever the thread count (each part adds its own range in
  // order, the parts are added in order afterwards).
  void resultsIndependentOfThreads() {
    std::vector<float> x(100003);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(i + 1);
    const auto total = [&](int threads) {
      std::vector<float> part(static_cast<size_t>(threads), 0.0f);
      parallel_for(static_cast<int64_t>(x.size()), threads, [&](int w, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) part[static_cast<size_t>(w)] += x[static_cast<size_t>(i)];
      });
      return part;
    };
    const std::vector<float> four = total(4);
    for (int rep = 0; rep < 50; ++rep) QVERIFY(total(4) == four);
  }
  // Parts that split their own work again (three levels): no part waits for a worker that waits
  // for it, and every innermost index is reached once.
  void nestedCalls() {
    std::vector<std::atomic<int>> seen(4 * 5 * 6);
    for (int rep = 0; rep < 200; ++rep) {
      for (auto& s : seen) s = 0;
      parallel_for(4, 4, [&](int, int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a)
          parallel_for(5, 3, [&](int, int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b)
              parallel_for(6, 2, [&](int, int64_t c0, int64_t c1) {
                for (int64_t c = c0; c < c1; ++c) ++seen[static_cast<size_t>((a * 5 + b) * 6 + c)];
              });
          });
      });
      for (const auto& s : seen) QCOMPARE(s.load(), 1);
    }
  }
  // Eight threads calling at once (as the app's worker, the GUI's threads and a test's ranks do):
  // each call still covers its own range exactly once.
  void concurrentCallers() {
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 8; ++c)
      callers.emplace_back([&wrong, c] {
        for (int rep = 0; rep < 500; ++rep) {
          const int64_t n = 10 + (c * 7 + rep) % 50;
          std::vector<int> seen(static_cast<size_t>(n), 0);  // each index written by one part only
          parallel_for(n, 2 + (c + rep) % 3, [&](int, int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
          });
          if (std::any_of(seen.begin(), seen.end(), [](int s) { return s != 1; })) ++wrong;
        }
      });
    for (auto& t : callers) t.join();
    QCOMPARE(wrong.load(), 0);
  }
  // Parts 1 and 3 of 4 throw while part 2 is still running: the caller gets part 1's exception,
  // and only after part 2 has ended. Part 0 (the caller's own) throwing waits for the others too.
  void exceptionsAfterEveryPartEnded() {
    for (int thrower : {0, 1}) {
      std::atomic<bool> slow_done{false};
      std::atomic<int> ran{0};
      try {
        parallel_for(4, 4, [&](int w, int64_t, int64_t) {
          ++ran;
          if (w == 2) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            slow_done = true;
            return;
          }
          if (w == thrower) throw std::runtime_error("part " + std::to_string(w));
          if (w == 3) throw std::logic_error("part 3");
        });
        QFAIL("no exception reached the caller");
      } catch (const std::runtime_error& e) {
        QCOMPARE(QString(e.what()), QString("part %1").arg(thrower));
        QVERIFY(slow_done.load());
        QCOMPARE(ran.load(), 4);
      }
    }
    // The pool still works afterwards.
    check_cover(100, 4);
  }
  // No more workers than the machine's threads less the caller, however many parts are asked.
  void workersWithinTheMachine() {
    check_cover(1000, 256);
    QVERIFY(parallel_pool_workers() <= hardware_threads() - 1);
    QVERIFY(parallel_pool_workers() >= std::min(1, hardware_threads() - 1));
  }
  // With a second hardware thread, the worker takes a part while the caller is busy with its own
  // (the caller's part sleeps 20 ms, time enough even on a loaded machine).
  void workerTakesParts() {
    if (hardware_threads() < 2) QSKIP("one hardware thread: the caller runs every part");
    const auto caller = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    for (int rep = 0; rep < 5; ++rep)
      parallel_for(2, 2, [&](int w, int64_t, int64_t) {
        if (w == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (std::this_thread::get_id() != caller) ++elsewhere;
      });
    QVERIFY(elsewhere.load() >= 1);
  }
};

QTEST_APPLESS_MAIN(TestParallel)
#include "test_parallel.moc"
