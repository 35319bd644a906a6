// The readers of run_record.h: load_run and the byte-level parsers of metrics.jsonl and
// summary.json. Bad input gives a warning and is skipped, never a crash or a silent loss of the
// rows after it; no message echoes bytes of the file.
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "train/run_record.h"
#include "util/error.h"

namespace trainlab {

namespace {

constexpr size_t kMaxWarnings = 20;                     // then one line counts the rest
constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;    // config.json, summary.json
constexpr int64_t kMaxMetricsBytes = int64_t{4} << 30;  // metrics.jsonl

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r") == std::string_view::npos; }

// Reads a regular file of at most `limit` bytes; false with `why` set when it cannot.
bool read_file(const std::string& path, int64_t limit, std::string& out, std::string& why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    why = "missing";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return false;
  }
  if (st.st_size > limit) {
    why = "larger than " + std::to_string(limit >> 20) + " MiB";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened";
    return false;
  }
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    why = "cannot be read";
    return false;
  }
  return true;
}

}  // namespace

MetricsRead parse_metrics_jsonl(std::string_view bytes, const std::string& origin) {
  MetricsRead r;
  size_t bad = 0;
  auto warn = [&](long line, const std::string& what) {
    if (++bad <= kMaxWarnings)
      r.warnings.push_back(origin + " line " + std::to_string(line) + ": " + what + "; skipped");
  };
  size_t pos = 0;
  long line = 0;
  while (pos < bytes.size()) {
    const size_t nl = bytes.find('\n', pos);
    const bool torn = nl == std::string_view::npos;  // no newline after it: a write cut short
    const std::string_view text = bytes.substr(pos, torn ? std::string_view::npos : nl - pos);
    pos = torn ? bytes.size() : nl + 1;
    ++line;
    if (blank(text)) continue;
    Json j;
    try {
      j = Json::parse(text.begin(), text.end());
    } catch (const Json::exception&) {
      if (!torn) warn(line, "not valid JSON");
      continue;
    }
    try {
      r.steps.push_back(StepMetrics::from_json(j));
    } catch (const Error& e) {
      if (!torn) warn(line, std::string("not a metrics line (") + e.what() + ")");
    }
  }
  if (bad > kMaxWarnings)
    r.warnings.push_back(origin + ": " + std::to_string(bad - kMaxWarnings) + " more bad lines skipped");
  return r;
}

Json parse_summary_json(std::string_view bytes, const std::string& origin, std::vector<std::string>& warnings) {
  Json j;
  try {
    j = Json::parse(bytes.begin(), bytes.end());
  } catch (const Json::exception&) {
    warnings.push_back(origin + ": not valid JSON; ignored (the run shows as unfinished)");
    return nullptr;
  }
  if (!j.is_object()) {
    warnings.push_back(origin + ": not a JSON object; ignored (the run shows as unfinished)");
    return nullptr;
  }
  auto drop = [&](const std::string& key, const char* expected) {
    warnings.push_back(origin + ": field '" + key + "': expected " + expected + "; ignored");
    j.erase(key);
  };
  for (const char* k : {"status", "message", "device", "precision", "run_dir"})
    if (j.contains(k) && !j[k].is_string()) drop(k, "a string");
  for (const char* k : {"steps", "epochs", "params", "final_train_loss", "test_accuracy", "test_loss", "samples_per_s",
                        "wall_s", "skipped_steps"})
    if (j.contains(k) && !j[k].is_number() && !j[k].is_null()) drop(k, "a number or null");
  if (j.contains("peak_bytes")) {
    const Json& p = j["peak_bytes"];
    bool ok = p.is_object();
    if (ok)
      for (const auto& v : p) ok = ok && v.is_number();
    if (!ok) drop("peak_bytes", "an object of numbers");
  }
  return j;
}

LoadedRun load_run(const std::string& dir) {
  LoadedRun r;
  r.dir = dir;
  std::string bytes, why;
  const std::string config = dir + "/config.json";
  if (!read_file(config, kMaxJsonBytes, bytes, why))
    throw Error(dir + ": not a run folder (config.json " + (why == "missing" ? std::string("is missing") : why) + ")");
  try {
    r.config = Json::parse(bytes);
  } catch (const Json::parse_error& e) {
    throw Error(config + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const Json::exception&) {
    throw Error(config + ": not valid JSON");
  }
  if (!r.config.is_object()) throw Error(config + ": expected a JSON object of config sections");

  const std::string metrics = dir + "/metrics.jsonl";
  if (read_file(metrics, kMaxMetricsBytes, bytes, why)) {
    MetricsRead m = parse_metrics_jsonl(bytes, metrics);
    r.steps = std::move(m.steps);
    r.warnings = std::move(m.warnings);
  } else if (why != "missing") {
    r.warnings.push_back(metrics + ": " + why + "; no steps read");
  }

  const std::string summary = dir + "/summary.json";
  if (read_file(summary, kMaxJsonBytes, bytes, why))
    r.summary = parse_summary_json(bytes, summary, r.warnings);
  else if (why != "missing")
    r.warnings.push_back(summary + ": " + why + "; ignored");
  return r;
}

}  // namespace trainlab
