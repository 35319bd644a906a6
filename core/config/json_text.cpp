#include "config/json_text.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>

#include "util/error.h"

namespace trainlab {

using Json = nlohmann::json;

namespace {

// "line L, column C" of the byte at `offset` (0-based; one past the end is the end of the text).
std::string line_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// The offset of the bracket that opens level kMaxJsonDepth + 1, or npos. Strings are skipped, so
// brackets inside them do not count.
size_t too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// nlohmann's lexer messages in plain words. Only these fixed texts are returned: the library's
// message quotes the bytes where it stopped ("last read: '...'"), which are the file's content.
std::string lexer_words(const std::string& m) {
  if (has(m, "control character")) return "a control character (a tab or line break) inside a string; write it as \\t or \\n";
  if (has(m, "missing closing quote")) return "a string is not closed with a double quote";
  if (has(m, "must be followed by 4 hex digits")) return "\\u in a string must be followed by 4 hex digits";
  if (has(m, "surrogate")) return "a \\u escape is half of a UTF-16 surrogate pair";
  if (has(m, "after backslash")) return "a backslash in a string must start an escape such as \\\" \\\\ \\n or \\u00e9";
  if (has(m, "UTF-8")) return "the text is not valid UTF-8";
  if (has(m, "invalid number")) return "a malformed number";
  if (has(m, "invalid literal")) return "a word that is not true, false or null (strings need double quotes)";
  if (has(m, "BOM")) return "an incomplete byte-order mark at the start";
  if (has(m, "comment")) return "comments are not allowed in JSON";
  return "a character that cannot appear here";
}

// A syntax error ("syntax error while parsing CONTEXT - unexpected TOKEN; expected TOKEN") in plain
// words, from the parse context and the expected token (both from fixed lists).
std::string syntax_words(const std::string& m) {
  const auto dash = m.find(" - ");
  if (dash == std::string::npos) return "a syntax error";
  const std::string body = m.substr(dash + 3);
  if (body.rfind("unexpected ", 0) != 0) return lexer_words(body.substr(0, body.find("; last read:")));
  const bool at_end = body.rfind("unexpected end of input", 0) == 0;
  const bool closing = body.rfind("unexpected '}'", 0) == 0 || body.rfind("unexpected ']'", 0) == 0;
  const std::string before = m.substr(0, dash);
  if (at_end) return "the text ends before the JSON value is complete (a '}' or ']' missing?)";
  if (has(m, "; expected end of input")) return "more text after the end of the JSON value";
  if (has(before, "object key"))
    return std::string("expected a key in double quotes") + (closing ? " (a comma before '}'?)" : "");
  if (has(before, "object separator")) return "expected ':' after a key";
  if (has(before, "while parsing object")) return "expected ',' or '}' after a value in an object";
  if (has(before, "while parsing array")) return "expected ',' or ']' after a value in a list";
  if (has(before, "while parsing value"))
    return std::string("expected a value: an object, list, string, number, true, false or null") +
           (closing ? " (a comma before the bracket?)" : "");
  return "a syntax error";
}

// The DOM parser of nlohmann::json::parse, keeping where and why it stopped instead of throwing
// (the parser calls this class's parse_error, which hides the base's).
struct PositionedParser : nlohmann::detail::json_sax_dom_parser<Json> {
  explicit PositionedParser(Json& root) : json_sax_dom_parser(root, false) {}
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& ex) {
    failed = true;
    at = position;
    id = ex.id;
    message = ex.what();
    return false;
  }
  bool failed = false;
  size_t at = 0;  // bytes read, the failing one included
  int id = 0;
  std::string message;
};

}  // namespace

Json parse_json_text(std::string_view text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) throw Error(origin + ": empty, expected a JSON object");
  if (const size_t deep = too_deep_at(text); deep != std::string_view::npos)
    throw Error(origin + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep at " +
                line_column(text, deep));
  Json j;
  PositionedParser p(j);
  try {
    Json::sax_parse(text.data(), text.data() + text.size(), &p);
  } catch (const std::bad_alloc&) {
    throw Error(origin + ": out of memory while parsing its JSON (" + std::to_string(text.size()) + " bytes)");
  }
  if (!p.failed) return j;
  std::string what;
  if (p.id == 406)
    what = "a number too large for a double";
  else if (has(p.message, "syntax error"))
    what = syntax_words(p.message);
  else
    what = "not JSON";
  throw Error(origin + ": not valid JSON at " + line_column(text, p.at ? p.at - 1 : 0) + " (" + what + ")");
}

std::string read_small_file(const std::string& path, const std::string& what, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(path + ": cannot open the " + what + " (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    throw Error(path + ": the " + what + " must be a regular file, not " +
                (S_ISDIR(st.st_mode) ? "a folder" : "a device, pipe or socket"));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw Error(path + ": " + std::to_string(st.st_size) + " bytes is more than a " + what + " can be (at most " +
                std::to_string(max_bytes) + " bytes)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the " + what + " (" + std::strerror(errno) + ")");
  // One byte more than stat() said: a file that grows meanwhile is noticed, and the read stays bounded.
  std::string bytes(static_cast<size_t>(st.st_size) + 1, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.bad()) throw Error(path + ": cannot read the " + what);
  if (static_cast<size_t>(in.gcount()) > static_cast<size_t>(st.st_size))
    throw Error(path + ": the " + what + " changed while it was read");
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

Json read_json_file(const std::string& path, const std::string& what) {
  return parse_json_text(read_small_file(path, what), path);
}

}  // namespace trainlab
