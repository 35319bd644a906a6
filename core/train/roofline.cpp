#include "train/roofline.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "train/precision.h"
#include "util/error.h"

namespace trainlab {

std::vector<KernelTime> sum_kernel_times(const std::vector<StepMetrics>& steps) {
  std::map<std::string, KernelTime> by_name;
  for (const StepMetrics& m : steps)
    for (const KernelTime& k : m.kernel_times) {
      KernelTime& s = by_name[k.name];
      s.name = k.name;
      s.ms += k.ms;
      s.calls += k.calls;
      s.flops += k.flops;
      s.bytes += k.bytes;
    }
  std::vector<KernelTime> out;
  for (auto& [n, k] : by_name) out.push_back(k);
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}

Roofline build_roofline(const std::vector<KernelTime>& kernels, const Calibration& roofs, const std::string& precision) {
  const PrecisionPolicy& p = precision_policy(precision);
  Roofline r;
  r.device = roofs.device;
  r.precision = precision;
  r.peak_flops_per_s = roofs.peak_for(p.compute, p.matmul) * 1e12;
  r.peak_label = Calibration::precision_label(p.compute, p.matmul);
  r.bandwidth_bytes_per_s = roofs.bandwidth_bytes_per_s;
  r.peaks = roofs.peaks;
  double total_ms = 0.0;
  for (const KernelTime& k : kernels) total_ms += k.ms;
  for (const KernelTime& k : kernels) {
    RooflinePoint q;
    q.name = k.name;
    q.ms = k.ms;
    q.calls = k.calls;
    q.flops = k.flops;
    q.bytes = k.bytes;
    const double s = k.ms / 1e3;
    q.intensity = k.bytes > 0 ? k.flops / k.bytes : 0.0;
    q.flops_per_s = s > 0 ? k.flops / s : 0.0;
    q.bytes_per_s = s > 0 ? k.bytes / s : 0.0;
    q.time_share = total_ms > 0 ? k.ms / total_ms : 0.0;
    q.roof_flops_per_s = std::min(r.peak_flops_per_s, r.bandwidth_bytes_per_s * q.intensity);
    q.memory_bound = q.intensity < r.ridge();
    if (q.placed() && q.roof_flops_per_s > 0) q.of_roof = q.flops_per_s / q.roof_flops_per_s;
    else if (k.bytes > 0 && r.bandwidth_bytes_per_s > 0) q.of_roof = q.bytes_per_s / r.bandwidth_bytes_per_s;
    r.points.push_back(q);
  }
  return r;
}

Roofline run_roofline(const std::vector<StepMetrics>& steps, const std::string& precision) {
  const std::vector<KernelTime> kernels = sum_kernel_times(steps);
  if (kernels.empty())
    throw Error("the run has no kernel times: turn on device.kernel_timing (--set device.kernel_timing=true) for a roofline");
  const Calibration* roofs = nullptr;
  for (const StepMetrics& m : steps)
    if (m.roofline) roofs = &*m.roofline;
  if (!roofs)
    throw Error("the run recorded no measured roofs (device.calibration was off): run it with device.calibration cached");
  return build_roofline(kernels, *roofs, precision);
}

namespace {
std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}
}  // namespace

std::string calibration_table(const Calibration& c) {
  std::string out = "device      " + c.device + "\nsoftware    " + c.software + "\n";
  out += fmt("bandwidth   %.1f GB/s (copy, read + written)\n", c.bandwidth_bytes_per_s / 1e9);
  out += "precision   peak TFLOP/s   n\n";
  for (const CalibratedPeak& p : c.peaks) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-11s %12.4g   %lld\n", Calibration::precision_label(p.dtype, p.mode).c_str(),
                  p.tflops, static_cast<long long>(p.size));
    out += buf;
  }
  out += fmt("measured in %.2f s", c.seconds);
  out += c.from_cache ? "; read from " + c.cache_path + "\n" : c.cache_path.empty() ? "\n" : "; cached in " + c.cache_path + "\n";
  if (!c.note.empty()) out += "note: " + c.note + "\n";
  return out;
}

std::string roofline_table(const Roofline& r) {
  std::string out = "roofline of " + r.device + " (" + r.precision + ")\n";
  out += fmt("compute roof %.3g TFLOP/s (", r.peak_flops_per_s / 1e12) + r.peak_label + ", measured)";
  out += fmt(", memory roof %.1f GB/s, ridge %.2f FLOP/byte\n", r.bandwidth_bytes_per_s / 1e9, r.ridge());
  out += "kernel                  time %  calls     GFLOP/s     GB/s   FLOP/B  of roof  bound\n";
  for (const RooflinePoint& p : r.points) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-22s %6.1f %7lld %11.2f %8.2f %8.2f %7.1f%%  %s\n", p.name.c_str(), 100 * p.time_share,
                  static_cast<long long>(p.calls), p.flops_per_s / 1e9, p.bytes_per_s / 1e9, p.intensity,
                  100 * p.of_roof, p.bytes <= 0 ? "-" : p.memory_bound ? "memory" : "compute");
    out += buf;
  }
  return out;
}

}  // namespace trainlab
