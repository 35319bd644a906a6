// Text a user typed (a flag's value, --set KEY=VALUE) or a config holds, as errors treat it.
#pragma once
#include <string>
#include <string_view>

namespace trainlab {

// Whether `s` is UTF-8 (shortest forms, no surrogates): what a JSON string must hold, so a config
// value that is not could be read but never written back to a run's config.json.
bool is_utf8(std::string_view s);

// What an error shows after "got ": at most 40 bytes (cut at a character's start), "nothing"
// when empty, "text that is not UTF-8" for bytes that are not (an error may end up in a JSON
// line, which must be UTF-8). Only for text typed on a command line, never a file's content.
std::string shown_text(std::string_view typed);

}  // namespace trainlab
