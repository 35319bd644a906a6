#include "util/error.h"

#include <filesystem>
#include <new>
#include <system_error>

namespace trainlab {

namespace {

// A library's message without its prefixes: "[json.exception.type_error.302] type must be number"
// loses the bracket, "vector::_M_range_check: __n ..." the function name, and a quoted piece of
// input ("; last read: '...'", nlohmann's parse errors) is cut off.
std::string plain(std::string m) {
  if (!m.empty() && m[0] == '[') {
    const auto close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  const auto colon = m.find(": ");
  if (colon != std::string::npos && m.find("::") < colon && m.find(' ') > colon) m.erase(0, colon + 2);
  const auto quoted = m.find("; last read:");
  if (quoted != std::string::npos) m.erase(quoted);
  if (m.size() > 200) m = m.substr(0, 197) + "...";
  return m.empty() ? "no details" : m;
}

}  // namespace

std::string describe_exception(const std::exception& e, const std::string& doing) {
  if (dynamic_cast<const Error*>(&e)) return e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const std::length_error*>(&e))
    return "out of memory while " + doing +
           " (more memory was needed than this machine has free: a smaller batch, model or data set needs less)";
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    const std::string path = fe->path1().empty() ? std::string() : fe->path1().string() + ": ";
    return path + fe->code().message() + " (while " + doing + ")";
  }
  if (const auto* se = dynamic_cast<const std::system_error*>(&e)) return se->code().message() + " while " + doing;
  return "unexpected error while " + doing + ": " + plain(e.what());
}

}  // namespace trainlab
