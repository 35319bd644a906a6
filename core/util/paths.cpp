#include "util/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "util/error.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {
std::string exe_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}
}  // namespace

std::vector<std::string> resource_roots() {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("TRAINLAB_DATA_DIR")) roots.emplace_back(env);
  const std::string exe = exe_dir();
  if (!exe.empty()) roots.push_back((fs::path(exe) / ".." / "share" / "trainlab").lexically_normal().string());
#ifdef TRAINLAB_SOURCE_RESOURCE_DIR
  roots.emplace_back(TRAINLAB_SOURCE_RESOURCE_DIR);
#endif
  roots.emplace_back("resources");
  return roots;
}

std::string find_resource(const std::string& relative) {
  std::string looked;
  for (const auto& r : resource_roots()) {
    const fs::path p = fs::path(r) / relative;
    if (fs::exists(p)) return p.string();
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  throw Error("cannot find " + relative + " (looked in " + looked + "); set TRAINLAB_DATA_DIR to the folder holding data/");
}

std::string user_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return (fs::path(xdg) / "trainlab").string();
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') return (fs::path(home) / ".cache" / "trainlab").string();
  return {};
}

std::string weights_file_of(const std::string& run_dir_or_file) {
  std::error_code ec;
  if (run_dir_or_file.empty() || !std::filesystem::is_directory(run_dir_or_file, ec)) return run_dir_or_file;
  const std::filesystem::path weights = std::filesystem::path(run_dir_or_file) / "model.safetensors";
  if (std::filesystem::exists(weights, ec)) return weights.string();
  return run_dir_or_file;
}

}  // namespace trainlab
