// Tags and notes on a run (issue 21): notes.json in the run's folder, {"tags": [...], "notes": "..."},
// written by the app's runs table (Tags and notes...) and shown by the runs table, its filter and
// the report (`trainlab report`). A run's own file (run_record.h's is_run_file): Overwrite clears it
// with the rest of the run, Resume keeps it.
#pragma once
#include <string>
#include <vector>

namespace trainlab {

struct RunNotes {
  std::vector<std::string> tags;  // each non-empty, without commas or line breaks; no repeats
  std::string notes;              // free text
  bool empty() const { return tags.empty() && notes.empty(); }
};

constexpr size_t kMaxTagBytes = 64, kMaxTags = 32, kMaxNotesBytes = 64 * 1024;

// Tags typed as one line, "a, b c": split at commas, trimmed, empty ones and repeats dropped.
// Throws Error naming the tag that is too long, or when there are more than kMaxTags.
std::vector<std::string> parse_tags(const std::string& text);

// The run's notes.json; empty when there is none. A file that is not such an object (or a field of
// another type) gives empty notes and a warning "<dir>/notes.json: ...; ignored" in `warnings`.
RunNotes read_run_notes(const std::string& dir, std::vector<std::string>& warnings);

// Writes notes.json atomically (util/safe_file.h), or removes it when `n` is empty. Throws Error
// when `dir` is not a run folder (no config.json), a tag or the notes break the limits above, or
// the write fails (the path and the reason).
void write_run_notes(const std::string& dir, const RunNotes& n);

}  // namespace trainlab
