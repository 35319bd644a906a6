// Kernel timing on the host clock, for backends whose operations run on the calling thread (the
// CPU backend): each outermost operation's wall time (steady_clock), its calls, and its work and
// traffic (op_cost.h), summed by name. Operations an operation calls inside itself (a copy inside
// a product) count with the outer one only, so the names' times add up to the timed total.
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/op_cost.h"

namespace trainlab {

class HostKernelTimes {
 public:
  class Scope {
   public:
    Scope(HostKernelTimes* owner, const char* name, const OpCost& cost);
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();

   private:
    HostKernelTimes* m_owner;  // null: not timed (timing off, or inside a timed operation)
    const char* m_name;
    OpCost m_cost;
    std::chrono::steady_clock::time_point m_start;
  };

  // The kernels timed since the last clear(), slowest first.
  std::vector<KernelTime> sorted() const;
  void clear() { m_times.clear(); }

 private:
  friend class Scope;
  std::map<std::string, KernelTime> m_times;
  int m_depth = 0;
};

}  // namespace trainlab

// Times the rest of the calling CpuBackend operation under `name` with the work and traffic `cost`
// (evaluated only when kernel timing is on).
#define TL_HOST_TIMED(name, cost)                                                                         \
  const HostKernelTimes::Scope tl_host_timed_(m_kernel_timing ? &m_times : nullptr, name,                \
                                              m_kernel_timing ? OpCost(cost) : OpCost{})
