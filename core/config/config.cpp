#include "config/config.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>

#include "config/json_text.h"
#include "config/user_text.h"
#include "util/error.h"

namespace trainlab {

namespace {

std::string section_of(const std::string& key) {
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? "" : key.substr(0, dot);
}

// A key name from a file, as an error shows it: quoted when it is a short name of letters, digits
// and . _ - : (every real key is), otherwise described (a file's other bytes are never echoed).
std::string shown_key(const std::string& key) {
  bool plain = !key.empty() && key.size() <= 80;
  for (const char ch : key)
    plain = plain && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-' || ch == ':');
  return plain ? "'" + key + "'" : "of " + std::to_string(key.size()) + " bytes (not a name of letters, digits, '.', '_', '-')";
}

// "valid keys in 'train': epochs, steps, ..." (or every section when the section is unknown).
std::string valid_keys_hint(const std::string& key) {
  const std::string sec = section_of(key);
  std::string list;
  for (const auto& k : config_schema())
    if (section_of(k.key) == sec) list += (list.empty() ? "" : ", ") + k.key;
  if (!list.empty()) return "valid keys here: " + list;
  std::string secs;
  for (const auto& k : config_schema()) {
    const std::string top = k.key.substr(0, k.key.find('.'));
    if (secs.find(top) == std::string::npos) secs += (secs.empty() ? "" : ", ") + top;
  }
  return "valid sections: " + secs;
}

Error unknown_key(const std::string& where, const std::string& key) {
  return Error(where + ": unknown key " + shown_key(key) + "; " + valid_keys_hint(key));
}

// Line of the first occurrence of "leaf": in the raw text (0 when not found).
int line_of_key(std::string_view raw, const std::string& key) {
  if (raw.empty()) return 0;
  const std::string leaf = "\"" + key.substr(key.rfind('.') + 1) + "\"";
  const auto pos = raw.find(leaf);
  if (pos == std::string::npos) return 0;
  int line = 1;
  for (size_t i = 0; i < pos; ++i) line += raw[i] == '\n';
  return line;
}

// Sections nest at most this deep (precision.loss_scale.init): deeper objects are values (of an
// unknown key), so a deeply nested object from a record or a weights file ends the recursion.
constexpr int kMaxSectionDepth = 4;

// Dotted keys and their values (pointers into `j`: a value is not copied, as copying a deeply
// nested value would recurse as deep).
using FlatItems = std::vector<std::pair<std::string, const Json*>>;
void flatten(const Json& j, const std::string& prefix, int depth, FlatItems& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string k = prefix.empty() ? it.key() : prefix + "." + it.key();
    // An object is a section unless the schema has this exact key (no key is object-valued today).
    if (it->is_object() && !find_config_key(k) && depth < kMaxSectionDepth)
      flatten(*it, k, depth + 1, out);
    else
      out.emplace_back(k, &*it);
  }
}

// A whole number that fits int64 (an integer, or a float with no fraction), else nullopt.
std::optional<int64_t> as_whole(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// What a value is, for "got ...": its kind, never its content.
std::string kind_of(const Json& v, const ConfigKey& k) {
  if (v.is_string() && !is_utf8(v.get<std::string>())) return "text that is not UTF-8";
  if (v.is_string()) return k.type == KeyType::Enum ? "a string that is none of these" : "a string";
  if (v.is_boolean()) return "true or false";
  if (v.is_null()) return "null";
  if (v.is_object()) return "an object";
  if (v.is_array()) {
    if (k.type != KeyType::IntList) return "a list";
    if (v.empty()) return "an empty list";
    if (v.size() > kMaxListItems) return "a list of " + std::to_string(v.size()) + " items";
    return "a list with an item that is not such an integer";
  }
  if (v.is_number_float() && std::isnan(v.get<double>())) return "nan";
  if (v.is_number_float() && std::isinf(v.get<double>())) return "an infinity";
  if (k.type == KeyType::Int && !as_whole(v) && v.is_number_float() && std::fabs(v.get<double>()) < 9.2e18)
    return "a number with a fraction";
  return "a number outside that range";
}

}  // namespace

const ConfigKey* find_config_key(const std::string& key) {
  for (const auto& k : config_schema())
    if (k.key == key) return &k;
  return nullptr;
}

NumberRange number_range(const ConfigKey& k) {
  return {k.min, k.max, k.min_open, k.max_open, k.type != KeyType::Float};
}

std::string describe_expected(const ConfigKey& k) {
  switch (k.type) {
    case KeyType::Int:
    case KeyType::Float: return number_range(k).describe();
    case KeyType::Bool: return "true or false";
    case KeyType::String: return "a string of UTF-8 text";
    case KeyType::IntList: {
      const std::string items = number_range(k).describe();  // "an integer in [a, b]"
      return std::string("a list of ") + (k.empty_list_ok ? "0" : "1") + " to " + std::to_string(kMaxListItems) +
             " integers" + items.substr(items.find(" in "));
    }
    case KeyType::Enum: {
      std::string s = "one of ";
      for (size_t i = 0; i < k.choices.size(); ++i) s += (i ? ", " : "") + k.choices[i];
      return s;
    }
  }
  return "?";
}

Json validate_config_value(const ConfigKey& k, const Json& v, const std::string& where, const std::string& shown) {
  auto fail = [&]() -> Error {
    return Error(where + ": key '" + k.key + "': expected " + describe_expected(k) + ", got " +
                 (shown.empty() ? kind_of(v, k) : shown));
  };
  const NumberRange range = number_range(k);
  switch (k.type) {
    case KeyType::Int: {
      const std::optional<int64_t> n = as_whole(v);
      if (n && range.contains(static_cast<double>(*n))) return *n;
      throw fail();
    }
    case KeyType::Float:
      if (v.is_number() && range.contains(v.get<double>())) return v.get<double>();
      throw fail();
    case KeyType::Bool:
      if (v.is_boolean()) return v;
      throw fail();
    case KeyType::String:
      if (v.is_string() && is_utf8(v.get<std::string>())) return v;
      throw fail();
    case KeyType::Enum:
      if (v.is_string())
        for (const auto& c : k.choices)
          if (c == v.get<std::string>()) return v;
      throw fail();
    case KeyType::IntList: {
      if (!v.is_array() || (v.empty() && !k.empty_list_ok) || v.size() > kMaxListItems) throw fail();
      Json out = Json::array();
      for (const auto& e : v) {
        const std::optional<int64_t> n = e.is_number_float() ? std::nullopt : as_whole(e);
        if (!n || !range.contains(static_cast<double>(*n))) throw fail();
        out.push_back(*n);
      }
      return out;
    }
  }
  throw fail();
}

Config::Config() {
  m_flat = Json::object();
  for (const auto& k : config_schema()) m_flat[k.key] = k.default_value;
}

Config Config::from_file(const std::string& path) { return from_text(read_small_file(path, "config file"), path); }

Config Config::from_text(std::string_view text, const std::string& origin) {
  const Json j = parse_json_text(text, origin);
  if (!j.is_object())
    throw Error(origin + ": a config must be a JSON object of sections, e.g. {\"train\": {\"epochs\": 30}}");
  Config c;
  c.merge(j, origin, std::string(text));
  return c;
}

Config Config::from_json(const Json& j, const std::string& source) {
  Config c;
  c.merge(j, source);
  return c;
}

Config Config::from_record(const Json& nested) {
  Config c;
  if (!nested.is_object()) return c;
  FlatItems items;
  flatten(nested, "", 1, items);
  for (const auto& [key, value] : items) {
    const ConfigKey* k = find_config_key(key);
    if (!k) continue;
    try {
      c.m_flat[key] = validate_config_value(*k, *value, "record");
    } catch (const Error&) {  // the key keeps its default
    }
  }
  return c;
}

void Config::merge(const Json& j, const std::string& source, const std::string& raw) {
  if (!j.is_object()) throw Error(source + ": a config must be a JSON object");
  FlatItems items;
  flatten(j, "", 1, items);
  for (const auto& [key, value] : items) {
    const int line = line_of_key(raw, key);
    const std::string where = source + (line ? ":" + std::to_string(line) : "");
    const ConfigKey* k = find_config_key(key);
    if (!k) throw unknown_key(where, key);
    m_flat[key] = validate_config_value(*k, *value, where);
  }
}

void Config::set_json(const std::string& key, const Json& value, const std::string& source) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw unknown_key(source, key);
  m_flat[key] = validate_config_value(*k, value, source);
}

