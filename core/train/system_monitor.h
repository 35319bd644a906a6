// System metrics beside a run (issue 21): the host's CPU utilisation from /proc/stat and, where
// the run's device is an NVIDIA GPU and the driver's NVML library (libnvidia-ml.so.1) loads, the
// GPU's utilisation, power, temperature and memory. Sampled at a low rate (once a second) into
// the step that is due (StepMetrics::system); absent, not zero, where there is no such value
// (no /proc, no GPU, no driver). NVML is opened with dlopen, so a build runs without a driver.
#pragma once
#include <memory>
#include <optional>

#include "config/config.h"

namespace trainlab {

struct SystemSample {
  std::optional<double> cpu_util;         // % of all the host's cores busy since the last sample
  std::optional<double> gpu_util;         // % of the time a kernel ran (NVML), over its last period
  std::optional<double> gpu_power_w;      // board power draw
  std::optional<double> gpu_temp_c;       // core temperature
  std::optional<double> gpu_mem_used_bytes, gpu_mem_total_bytes;  // device-wide, all processes
  bool empty() const { return !cpu_util && !gpu_util && !gpu_power_w && !gpu_temp_c && !gpu_mem_used_bytes; }
  Json to_json() const;
  // The inverse; a field of the wrong type throws Error naming it ("system.cpu_util").
  static SystemSample from_json(const Json& j);
};

class SystemMonitor {
 public:
  // gpu_index < 0: the host only (a CPU run).
  explicit SystemMonitor(int gpu_index, double interval_s = 1.0);
  ~SystemMonitor();
  SystemMonitor(const SystemMonitor&) = delete;
  SystemMonitor& operator=(const SystemMonitor&) = delete;

  // A sample when interval_s has passed since the last one (`now_s` on any steady clock), else none.
  // The first call only takes the CPU counters' baseline.
  std::optional<SystemSample> sample_if_due(double now_s);
  bool has_gpu() const;

 private:
  struct Nvml;
  std::unique_ptr<Nvml> m_nvml;
  double m_interval_s, m_last_s = -1.0;
  long long m_cpu_busy = 0, m_cpu_total = 0;
  SystemSample sample();
};

}  // namespace trainlab
