// The readers of run_record.h: load_run and the byte-level parsers of metrics.jsonl and
// summary.json. Bad input gives a warning and is skipped, never a crash or a silent loss of the
// rows after it; no message echoes bytes of the file.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <charconv>
#include <fstream>
#include <iterator>

#include "config/json_text.h"
#include "train/run_record.h"
#include "train/step_columns.h"
#include "util/error.h"
#include "util/huge_pages.h"

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
  // One read of the size stat gave (a stream iterator goes a character at a time: seconds for a
  // long run's record), then whatever the file grew by since.
  out.clear();
  out.reserve(static_cast<size_t>(st.st_size));
  advise_huge_pages(out.data(), out.capacity());
  out.resize(static_cast<size_t>(st.st_size));
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  if (in.good()) out.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    why = "cannot be read";
    return false;
  }
  return true;
}

}  // namespace

MetricsRead parse_metrics_jsonl(std::string_view bytes, const std::string& origin) {
  return parse_metrics_jsonl(bytes, origin, 0);
}

namespace {

struct Line {
  std::string_view text;
  long number = 0;  // 1-based line number in the file
  bool torn = false;
};

// The number after `key` ("\"loss\":") in a line's text; NaN when absent or not a number
// (std::from_chars: no locale, no copy).
double quick_number(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return std::nan("");
  double v = 0;
  const char* first = text.data() + at + key.size();
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), v);
  return ec == std::errc() && end != first ? v : std::nan("");
}

// What a thinned read does with a line it may pass over.
enum class LineUse { Plain, Carry, Whole };

// One scan of the line: a plain step (the per-step scalars: "step", "epoch", "loss",
// "train_accuracy", "samples_per_s", "step_ms", "wall_s" and maybe "lr": at most 16 quotes, no
// nested object) may be passed over; one that also changes a numeric slow field (lr, loss_scale,
// skipped_steps) may be passed over with those carried; anything else (an event, validation,
// system or kernel values, memory, precision, no finite loss) is read whole.
LineUse line_use(std::string_view text) {
  int quotes = 0, nested = 0;
  for (const char c : text) {
    quotes += c == '"';
    nested += c == '[' || c == '{';
  }
  if (nested > 1 || !std::isfinite(quick_number(text, "\"loss\":"))) return LineUse::Whole;
  if (quotes <= 14) return LineUse::Plain;
  if (quotes == 16 && text.find("\"lr\":") != std::string_view::npos) return LineUse::Carry;  // a schedule's lr
  for (const char* k : {"\"event\":", "\"val_", "\"precision\":", "\"device_", "\"runtime_", "\"sparsity\":",
                        "\"bits_per_weight\":", "\"grad_norm\":", "\"mfu\":", "\"skipped\":"})
    if (text.find(k) != std::string_view::npos) return LineUse::Whole;
  return LineUse::Carry;
}

}  // namespace

