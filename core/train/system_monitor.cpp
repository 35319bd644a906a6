#include "train/system_monitor.h"

#include <dlfcn.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.h"

namespace trainlab {

namespace {

// The busy and total jiffies of all cores (the "cpu" line of /proc/stat); false without /proc.
bool read_cpu_times(long long& busy, long long& total) {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("cpu ", 0) != 0) return false;
  std::istringstream f(line.substr(4));
  long long v[8] = {};  // user nice system idle iowait irq softirq steal
  for (auto& x : v)
    if (!(f >> x)) return false;
  total = 0;
  for (auto x : v) total += x;
  busy = total - v[3] - v[4];
  return true;
}

void put(Json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}

std::optional<double> get(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Error(std::string("field 'system.") + key + "': expected a number");
  return it->get<double>();
}

}  // namespace

Json SystemSample::to_json() const {
  Json j = Json::object();
  put(j, "cpu_util", cpu_util);
  put(j, "gpu_util", gpu_util);
  put(j, "gpu_power_w", gpu_power_w);
  put(j, "gpu_temp_c", gpu_temp_c);
  put(j, "gpu_mem_used_bytes", gpu_mem_used_bytes);
  put(j, "gpu_mem_total_bytes", gpu_mem_total_bytes);
  return j;
}

SystemSample SystemSample::from_json(const Json& j) {
  if (!j.is_object()) throw Error("field 'system': expected an object of system metrics");
  SystemSample s;
  s.cpu_util = get(j, "cpu_util");
  s.gpu_util = get(j, "gpu_util");
  s.gpu_power_w = get(j, "gpu_power_w");
  s.gpu_temp_c = get(j, "gpu_temp_c");
  s.gpu_mem_used_bytes = get(j, "gpu_mem_used_bytes");
  s.gpu_mem_total_bytes = get(j, "gpu_mem_total_bytes");
  return s;
}

// The few NVML entry points used, with the C types of nvml.h (a stable ABI: these _v2 names and
// structs have not changed since CUDA 5): nvmlReturn_t is an int (0: success), nvmlDevice_t an
// opaque pointer, nvmlUtilization_t {gpu, memory} in %, nvmlMemory_t {total, free, used} in bytes.
struct SystemMonitor::Nvml {
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  using Device = void*;
  void* lib = nullptr;
  Device device = nullptr;
  int (*shutdown)() = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*power_mw)(Device, unsigned int*) = nullptr;
  int (*temperature)(Device, int, unsigned int*) = nullptr;  // sensor 0: NVML_TEMPERATURE_GPU
  int (*memory)(Device, Memory*) = nullptr;

  // Null when the library, a symbol, the driver or the device is missing.
  static std::unique_ptr<Nvml> open(int index) {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    auto n = std::make_unique<Nvml>();
    n->lib = lib;
    auto sym = [&](const char* name) { return ::dlsym(lib, name); };
    auto init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
    auto by_index = reinterpret_cast<int (*)(unsigned int, Device*)>(sym("nvmlDeviceGetHandleByIndex_v2"));
    n->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
    n->utilization = reinterpret_cast<int (*)(Device, Utilization*)>(sym("nvmlDeviceGetUtilizationRates"));
    n->power_mw = reinterpret_cast<int (*)(Device, unsigned int*)>(sym("nvmlDeviceGetPowerUsage"));
    n->temperature = reinterpret_cast<int (*)(Device, int, unsigned int*)>(sym("nvmlDeviceGetTemperature"));
    n->memory = reinterpret_cast<int (*)(Device, Memory*)>(sym("nvmlDeviceGetMemoryInfo"));
    if (!init || !by_index || !n->shutdown || init() != 0) {
      ::dlclose(lib);
      return nullptr;
    }
    if (by_index(static_cast<unsigned int>(index), &n->device) != 0) {
      n->shutdown();
      ::dlclose(lib);
      return nullptr;
    }
    return n;
  }
  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) ::dlclose(lib);
  }
  void fill(SystemSample& s) const {
    Utilization u{};
    if (utilization && utilization(device, &u) == 0) s.gpu_util = u.gpu;
    unsigned int mw = 0, c = 0;
    if (power_mw && power_mw(device, &mw) == 0) s.gpu_power_w = mw / 1000.0;
    if (temperature && temperature(device, 0, &c) == 0) s.gpu_temp_c = c;
    Memory m{};
    if (memory && memory(device, &m) == 0) {
      s.gpu_mem_used_bytes = static_cast<double>(m.used);
      s.gpu_mem_total_bytes = static_cast<double>(m.total);
    }
  }
};

SystemMonitor::SystemMonitor(int gpu_index, double interval_s) : m_interval_s(interval_s) {
  if (gpu_index >= 0) m_nvml = Nvml::open(gpu_index);
}

SystemMonitor::~SystemMonitor() = default;

bool SystemMonitor::has_gpu() const { return m_nvml != nullptr; }

SystemSample SystemMonitor::sample() {
  SystemSample s;
  long long busy = 0, total = 0;
  if (read_cpu_times(busy, total)) {
    if (m_cpu_total > 0 && total > m_cpu_total)
      s.cpu_util = 100.0 * static_cast<double>(busy - m_cpu_busy) / static_cast<double>(total - m_cpu_total);
    m_cpu_busy = busy;
    m_cpu_total = total;
  }
  if (m_nvml) m_nvml->fill(s);
  return s;
}

std::optional<SystemSample> SystemMonitor::sample_if_due(double now_s) {
  if (m_last_s < 0) {
    m_last_s = now_s;
    sample();  // the CPU counters' baseline
    return std::nullopt;
  }
  if (now_s - m_last_s < m_interval_s) return std::nullopt;
  m_last_s = now_s;
  SystemSample s = sample();
  if (s.empty()) return std::nullopt;
  return s;
}

}  // namespace trainlab
