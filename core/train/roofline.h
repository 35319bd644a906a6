// The roofline of a run (Williams, Waterman and Patterson 2009): each timed kernel placed by its
// arithmetic intensity I = FLOPs / bytes (backend/op_cost.h's counts, KernelTime) against the
// device's two measured roofs (backend/calibration.h): the memory roof B * I (B the streaming
// bandwidth) and the compute roof P of the run's precision; a kernel's roof is min(P, B * I) and
// its distance to it is achieved / roof. trainlab-cli (roofline, train --kernel-timing) and the
// app's View > Roofline and report all read this one function, so they show the same numbers.
#pragma once
#include <string>
#include <vector>

#include "backend/calibration.h"
#include "train/metrics.h"

namespace trainlab {

struct RooflinePoint {
  std::string name;
  double ms = 0.0;  // over the steps summed
  int64_t calls = 0;
  double flops = 0.0, bytes = 0.0;
  double intensity = 0.0;     // FLOPs / byte (0: no bytes counted)
  double flops_per_s = 0.0;   // achieved
  double bytes_per_s = 0.0;   // achieved
  double time_share = 0.0;    // of all the timed kernels' time, 0..1
  double roof_flops_per_s = 0.0;  // min(P, B * I)
  double of_roof = 0.0;       // achieved / roof, 0..1 (more where the counts undercount the work)
  bool memory_bound = false;  // I below the ridge P / B
  // Placed on the plot: both counts known (a copy does no FLOPs: listed with its bandwidth only).
  bool placed() const { return flops > 0 && bytes > 0 && ms > 0; }
};

struct Roofline {
  std::string device;
  std::string precision;      // the run's precision name
  double peak_flops_per_s = 0.0;   // P of the run's precision (its label: peak_label)
  std::string peak_label;
  double bandwidth_bytes_per_s = 0.0;  // B
  std::vector<CalibratedPeak> peaks;   // every measured compute roof, for the plot
  std::vector<RooflinePoint> points;   // slowest first
  double ridge() const { return bandwidth_bytes_per_s > 0 ? peak_flops_per_s / bandwidth_bytes_per_s : 0.0; }
};

// The kernel times of `steps` summed by name (ms, calls, flops, bytes).
std::vector<KernelTime> sum_kernel_times(const std::vector<StepMetrics>& steps);
// The roofline of `kernels` against `roofs`, for a run in `precision` (train/precision.h's name).
Roofline build_roofline(const std::vector<KernelTime>& kernels, const Calibration& roofs, const std::string& precision);
// The roofline of a run's steps: their kernels summed, against the last roofs recorded. Throws
// Error when no step has kernel times ("turn on device.kernel_timing") or no roofs were recorded.
Roofline run_roofline(const std::vector<StepMetrics>& steps, const std::string& precision);
// A plain-text table: the roofs, then one line a kernel.
std::string roofline_table(const Roofline& r);
// The measured roofs as a table (trainlab-cli calibrate).
std::string calibration_table(const Calibration& c);

}  // namespace trainlab
