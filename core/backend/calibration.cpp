#include "backend/calibration.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/bandwidth.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/safe_file.h"

#ifndef TRAINLAB_VERSION
#define TRAINLAB_VERSION "0.0.0"
#endif

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace trainlab {

namespace {

constexpr const char* kFormat = "trainlab-calibration";
constexpr int kFormatVersion = 1;
constexpr int64_t kMaxCacheBytes = 64 * 1024;

using Clock = std::chrono::steady_clock;

bool lists(const DeviceInfo& info, DType t) {
  return std::find(info.formats.begin(), info.formats.end(), t) != info.formats.end();
}

// TFLOP/s of y = x w^T on n x n operands of format `t` in `mode`: the fastest of `batches`
// batches of `calls` products after `warm` untimed ones.
double time_products(Backend& be, DType t, MatmulMode mode, int64_t n, int warm, int batches, int calls) {
  Tensor x = be.empty({n, n}, t, MemCategory::Workspace);
  Tensor w = be.empty({n, n}, t, MemCategory::Workspace);
  Tensor y = be.empty({n, n}, t, MemCategory::Workspace);
  be.fill(x, 0.5f);
  be.fill(w, 0.25f);
  for (int i = 0; i < warm; ++i) be.linear_forward(x, w, nullptr, Activation::None, y, nullptr, mode);
  be.synchronize();
  double best = 0.0;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) be.linear_forward(x, w, nullptr, Activation::None, y, nullptr, mode);
    be.synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * std::pow(static_cast<double>(n), 3.0) * calls / s);
  }
  return best / 1e12;
}

DType dtype_named(const std::string& s, const char* field) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2})
    if (s == dtype_name(t)) return t;
  throw Error(std::string("field '") + field + "': unknown format '" + s + "'");
}
MatmulMode mode_named(const std::string& s, const char* field) {
  for (MatmulMode m : {MatmulMode::Native, MatmulMode::Tf32, MatmulMode::Fp8})
    if (s == matmul_mode_name(m)) return m;
  throw Error(std::string("field '") + field + "': expected native, tf32 or fp8, got '" + s + "'");
}

double positive(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) throw Error(std::string("field '") + key + "': expected a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v <= 0) throw Error(std::string("field '") + key + "': expected a positive number");
  return v;
}
std::string text(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) throw Error(std::string("field '") + key + "': expected a string");
  return it->get<std::string>();
}

// Why the cached calibration `c` cannot stand for `info`'s device now; empty when it can.
std::string foreign(const Calibration& c, const DeviceInfo& info, int64_t size) {
  if (c.device != info.name) return "measured on '" + c.device + "'";
  if (c.software != info.software) return "measured with '" + c.software + "'";
  if (c.lab_version != lab_version()) return "measured by TrainLab " + c.lab_version;
  if (c.build != lab_build()) return "measured by another build of TrainLab (" + (c.build.empty() ? "unknown" : c.build) + ")";
  const std::vector<CalibratedPeak> want = calibration_plan(info);
  if (c.peaks.size() != want.size()) return "it lists other precisions";
  for (size_t i = 0; i < want.size(); ++i) {
    if (c.peaks[i].dtype != want[i].dtype || c.peaks[i].mode != want[i].mode) return "it lists other precisions";
    if (size > 0 && c.peaks[i].size != size) return "measured at another size";
  }
  return {};
}

std::string read_cache(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) throw Error("not a regular file");
  if (fs::file_size(path, ec) > static_cast<uintmax_t>(kMaxCacheBytes)) throw Error("larger than 64 KiB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw Error("cannot be read");
  return ss.str();
}

}  // namespace

const char* lab_version() { return TRAINLAB_VERSION; }

std::string lab_build() {
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&lab_build), &where) == 0 || !where.dli_fname) return {};
  std::error_code ec;
  const fs::path file = fs::canonical(where.dli_fname, ec);
  if (ec) return {};
  const auto size = fs::file_size(file, ec);
  if (ec) return {};
  const auto mtime = fs::last_write_time(file, ec);
  if (ec) return {};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::file_clock::to_sys(mtime).time_since_epoch()).count();
  return std::to_string(size) + " bytes, modified " + std::to_string(ns) + " ns after 1970";
}

std::string Calibration::precision_label(DType dtype, MatmulMode mode) {
  if (mode == MatmulMode::Fp8) return "fp8";
  if (dtype == DType::F32) return mode == MatmulMode::Tf32 ? "tf32" : "fp32";
  return dtype_name(dtype);
}

