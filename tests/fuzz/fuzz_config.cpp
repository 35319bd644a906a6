// Fuzz target `config`: config JSON bytes through the parser (config/json_text.h) and the schema
// validation, strictly (Config::from_text, a config file) and tolerantly (Config::from_record, a
// run's config.json or a weights file's metadata); a first line "key=value" also goes through
// Config::set (--set). The clear-error outcome is trainlab::Error; anything else (another
// exception, a crash, a sanitizer report) is a finding. A config that is accepted must survive
// its own round trip: to_json() dumped and read back gives the same config.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/json_text.h"
#include "util/error.h"

using namespace trainlab;

namespace {

void round_trip(const Config& c) {
  const Config back = Config::from_text(c.to_json().dump(), "round trip");
  if (!Config::differences(c, back).empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    round_trip(Config::from_text(text, "fuzz.json"));
  } catch (const Error&) {
  }
  try {
    round_trip(Config::from_record(parse_json_text(text, "config.json")));
  } catch (const Error&) {
  }
  const size_t eol = text.find('\n'), eq = text.find('=');
  if (eq != std::string_view::npos && eq < eol) {
    try {
      Config c;
      const std::string_view line = text.substr(0, eol);
      c.set(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
      round_trip(c);
    } catch (const Error&) {
    }
  }
  return 0;
}
