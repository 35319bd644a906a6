#include "cli/option_ranges.h"

#include <cstdio>

#include "config/config.h"
#include "util/error.h"

namespace trainlab::cli {

namespace {

CLI::Validator range_validator(const NumberRange& r, const std::string& key) {
  const std::string desc = r.describe().substr(r.describe().find(" in ") + 1);  // "in [0, 100]"
  return CLI::Validator(
      [r, key](std::string& text) -> std::string {
        double value = 0;
        int64_t whole = 0;
        std::string err = check_number(r, text, &value, &whole);
        if (!err.empty()) {
          if (!key.empty()) err.insert(err.find(", got"), " (" + key + ")");
          return err;
        }
        char buf[64];
        if (r.integer)
          std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(whole));
        else
          std::snprintf(buf, sizeof buf, "%.17g", value);
        text = buf;
        return {};
      },
      desc);
}

}  // namespace

CLI::Validator in_range(const NumberRange& r) { return range_validator(r, ""); }

CLI::Validator in_key_range(const std::string& key) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw Error("internal: option range of unknown config key '" + key + "'");
  return range_validator(number_range(*k), key);
}

CLI::Option* add_key_option(CLI::App* cmd, const std::string& flag, std::string& text, const std::string& key,
                            const std::string& help) {
  const ConfigKey* k = find_config_key(key);
  const bool whole = k && k->type != KeyType::Float;
  return cmd->add_option(flag, text, help + " (" + key + ")")
      ->check(in_key_range(key))
      ->type_name(whole ? "INT" : "FLOAT");
}

}  // namespace trainlab::cli