void Config::set(const std::string& key, const std::string& text) {
  const ConfigKey* k = find_config_key(key);
  // What the user typed, shown in errors (a command line is not a file), kept to one short line
  // of UTF-8.
  const std::string shown = shown_text(text);
  const std::string where = "--set " + shown_text(key) + "=" + (text.empty() ? "" : shown);
  if (!k) throw unknown_key(where, key);
  Json v;
  switch (k->type) {
    case KeyType::Int:
    case KeyType::Float: {
      double d = 0;
      int64_t n = 0;
      const std::string err = check_number(number_range(*k), text, &d, &n);
      if (!err.empty()) throw Error(where + ": key '" + key + "': " + err);
      v = k->type == KeyType::Int ? Json(n) : Json(d);
      break;
    }
    case KeyType::Bool:
      if (text == "true" || text == "1" || text == "on" || text == "yes")
        v = true;
      else if (text == "false" || text == "0" || text == "off" || text == "no")
        v = false;
      else
        throw Error(where + ": key '" + key + "': expected true or false, got " + shown);
      break;
    case KeyType::IntList: {
      // 256,256 or [256, 256]: each item an integer of the key's range.
      std::string t = text;
      if (!t.empty() && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
      v = Json::array();
      std::stringstream ss(t);
      std::string item;
      while (std::getline(ss, item, ',')) {
        while (!item.empty() && item.front() == ' ') item.erase(0, 1);
        while (!item.empty() && item.back() == ' ') item.pop_back();
        double d = 0;
        int64_t n = 0;
        if (!check_number(number_range(*k), item, &d, &n).empty())
          throw Error(where + ": key '" + key + "': expected " + describe_expected(*k) + ", like 256,256; got " + shown);
        v.push_back(n);
      }
      break;
    }
    default: v = text;
  }
  m_flat[key] = validate_config_value(*k, v, where, shown);
}

const Json& Config::at(const std::string& key) const {
  auto it = m_flat.find(key);
  if (it == m_flat.end()) throw Error("internal: config key '" + key + "' is not in the schema");
  return *it;
}

Json Config::to_json() const {
  Json out = Json::object();
  for (auto it = m_flat.begin(); it != m_flat.end(); ++it) out[Json::json_pointer("/" + [&] {
    std::string p = it.key();
    for (auto& ch : p)
      if (ch == '.') ch = '/';
    return p;
  }())] = *it;
  return out;
}

std::vector<std::string> Config::differences(const Config& a, const Config& b) {
  std::vector<std::string> out;
  for (const auto& k : config_schema())
    if (a.at(k.key) != b.at(k.key)) out.push_back(k.key);
  return out;
}

}  // namespace trainlab