double Calibration::peak_for(DType dtype, MatmulMode mode) const {
  double native = 0.0;
  for (const CalibratedPeak& p : peaks) {
    if (p.dtype != dtype) continue;
    if (p.mode == mode) return p.tflops;
    if (p.mode == MatmulMode::Native) native = p.tflops;
  }
  return native;
}

CalibrationMode calibration_mode_from_name(const std::string& name) {
  if (name == "cached") return CalibrationMode::Cached;
  if (name == "measure") return CalibrationMode::Measure;
  if (name == "off") return CalibrationMode::Off;
  throw Error("device.calibration: expected cached, measure or off, got '" + name + "'");
}

std::vector<CalibratedPeak> calibration_plan(const DeviceInfo& info) {
  std::vector<CalibratedPeak> out = {{DType::F32, MatmulMode::Native}, {DType::F32, MatmulMode::Tf32}};
  if (lists(info, DType::BF16)) out.push_back({DType::BF16, MatmulMode::Native});
  if (lists(info, DType::F16)) out.push_back({DType::F16, MatmulMode::Native});
  if (lists(info, DType::F8E4M3) && lists(info, DType::BF16)) out.push_back({DType::F8E4M3, MatmulMode::Fp8});
  return out;
}

Calibration measure_calibration(Backend& be, int64_t size) {
  const auto t0 = Clock::now();
  const DeviceInfo info = be.info();
  const bool cpu = info.kind == DeviceKind::Cpu;
  Calibration c;
  c.device = info.name;
  c.software = info.software;
  c.lab_version = lab_version();
  c.build = lab_build();
  c.peaks = calibration_plan(info);
  for (CalibratedPeak& p : c.peaks) {
    // fp8 products take bf16 tensors (backend.h's MatmulMode::Fp8).
    const DType stored = p.mode == MatmulMode::Fp8 ? DType::BF16 : p.dtype;
    const bool cuda_cores = p.dtype == DType::F32 && p.mode == MatmulMode::Native;
    p.size = size > 0 ? size : cpu ? 512 : cuda_cores ? 4096 : 8192;
    p.tflops = cpu ? time_products(be, stored, p.mode, p.size, 1, 6, 1)
                   : time_products(be, stored, p.mode, p.size, 3, 3, 10);
    if (!(p.tflops > 0)) throw Error("calibration: the " + Calibration::precision_label(p.dtype, p.mode) +
                                     " products on " + info.name + " took no measurable time");
  }
  c.bandwidth_bytes_per_s = measure_copy_bandwidth(be).bytes_per_s;
  c.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return c;
}

std::string calibration_to_json(const Calibration& c) {
  Json peaks = Json::array();
  for (const CalibratedPeak& p : c.peaks)
    peaks.push_back({{"dtype", dtype_name(p.dtype)}, {"mode", matmul_mode_name(p.mode)}, {"tflops", p.tflops},
                     {"size", p.size}});
  const Json j = {{"format", kFormat},         {"version", kFormatVersion},
                  {"device", c.device},        {"software", c.software},
                  {"lab_version", c.lab_version}, {"build", c.build},
                  {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
                  {"seconds", c.seconds},      {"peaks", peaks}};
  return j.dump(2) + "\n";
}

Calibration parse_calibration(const std::string& text_in) {
  Json j;
  try {
    j = Json::parse(text_in);
  } catch (const Json::exception&) {
    throw Error("not valid JSON");
  }
  if (!j.is_object()) throw Error("expected a JSON object");
  if (text(j, "format") != kFormat) throw Error("field 'format': expected '" + std::string(kFormat) + "'");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kFormatVersion)
    throw Error("field 'version': expected " + std::to_string(kFormatVersion));
  Calibration c;
  c.device = text(j, "device");
  c.software = text(j, "software");
  c.lab_version = text(j, "lab_version");
  if (j.contains("build")) c.build = text(j, "build");  // absent in files of earlier builds: measured again
  c.bandwidth_bytes_per_s = positive(j, "bandwidth_bytes_per_s");
  c.seconds = positive(j, "seconds");
  const auto it = j.find("peaks");
  if (it == j.end() || !it->is_array() || it->empty()) throw Error("field 'peaks': expected a non-empty array");
  for (const Json& p : *it) {
    if (!p.is_object()) throw Error("field 'peaks': expected objects {dtype, mode, tflops, size}");
    CalibratedPeak q;
    q.dtype = dtype_named(text(p, "dtype"), "peaks.dtype");
    q.mode = mode_named(text(p, "mode"), "peaks.mode");
    q.tflops = positive(p, "tflops");
    q.size = static_cast<int64_t>(positive(p, "size"));
    c.peaks.push_back(q);
  }
  return c;
}

