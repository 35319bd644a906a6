#include "train/run_record.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "config/run_defaults.h"
#include "train/run_checkpoint.h"
#include "train/step_columns.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {

constexpr const char* kLockName = "run.lock";
constexpr std::array<const char*, 8> kRunFiles = {"config.json",       "metrics.jsonl",           "summary.json",
                                                  "model.safetensors", "model.quant.safetensors", "compression.json",
                                                  "notes.json",  // train/run_notes.h
                                                  "steps.bin"};  // train/step_columns.h
const std::string kChooseAnother = "choose another folder with --out or run.out";

Error in_use(const std::string& dir) {
  return Error("run folder '" + dir +
               "' is in use by another run (its run.lock is held); wait for that run to end or " + kChooseAnother);
}

bool lock_is_held(const std::string& lock_path) {
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // also releases the shared lock when it was taken
  return held;
}

// summary.json's status, or "" (none, unreadable, or not a small regular file).
std::string summary_status(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::is_regular_file(st) || fs::file_size(path, ec) > (1u << 20) || ec) return {};
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> ignored;
  const Json s = parse_summary_json(bytes, path, ignored);
  return s.is_object() && s.contains("status") ? s["status"].get<std::string>() : std::string();
}

// The folder rules of run_record.h for `mode`, on what `info` found. `locked`: this writer holds
// the folder's lock (so the lock's being held says nothing).
void check_folder(const std::string& dir, const RunFolderInfo& info, RunOpenMode mode, bool locked) {
  if (!info.link.empty())
    throw Error(dir + "/" + info.link + " is a symbolic link: a run does not write through links in its folder; " +
                "remove the link or " + kChooseAnother);
  if (!info.exists) return;
  if (info.in_use && !locked) throw in_use(dir);
  if (mode == RunOpenMode::Resume) {
    if (!info.holds_run)
      throw Error("run folder '" + dir + "' holds no run to resume (no run.lock with a config.json)");
    if (info.status == "completed")
      throw Error("run folder '" + dir + "' holds a completed run: there is nothing to resume");
    return;
  }
  if (!info.foreign.empty())
    throw Error(
        "run folder '" + dir + "' holds " + info.foreign +
        ", which is not a file a run wrote there; a run never writes into a folder with other files: choose a new "
        "or empty folder with --out or run.out");
  if (mode == RunOpenMode::New && info.holds_run)
    throw Error("run folder '" + dir + "' already holds a run (" +
                (info.status.empty() ? std::string("unfinished: no summary.json") : "status " + info.status) +
                "); give --overwrite to replace it, or " + kChooseAnother);
}

// Overwrite: removes the run's own files (not run.lock, which this writer holds).
void clear_run_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kLockName || !is_run_file(name)) continue;
    std::error_code rec;
    fs::remove(e.path(), rec);
    if (rec) throw Error(e.path().string() + ": cannot remove the old run's file (" + rec.message() + ")");
  }
  if (ec) throw Error("run folder '" + dir + "' cannot be read (" + ec.message() + ")");
}

// Creates `dir` when missing and takes its lock (run.lock, flock LOCK_EX); returns the lock's fd.
int lock_run_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("run folder '" + dir + "' cannot be created (" + (ec ? ec.message() : "not a folder") + "); " +
                kChooseAnother);
  const std::string lock = dir + "/" + kLockName;
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) throw_file_error(lock, "", ELOOP);
    throw Error("run folder '" + dir + "' is not writable (" + std::strerror(errno) + "); " + kChooseAnother);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw in_use(dir);
  }
  return fd;
}

}  // namespace

bool is_run_file(const std::string& name) {
  std::string base = name;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".part") == 0) base.resize(base.size() - 5);
  if (base == kLockName) return base == name;
  // Resume's checkpoint (train/run_checkpoint.h): checkpoint.json and checkpoint-<step>.safetensors.
  if (base == "checkpoint.json") return true;
  const std::string pre = "checkpoint-", suf = ".safetensors";
  if (base.size() > pre.size() + suf.size() && base.compare(0, pre.size(), pre) == 0 &&
      base.compare(base.size() - suf.size(), suf.size(), suf) == 0 &&
      std::all_of(base.begin() + pre.size(), base.end() - suf.size(), [](char c) { return c >= '0' && c <= '9'; }))
    return true;
  return std::any_of(kRunFiles.begin(), kRunFiles.end(), [&](const char* f) { return base == f; });
}