MetricsRead parse_metrics_jsonl(std::string_view bytes, const std::string& origin, size_t max_rows) {
  std::vector<Line> lines;
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t nl = bytes.find('\n', pos);
    const bool torn = nl == std::string_view::npos;
    const std::string_view text = bytes.substr(pos, torn ? std::string_view::npos : nl - pos);
    pos = torn ? bytes.size() : nl + 1;
    lines.push_back({text, static_cast<long>(lines.size()) + 1, torn});
  }
  std::vector<LineUse> use(lines.size(), LineUse::Whole);
  if (max_rows >= 2 && lines.size() > max_rows) {
    const size_t bucket = (lines.size() + max_rows / 2 - 1) / (max_rows / 2);
    for (size_t b = 0; b < lines.size(); b += bucket) {
      size_t lo = b, hi = b;
      double lo_v = INFINITY, hi_v = -INFINITY;
      for (size_t i = b; i < std::min(b + bucket, lines.size()); ++i) {
        use[i] = line_use(lines[i].text);
        const double v = quick_number(lines[i].text, "\"loss\":");
        if (v < lo_v) lo_v = v, lo = i;
        if (v > hi_v) hi_v = v, hi = i;
      }
      use[lo] = use[hi] = LineUse::Whole;
    }
  }
  MetricsRead r;
  MetricsLineReader reader;
  size_t bad = 0;
  auto warn = [&](long line, const std::string& what) {
    if (++bad <= kMaxWarnings)
      r.warnings.push_back(origin + " line " + std::to_string(line) + ": " + what + "; skipped");
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& [text, line, torn] = lines[i];
    if (blank(text)) continue;
    if (use[i] == LineUse::Plain) continue;
    if (use[i] == LineUse::Carry) {  // passed over, its changed numbers carried to the rows after it
      for (const char* k : {"lr", "loss_scale", "skipped_steps"})
        if (const double v = quick_number(text, "\"" + std::string(k) + "\":"); std::isfinite(v)) reader.carry(k, v);
      continue;
    }
    Json j;
    try {
      j = Json::parse(text.begin(), text.end());
    } catch (const Json::exception&) {
      if (!torn) warn(line, "not valid JSON");
      continue;
    }
    try {
      r.steps.push_back(reader.read(j));
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

namespace {

// The slow fields of `from` (kSlowMetricsFields) in a new row: what a step that only steps.bin
// holds has of the metrics.jsonl line before it.
StepMetrics slow_fields_of(const StepMetrics& from) {
  StepMetrics m;
  m.precision = from.precision;
  m.mem_current = from.mem_current;
  m.mem_peak = from.mem_peak;
  m.mem_predicted = from.mem_predicted;
  m.device_used_bytes = from.device_used_bytes;
  m.device_total_bytes = from.device_total_bytes;
  m.runtime_context_bytes = from.runtime_context_bytes;
  m.loss_scale = from.loss_scale;
  m.skipped_steps = from.skipped_steps;
  return m;
}

}  // namespace

std::vector<StepMetrics> merge_step_rows(std::vector<StepMetrics> lines, const std::vector<StepRow>& rows) {
  std::vector<StepMetrics> out;
  out.reserve(lines.size() + rows.size());
  advise_huge_pages(out.data(), out.capacity() * sizeof(StepMetrics));  // 0.8 KB a row
  StepMetrics base;
  bool line_last = false;  // the last row out is a line's: `base` takes its slow fields
  size_t j = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (; j < lines.size() && lines[j].step < rows[i].step; ++j, line_last = true) out.push_back(std::move(lines[j]));
    if (!out.empty() && out.back().step >= rows[i].step) continue;  // not after the last row (a bad file)
    if (j < lines.size() && lines[j].step == rows[i].step) {
      rows[i].apply_to(lines[j]);
      out.push_back(std::move(lines[j++]));
      line_last = true;
      continue;
    }
    if (line_last) base = slow_fields_of(out.back());
    line_last = false;
    StepMetrics m = base;
    rows[i].apply_to(m);
    out.push_back(std::move(m));
  }
  for (; j < lines.size(); ++j) out.push_back(std::move(lines[j]));
  return out;
}

LoadedRun load_run(const std::string& dir, size_t max_rows) {
  LoadedRun r;
  r.dir = dir;
  std::string bytes, why;
  const std::string config = dir + "/config.json";
  if (!read_file(config, kMaxJsonBytes, bytes, why))
    throw Error(dir + ": not a run folder (config.json " + (why == "missing" ? std::string("is missing") : why) + ")");
  // The config file parser (config/json_text.h): the same plain-word errors as --config and --resume.
  r.config = parse_json_text(bytes, config);
  if (!r.config.is_object()) throw Error(config + ": expected a JSON object of config sections");

  // A record with steps.bin has its per-step scalars there; its metrics.jsonl is read whole (it
  // holds only the lines that carry more, and the slow fields a thinned read would pass over), and
  // a thinned read of steps.bin keeps the rows of the lines' steps (their scalars).
  const std::string columns = dir + "/steps.bin", metrics = dir + "/metrics.jsonl";
  std::string column_bytes;
  const bool has_columns = read_file(columns, kMaxMetricsBytes, column_bytes, why);
  if (!has_columns && why != "missing") r.warnings.push_back(columns + ": " + why + "; no steps read from it");
  MetricsRead m;
  if (read_file(metrics, kMaxMetricsBytes, bytes, why))
    m = parse_metrics_jsonl(bytes, metrics, has_columns ? 0 : max_rows);
  else if (why != "missing")
    m.warnings.push_back(metrics + ": " + why + "; no steps read");
  if (has_columns) {
    StepRowsWanted want{max_rows, {}};
    for (const StepMetrics& s : m.steps) want.keep_steps.push_back(s.step);
    std::sort(want.keep_steps.begin(), want.keep_steps.end());
    StepColumnsRead cols = parse_step_columns(column_bytes, columns, want);
    r.warnings.insert(r.warnings.end(), cols.warnings.begin(), cols.warnings.end());
    if (!cols.rows.empty()) m.steps = merge_step_rows(std::move(m.steps), cols.rows);
  }
  r.steps = std::move(m.steps);
  r.warnings.insert(r.warnings.end(), m.warnings.begin(), m.warnings.end());

  const std::string summary = dir + "/summary.json";
  if (read_file(summary, kMaxJsonBytes, bytes, why))
    r.summary = parse_summary_json(bytes, summary, r.warnings);
  else if (why != "missing")
    r.warnings.push_back(summary + ": " + why + "; ignored");
  return r;
}

}  // namespace trainlab