std::string calibration_file(const std::string& cache_dir, const DeviceInfo& info) {
  std::string slug;
  for (char ch : info.name) slug += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '-';
  return (fs::path(cache_dir) / ("calibration-" + info.id() + "-" + slug + ".json")).string();
}

namespace {
// The calibration cached at `path` when it stands for `info`'s device now (measured at `size`,
// any size when 0); otherwise nullopt and, in `why_not`, why a file there cannot be used.
std::optional<Calibration> load_cache(const std::string& path, const DeviceInfo& info, int64_t size, std::string& why_not) {
  if (path.empty() || !fs::exists(fs::symlink_status(path))) return std::nullopt;
  try {
    Calibration c = parse_calibration(read_cache(path));
    if (const std::string why = foreign(c, info, size); !why.empty()) {
      why_not = path + " was " + why + ": measured again";
      return std::nullopt;
    }
    c.from_cache = true;
    c.cache_path = path;
    return c;
  } catch (const Error& e) {
    why_not = path + " is not a valid calibration (" + e.what() + "): measured again";
    return std::nullopt;
  }
}
}  // namespace

std::optional<Calibration> cached_calibration(Backend& be, const std::string& cache_dir) {
  const std::string dir = cache_dir.empty() ? user_cache_dir() : cache_dir;
  std::string unused;
  return dir.empty() ? std::nullopt : load_cache(calibration_file(dir, be.info()), be.info(), 0, unused);
}

namespace {
// Why a measurement is due, in a user's words.
std::string plain_reason(const std::string& path, const DeviceInfo& info, CalibrationMode mode, double& seconds) {
  if (mode == CalibrationMode::Measure) return "device.calibration is set to measure";
  if (path.empty()) return "there is no cache folder to keep it in (neither XDG_CACHE_HOME nor HOME is set)";
  if (!fs::exists(fs::symlink_status(path))) return "the first run on this device";
  try {
    const Calibration c = parse_calibration(read_cache(path));
    seconds = c.seconds;
    if (c.device != info.name || c.software != info.software) return "its driver or math library changed";
    if (c.lab_version != lab_version()) return "TrainLab was updated since the last measurement";
    if (c.build != lab_build()) return "TrainLab was rebuilt since the last measurement";
    return "the last measurement lists other precisions";
  } catch (const Error&) {
    return "the last measurement could not be read";
  }
}
}  // namespace

std::string calibration_pending_note(Backend& be, CalibrationMode mode, const std::string& cache_dir) {
  if (mode == CalibrationMode::Off) return {};
  const DeviceInfo info = be.info();
  const std::string dir = cache_dir.empty() ? user_cache_dir() : cache_dir;
  const std::string path = dir.empty() ? std::string() : calibration_file(dir, info);
  std::string unused;
  if (mode == CalibrationMode::Cached && load_cache(path, info, 0, unused)) return {};
  // A few seconds on two CPU cores (the products of each format at n = 512), about 0.5 s on a GPU.
  double seconds = info.kind == DeviceKind::Cpu ? 2.0 : 1.0;
  const std::string why = plain_reason(path, info, mode, seconds);
  const std::string what = info.kind == DeviceKind::Cpu ? "CPU" : "GPU";
  const long shown = std::max(1L, std::lround(seconds));
  return "Measuring this " + what + "'s speed once (about " + std::to_string(shown) +
         " s) for MFU and the roofline: " + why + ". The run's own time leaves it out.";
}

Calibration calibrate(Backend& be, CalibrationMode mode, const std::string& cache_dir_in, int64_t size) {
  if (mode == CalibrationMode::Off) throw Error("calibrate: device.calibration is off");
  const DeviceInfo info = be.info();
  const std::string dir = cache_dir_in.empty() ? user_cache_dir() : cache_dir_in;
  static std::mutex mu;  // one measurement at a time in a process (the app's runs, rank threads)
  std::lock_guard<std::mutex> lock(mu);
  std::string note;
  const std::string path = dir.empty() ? std::string() : calibration_file(dir, info);
  if (mode == CalibrationMode::Cached)
    if (std::optional<Calibration> c = load_cache(path, info, size, note)) return *c;
  Calibration c = measure_calibration(be, size);
  c.note = note;
  if (path.empty()) {
    c.note += std::string(c.note.empty() ? "" : "; ") + "no cache folder (neither XDG_CACHE_HOME nor HOME is set)";
  } else {
    try {
      fs::create_directories(dir);
      write_file_atomic(path, calibration_to_json(c));
      c.cache_path = path;
    } catch (const std::exception& e) {
      c.note += std::string(c.note.empty() ? "" : "; ") + "not cached: " + e.what();
    }
  }
  return c;
}

}  // namespace trainlab