RunFolderInfo inspect_run_folder(const std::string& dir) {
  RunFolderInfo info;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);  // the folder the user named may itself be a link
  if (!fs::exists(st)) return info;
  info.exists = true;
  if (!fs::is_directory(st)) return info;  // RunRecord says it cannot be made
  const bool marked = fs::exists(fs::symlink_status(fs::path(dir) / kLockName, ec));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  if (ec) throw Error("run folder '" + dir + "' cannot be read (" + ec.message() + "); " + kChooseAnother);
  std::sort(names.begin(), names.end());
  bool run_files = false;
  for (const auto& name : names) {
    const fs::file_status ls = fs::symlink_status(fs::path(dir) / name, ec);
    const bool own = marked && is_run_file(name);
    if (own && fs::is_symlink(ls)) {
      if (info.link.empty()) info.link = name;
    } else if (own && fs::is_regular_file(ls)) {
      run_files = run_files || name == "config.json" || name == "metrics.jsonl" || name == "summary.json";
    } else if (info.foreign.empty()) {
      info.foreign = name;
    }
  }
  info.holds_run = marked && run_files;
  if (marked) info.in_use = lock_is_held(dir + "/" + kLockName);
  if (info.holds_run) info.status = summary_status(dir + "/summary.json");
  return info;
}

void clear_run_folder(const std::string& dir) {
  check_folder(dir, inspect_run_folder(dir), RunOpenMode::Overwrite, false);
  const int fd = lock_run_folder(dir);
  try {
    check_folder(dir, inspect_run_folder(dir), RunOpenMode::Overwrite, true);
    clear_run_files(dir);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

RunRecord::RunRecord(const std::string& dir, const Config& config, RunOpenMode mode) : m_dir(dir) {
  if (mode == RunOpenMode::Resume)
    throw Error("run folder '" + dir + "': a run is resumed from its checkpoint (RunRecord(dir, ResumeAt))");
  open(&config, mode, 0);
}

RunRecord::RunRecord(const std::string& dir, ResumeAt at) : m_dir(dir) { open(nullptr, RunOpenMode::Resume, at.step); }

void RunRecord::open(const Config* config, RunOpenMode mode, long resume_step) {
  const std::string& dir = m_dir;
  check_folder(dir, inspect_run_folder(dir), mode, false);  // refuse before creating anything
  m_lock_fd = lock_run_folder(dir);
  try {
    check_folder(dir, inspect_run_folder(dir), mode, true);  // again, now that no other writer can change it
    if (mode == RunOpenMode::Overwrite) clear_run_files(dir);
    if (mode == RunOpenMode::Resume) {
      if (::unlink((dir + "/summary.json").c_str()) != 0 && errno != ENOENT)
        throw_file_error(dir + "/summary.json", "cannot remove", errno);
      m_resumed_metrics_step = truncate_metrics(dir + "/metrics.jsonl", resume_step);
      // A record written before steps.bin has none: its steps are all in metrics.jsonl.
      if (const long rows = truncate_step_columns(dir + "/steps.bin", resume_step); rows > 0)
        m_resumed_metrics_step = rows;
    }
    m_metrics = std::make_unique<AppendFile>(dir + "/metrics.jsonl", mode != RunOpenMode::Resume);
    m_columns = std::make_unique<StepColumnsWriter>(dir + "/steps.bin", mode != RunOpenMode::Resume);
    if (mode != RunOpenMode::Resume)
      write_file_atomic(dir + "/config.json",
                        recorded_config(*config).dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  } catch (...) {
    ::close(m_lock_fd);
    m_lock_fd = -1;
    throw;
  }
}

RunRecord::~RunRecord() {
  m_columns.reset();  // its last rows, written while the folder is still locked
  if (m_lock_fd >= 0) ::close(m_lock_fd);  // releases the flock
}

void RunRecord::append(const StepMetrics& m) {
  m_columns->add(m);
  if (const std::string line = m_lines.extras_line(m); !line.empty()) m_metrics->append(line + "\n");
}

void RunRecord::flush() { m_columns->flush(); }

void RunRecord::write_summary(const RunSummary& s) {
  // The summary is written even when the last block cannot be (a full disk): it says why the run
  // ended; the block's error is thrown after it.
  std::optional<Error> unflushed;
  try {
    flush();
  } catch (const Error& e) {
    unflushed = e;
  }
  write_file_atomic(m_dir + "/summary.json", s.to_json().dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  if (unflushed) throw *unflushed;
}

std::string RunRecord::default_dir(const std::string& root, const std::string& tag) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string base = root + "/" + stamp + "-" + tag;
  std::string d = base;
  for (int i = 2; fs::exists(d); ++i) d = base + "-" + std::to_string(i);
  return d;
}

}  // namespace trainlab
