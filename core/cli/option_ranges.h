// The ranges of trainlab-cli's numeric options. Every verb attaches one of these CLI11 validators
// to each numeric option, so that NaN, infinities and out-of-range values are refused while the
// command line is parsed, naming the option and its range:
//   error: --temperature: expected a number in [0, 100], got nan
// (CLI11's own CLI::Range compares with < and >, which NaN passes.) The parsing and the message
// are NumberRange's (config/number_range.h), the same as for --set and config files. An option
// that sets a config key takes the key's range from the schema, so the two cannot drift apart.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "config/number_range.h"

namespace trainlab::cli {

// Checks a value against `r`; the accepted text is rewritten in plain digits ("1e4" -> "10000"
// for an integer), which CLI11 then converts to the option's type.
CLI::Validator in_range(const NumberRange& r);

// The range of the schema key `key` (config_schema.cpp); the message names the key too:
// "--lr: expected a number in (0, 10] (optim.lr), got nan".
CLI::Validator in_key_range(const std::string& key);

// A flag that sets the numeric config key `key`: its text is kept in `text` ("" when the flag is
// not given, so a config file's value stays) after in_key_range has checked it; --help shows
// INT or FLOAT and the range.
CLI::Option* add_key_option(CLI::App* cmd, const std::string& flag, std::string& text, const std::string& key,
                            const std::string& help);

}  // namespace trainlab::cli
