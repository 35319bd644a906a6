// MemoryLedger: every tensor the lab allocates is tagged with a category; the ledger keeps current
// and peak bytes per category and in total. One ledger per backend (per device).
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace trainlab {

// Host: bytes a device run keeps in (pinned) host memory on the device's behalf -- with
// optim.offload cpu the fp32 masters, the optimizer state and the gradient/weight staging
// (optim/offload.h). It is not device memory: a device's bytes are the total less Host.
enum class MemCategory : uint8_t { Weights, Gradients, Optimizer, Activations, Workspace, Communication, Host };
constexpr size_t kMemCategoryCount = 7;

const char* mem_category_name(MemCategory c);

struct MemorySnapshot {
  std::array<int64_t, kMemCategoryCount> current{};
  std::array<int64_t, kMemCategoryCount> peak{};
  int64_t current_total = 0;
  int64_t peak_total = 0;
};

class MemoryLedger {
 public:
  void on_alloc(MemCategory c, size_t bytes);
  void on_free(MemCategory c, size_t bytes);
  // Moves bytes from one category to another (a buffer whose role changed, e.g. fp32 weights that
  // become the fp32 master copy when a run switches to 16-bit).
  void move(MemCategory from, MemCategory to, size_t bytes);
  MemorySnapshot snapshot() const;
  int64_t current(MemCategory c) const;
  int64_t peak(MemCategory c) const;
  // Restart peak tracking from the current values (e.g. after a warm-up step).
  void reset_peaks();

 private:
  void raise_peaks(size_t index);
  std::array<std::atomic<int64_t>, kMemCategoryCount> m_current{};
  std::array<std::atomic<int64_t>, kMemCategoryCount> m_peak{};
  std::atomic<int64_t> m_total{0};
  std::atomic<int64_t> m_peak_total{0};
};

}  // namespace trainlab
