#include "train/run_notes.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "config/json_text.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab {

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

void check_tags(const std::vector<std::string>& tags) {
  if (tags.size() > kMaxTags)
    throw Error("tags: " + std::to_string(tags.size()) + " given; at most " + std::to_string(kMaxTags));
  for (const auto& t : tags) {
    if (t.empty() || t.find_first_of(",\r\n") != std::string::npos)
      throw Error("tag '" + t + "': expected a non-empty word without commas or line breaks");
    if (t.size() > kMaxTagBytes)
      throw Error("tag '" + t.substr(0, 16) + "...': " + std::to_string(t.size()) + " bytes; at most " +
                  std::to_string(kMaxTagBytes));
  }
}

}  // namespace

std::vector<std::string> parse_tags(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string t = trim(text.substr(pos, comma - pos));
    if (!t.empty() && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    pos = comma + 1;
  }
  check_tags(out);
  return out;
}

RunNotes read_run_notes(const std::string& dir, std::vector<std::string>& warnings) {
  RunNotes n;
  const std::string path = dir + "/notes.json";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return n;
  nlohmann::json j;
  try {
    j = read_json_file(path, "notes file");
  } catch (const Error& e) {
    warnings.push_back(std::string(e.what()) + "; ignored");
    return n;
  }
  const auto bad = [&](const std::string& what) {
    warnings.push_back(path + ": " + what + "; ignored");
    return RunNotes{};
  };
  if (!j.is_object()) return bad("expected an object {\"tags\": [...], \"notes\": \"...\"}");
  if (const auto t = j.find("tags"); t != j.end()) {
    if (!t->is_array()) return bad("field 'tags': expected an array of strings");
    for (const auto& v : *t) {
      if (!v.is_string()) return bad("field 'tags': expected an array of strings");
      n.tags.push_back(v.get<std::string>());
    }
    try {
      check_tags(n.tags);
    } catch (const Error& e) {
      return bad(std::string("field 'tags': ") + e.what());
    }
  }
  if (const auto t = j.find("notes"); t != j.end()) {
    if (!t->is_string()) return bad("field 'notes': expected a string");
    n.notes = t->get<std::string>();
  }
  return n;
}

void write_run_notes(const std::string& dir, const RunNotes& n) {
  struct stat st {};
  if (::stat((dir + "/config.json").c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(dir + ": not a run folder (no config.json); tags and notes are kept in a run's folder");
  check_tags(n.tags);
  if (n.notes.size() > kMaxNotesBytes)
    throw Error("notes: " + std::to_string(n.notes.size()) + " bytes; at most " + std::to_string(kMaxNotesBytes));
  const std::string path = dir + "/notes.json";
  if (n.empty()) {
    if (std::remove(path.c_str()) != 0 && errno != ENOENT) throw Error(path + ": cannot be removed");
    return;
  }
  const nlohmann::json j = {{"tags", n.tags}, {"notes", n.notes}};
  write_file_atomic(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace trainlab
