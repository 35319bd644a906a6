#include "backend/host_timing.h"

#include <algorithm>

namespace trainlab {

HostKernelTimes::Scope::Scope(HostKernelTimes* owner, const char* name, const OpCost& cost)
    : m_owner(owner), m_name(name), m_cost(cost) {
  if (!m_owner) return;
  if (m_owner->m_depth++ > 0) {  // inside a timed operation: counted with it
    --m_owner->m_depth;
    m_owner = nullptr;
    return;
  }
  m_start = std::chrono::steady_clock::now();
}

HostKernelTimes::Scope::~Scope() {
  if (!m_owner) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_start).count();
  --m_owner->m_depth;
  KernelTime& k = m_owner->m_times[m_name];
  k.name = m_name;
  k.ms += ms;
  k.calls += 1;
  k.flops += m_cost.flops;
  k.bytes += m_cost.bytes;
}

std::vector<KernelTime> HostKernelTimes::sorted() const {
  std::vector<KernelTime> out;
  for (const auto& [n, k] : m_times) out.push_back(k);
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}

}  // namespace trainlab
