// JSON text from outside the program (config files, a run folder's config.json), read and parsed
// with errors a user can act on: "FILE: not valid JSON at line 3, column 14 (a key must be a string
// in double quotes; a comma before '}'?)". nlohmann's own messages are never shown: they carry
// library prefixes and quote the bytes where parsing stopped, and no error here echoes the
// content of a file (a path is fine).
//
// Limits that keep a hostile file from taking the machine: only regular files are read (not a
// device, FIFO or folder), at most kMaxJsonFileBytes, nested at most kMaxJsonDepth deep (a config
// is 3 deep; a megabyte of '[' would otherwise build a million nested arrays).
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trainlab {

constexpr size_t kMaxJsonFileBytes = 4u << 20;
constexpr int kMaxJsonDepth = 32;

// Parses `text`; `origin` (a path, or e.g. "the window's settings") names it in errors.
nlohmann::json parse_json_text(std::string_view text, const std::string& origin);

// The bytes of a regular file of at most `max_bytes`; `what` names it in errors ("config file").
std::string read_small_file(const std::string& path, const std::string& what, size_t max_bytes = kMaxJsonFileBytes);

// read_small_file + parse_json_text.
nlohmann::json read_json_file(const std::string& path, const std::string& what = "JSON file");

}  // namespace trainlab
