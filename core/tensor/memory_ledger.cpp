#include "tensor/memory_ledger.h"

namespace trainlab {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Weights: return "weights";
    case MemCategory::Gradients: return "gradients";
    case MemCategory::Optimizer: return "optimizer";
    case MemCategory::Activations: return "activations";
    case MemCategory::Workspace: return "workspace";
    case MemCategory::Communication: return "communication";
    case MemCategory::Host: return "host";
  }
  return "?";
}

namespace {
void atomic_max(std::atomic<int64_t>& a, int64_t v) {
  int64_t prev = a.load(std::memory_order_relaxed);
  while (prev < v && !a.compare_exchange_weak(prev, v, std::memory_order_relaxed)) {
  }
}
}  // namespace

void MemoryLedger::raise_peaks(size_t i) {
  atomic_max(m_peak[i], m_current[i].load(std::memory_order_relaxed));
  atomic_max(m_peak_total, m_total.load(std::memory_order_relaxed));
}

void MemoryLedger::on_alloc(MemCategory c, size_t bytes) {
  const auto i = static_cast<size_t>(c);
  m_current[i].fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  m_total.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  raise_peaks(i);
}

void MemoryLedger::on_free(MemCategory c, size_t bytes) {
  m_current[static_cast<size_t>(c)].fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  m_total.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void MemoryLedger::move(MemCategory from, MemCategory to, size_t bytes) {
  if (from == to) return;
  m_current[static_cast<size_t>(from)].fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  m_current[static_cast<size_t>(to)].fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  raise_peaks(static_cast<size_t>(to));
}

MemorySnapshot MemoryLedger::snapshot() const {
  MemorySnapshot s;
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    s.current[i] = m_current[i].load(std::memory_order_relaxed);
    s.peak[i] = m_peak[i].load(std::memory_order_relaxed);
  }
  s.current_total = m_total.load(std::memory_order_relaxed);
  s.peak_total = m_peak_total.load(std::memory_order_relaxed);
  return s;
}

int64_t MemoryLedger::current(MemCategory c) const { return m_current[static_cast<size_t>(c)].load(); }
int64_t MemoryLedger::peak(MemCategory c) const { return m_peak[static_cast<size_t>(c)].load(); }

void MemoryLedger::reset_peaks() {
  for (size_t i = 0; i < kMemCategoryCount; ++i) m_peak[i].store(m_current[i].load());
  m_peak_total.store(m_total.load());
}

}  // namespace trainlab
