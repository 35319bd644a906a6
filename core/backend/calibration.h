// The device's measured roofs: peak matrix-product FLOP/s per precision it computes in and its
// streaming bandwidth, measured in a short run at start-up and cached on disk, so that MFU and the
// roofline compare a run with what this device (and this driver, BLAS and lab version) does rather
// than with a datasheet. The datasheet (DeviceInfo::peak_tflops) stays the planner's theory.
//
// Peaks: y[n, n] = x[n, n] w[n, n]^T through the backend's own linear_forward (the product every
// layer uses) at a size that is compute-bound (GPU n = 8192, 4096 for fp32 on the CUDA cores; CPU
// n = 512), after untimed calls (cuBLASLt's choice, fp8 scales); the fastest of a few timed
// batches counts, 2 n^3 FLOPs a call. Precisions: fp32 (native and tf32), bf16, fp16 where the
// device stores them, and fp8 (bf16 tensors in MatmulMode::Fp8) where it lists an fp8 format. On
// the CPU each is the lab's own emulation of the format, which is what a run there computes at.
// Bandwidth: bandwidth.h's copy. About 0.5 s on an H100/H200, a few seconds on two CPU cores.
//
// Cache: <user_cache_dir()>/calibration-<device>.json (JSON, written atomically). A file that
// cannot be read, is not valid, or was measured for another device, driver/BLAS or lab version is
// measured again and rewritten, never trusted; Calibration::note says why.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace trainlab {

struct CalibratedPeak {
  DType dtype = DType::F32;
  MatmulMode mode = MatmulMode::Native;
  double tflops = 0.0;
  int64_t size = 0;  // n of the n x n x n products timed
};

struct Calibration {
  std::string device;    // DeviceInfo::name
  std::string software;  // DeviceInfo::software
  std::string lab_version;
  std::string build;  // lab_build(): a rebuilt or reinstalled lab measures again
  std::vector<CalibratedPeak> peaks;
  double bandwidth_bytes_per_s = 0.0;
  double seconds = 0.0;     // how long the measurement took
  bool from_cache = false;  // read from the cache file rather than measured now
  std::string cache_path;   // where it was read or written ("" when not cached)
  std::string note;         // why a cache file was not used, or could not be written

  // The measured peak (TFLOP/s) of products on `dtype` in `mode`, with DeviceInfo::peak_for's
  // fall-back to the format's Native peak; 0 when not measured.
  double peak_for(DType dtype, MatmulMode mode) const;
  // The precisions' label: "fp32", "tf32", "bf16", "fp16", "fp8".
  static std::string precision_label(DType dtype, MatmulMode mode);
};

enum class CalibrationMode { Cached, Measure, Off };
// "cached", "measure", "off" (the config key device.calibration); throws Error naming the choices.
CalibrationMode calibration_mode_from_name(const std::string& name);

// The (format, mode) pairs measured on a device with `info`.
std::vector<CalibratedPeak> calibration_plan(const DeviceInfo& info);
// Measures now (no cache). `size` 0: the defaults above (tests pass a small one).
Calibration measure_calibration(Backend& be, int64_t size = 0);
// The calibration of `be`'s device: from the cache file in `cache_dir` (empty: user_cache_dir())
// when it is valid and `mode` is Cached, else measured and written there. Mode Off throws.
Calibration calibrate(Backend& be, CalibrationMode mode, const std::string& cache_dir = {}, int64_t size = 0);

// What a user reads before calibrate(be, mode) measures: "Measuring this CPU's speed once (about
// 2 s) for MFU and the roofline: the first run on this device. The run's own time leaves it out."
// In plain words, without paths or sizes (Calibration::note keeps those for `trainlab-cli
// calibrate`); the time is the last measurement's when a file holds one. Empty when the cache
// serves (mode Cached and a valid file) or the mode is Off.
std::string calibration_pending_note(Backend& be, CalibrationMode mode, const std::string& cache_dir = {});

// The valid calibration in the cache for `be`'s device (any size), without measuring; nullopt
// when there is none (no file, another device, driver or build, a damaged file).
std::optional<Calibration> cached_calibration(Backend& be, const std::string& cache_dir = {});

// The cache file's text and its reader (exposed for tests). parse_calibration throws Error
// naming what is wrong; it does not check that the file belongs to a device (calibrate does).
std::string calibration_to_json(const Calibration& c);
Calibration parse_calibration(const std::string& text);
std::string calibration_file(const std::string& cache_dir, const DeviceInfo& info);
// The lab version compiled in (the cache's key).
const char* lab_version();
// The build of the library this code is in: its file's size and modification time ("" where
// they cannot be read). The version alone stays the same across builds, and a build's products
// may be faster or slower (a new kernel, the CPU's emulation): a cache measured by another build
// would give wrong MFUs, above 100 % even.
std::string lab_build();

}  // namespace trainlab
