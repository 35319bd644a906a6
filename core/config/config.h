// Config: a run is fully described by one JSON object whose keys are declared in a schema
// (config_schema()): type, default, range or choices, a one-line explanation (shown as --help
// text and as the app's tooltips), and whether it may change while a run trains.
//
// Config files are nested JSON ({"train": {"epochs": 30}}); --set takes dotted keys
// (train.epochs=30). Unknown keys, wrong types and out-of-range values throw Error naming the
// file, line and key and what was expected ("run.json:3: key 'optim.lr': expected a number in
// (0, 10], got a string"); a value from a file is described, never echoed. A numeric key's range
// is a NumberRange (number_range.h): NaN and infinities are outside every one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config/number_range.h"

namespace trainlab {

using Json = nlohmann::json;

enum class KeyType { Int, Float, Bool, String, Enum, IntList };

struct ConfigKey {
  std::string key;  // dotted: "train.epochs"
  KeyType type;
  Json default_value;
  double min = -1e300, max = 1e300;  // range for Int/Float (and each IntList item); ends closed
  std::vector<std::string> choices;  // Enum
  std::string help;
  bool mid_run = false;  // may change while a run trains (applies at the next step)
  bool min_open = false, max_open = false;  // an open end excludes min or max: optim.lr is (0, 10]
  bool empty_list_ok = false;  // IntList: the empty list is a value (dist.stage_layers: "balanced")
};

// An IntList holds 1 to this many items (model.hidden: layers of an MLP), or none where the key
// says so (empty_list_ok).
constexpr size_t kMaxListItems = 64;

const std::vector<ConfigKey>& config_schema();
const ConfigKey* find_config_key(const std::string& key);
// The range of an Int, Float or IntList key (of each item for a list).
NumberRange number_range(const ConfigKey& k);
// "an integer in [1, 16777216]", "a number in (0, 10]", "one of fp32, tf32, ...", "true or false"
std::string describe_expected(const ConfigKey& k);

class Config {
 public:
  Config();  // every key at its default

  // A config file: a regular file of JSON (config/json_text.h: size and depth limits, parse errors
  // in plain words), read strictly.
  static Config from_file(const std::string& path);
  // The same from the file's bytes; `origin` names them in errors (the fuzz target's entry point).
  static Config from_text(std::string_view text, const std::string& origin);
  static Config from_json(const Json& j, const std::string& source = "config");
  // The config of a run record (config.json) or of a weights file's trainlab_config metadata,
  // read tolerantly: a record written by an older or newer build may hold keys this build does not
  // know, or values outside today's ranges; those keep their defaults and the rest is used. (A
  // config file a user gives is read strictly, by from_file.)
  static Config from_record(const Json& nested);

  // Merges a nested JSON object; `source` names it in errors (a file name).
  void merge(const Json& j, const std::string& source, const std::string& raw_text = "");
  // Sets one dotted key from text (the --set syntax and the CLI flags).
  void set(const std::string& key, const std::string& text);
  // Sets one dotted key from a JSON value (validated).
  void set_json(const std::string& key, const Json& value, const std::string& source = "--set");

  const Json& at(const std::string& key) const;
  int64_t get_int(const std::string& key) const { return at(key).get<int64_t>(); }
  double get_float(const std::string& key) const { return at(key).get<double>(); }
  bool get_bool(const std::string& key) const { return at(key).get<bool>(); }
  std::string get_string(const std::string& key) const { return at(key).get<std::string>(); }
  std::vector<int64_t> get_int_list(const std::string& key) const { return at(key).get<std::vector<int64_t>>(); }

  // The resolved config as nested JSON (every key present).
  Json to_json() const;
  // Keys whose values differ between two configs (for the runs table and reports).
  static std::vector<std::string> differences(const Config& a, const Config& b);

 private:
  Json m_flat;  // dotted key -> value
};

// Validates one value for a key; returns it normalised (e.g. 3 -> 3.0 for floats) or throws
// "WHERE: key 'K': expected ..., got SHOWN" (SHOWN empty: the kind of value, e.g. "a string", so
// that a file's content is not echoed).
Json validate_config_value(const ConfigKey& k, const Json& v, const std::string& where, const std::string& shown = "");

}  // namespace trainlab
