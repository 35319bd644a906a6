#include "config/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace trainlab {

namespace {

std::string fmt_num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string section_of(const std::string& key) {
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? "" : key.substr(0, dot);
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

// Line of the first occurrence of "leaf": in the raw text (0 when not found).
int line_of_key(const std::string& raw, const std::string& key) {
  if (raw.empty()) return 0;
  const std::string leaf = "\"" + key.substr(key.rfind('.') + 1) + "\"";
  const auto pos = raw.find(leaf);
  if (pos == std::string::npos) return 0;
  int line = 1;
  for (size_t i = 0; i < pos; ++i) line += raw[i] == '\n';
  return line;
}

void flatten(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, Json>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string k = prefix.empty() ? it.key() : prefix + "." + it.key();
    // An object is a section unless the schema has this exact key (no key is object-valued today).
    if (it->is_object() && !find_config_key(k))
      flatten(*it, k, out);
    else
      out.emplace_back(k, *it);
  }
}

}  // namespace

const ConfigKey* find_config_key(const std::string& key) {
  for (const auto& k : config_schema())
    if (k.key == key) return &k;
  return nullptr;
}

std::string describe_expected(const ConfigKey& k) {
  switch (k.type) {
    case KeyType::Int: return "an integer from " + fmt_num(k.min) + " to " + fmt_num(k.max);
    case KeyType::Float: return "a number from " + fmt_num(k.min) + " to " + fmt_num(k.max);
    case KeyType::Bool: return "true or false";
    case KeyType::String: return "a string";
    case KeyType::IntList: return "a list of integers from " + fmt_num(k.min) + " to " + fmt_num(k.max);
    case KeyType::Enum: {
      std::string s = "one of ";
      for (size_t i = 0; i < k.choices.size(); ++i) s += (i ? ", " : "") + k.choices[i];
      return s;
    }
  }
  return "?";
}

Json validate_config_value(const ConfigKey& k, const Json& v, const std::string& where) {
  auto fail = [&]() -> Error {
    return Error(where + ": key '" + k.key + "' expects " + describe_expected(k) + ", got " + v.dump());
  };
  auto in_range = [&](double x) { return x >= k.min && x <= k.max; };
  switch (k.type) {
    case KeyType::Int: {
      if (v.is_number_integer() && in_range(static_cast<double>(v.get<int64_t>()))) return v.get<int64_t>();
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::floor(d) == d && in_range(d)) return static_cast<int64_t>(d);
      }
      throw fail();
    }
    case KeyType::Float:
      if (v.is_number() && std::isfinite(v.get<double>()) && in_range(v.get<double>())) return v.get<double>();
      throw fail();
    case KeyType::Bool:
      if (v.is_boolean()) return v;
      throw fail();
    case KeyType::String:
      if (v.is_string()) return v;
      throw fail();
    case KeyType::Enum:
      if (v.is_string())
        for (const auto& c : k.choices)
          if (c == v.get<std::string>()) return v;
      throw fail();
    case KeyType::IntList: {
      if (!v.is_array() || v.empty()) throw fail();
      for (const auto& e : v)
        if (!e.is_number_integer() || !in_range(static_cast<double>(e.get<int64_t>()))) throw fail();
      return v;
    }
  }
  throw fail();
}

Config::Config() {
  m_flat = Json::object();
  for (const auto& k : config_schema()) m_flat[k.key] = k.default_value;
}

Config Config::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the config file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string raw = ss.str();
  Json j;
  try {
    j = Json::parse(raw);
  } catch (const Json::parse_error& e) {
    // nlohmann's message carries "line L, column C"
    throw Error(path + ": not valid JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw Error(path + ": a config must be a JSON object");
  Config c;
  c.merge(j, path, raw);
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
  std::vector<std::pair<std::string, Json>> items;
  flatten(nested, "", items);
  for (const auto& [key, value] : items) {
    const ConfigKey* k = find_config_key(key);
    if (!k) continue;
    try {
      c.m_flat[key] = validate_config_value(*k, value, "record");
    } catch (const std::exception&) {  // Error, or a JSON type error: the key keeps its default
    }
  }
  return c;
}

void Config::merge(const Json& j, const std::string& source, const std::string& raw) {
  if (!j.is_object()) throw Error(source + ": a config must be a JSON object");
  std::vector<std::pair<std::string, Json>> items;
  flatten(j, "", items);
  for (const auto& [key, value] : items) {
    const int line = line_of_key(raw, key);
    const std::string where = source + (line ? ":" + std::to_string(line) : "");
    const ConfigKey* k = find_config_key(key);
    if (!k) throw Error(where + ": unknown key '" + key + "'; " + valid_keys_hint(key));
    m_flat[key] = validate_config_value(*k, value, where);
  }
}

void Config::set_json(const std::string& key, const Json& value, const std::string& source) {
  const ConfigKey* k = find_config_key(key);
  if (!k) throw Error(source + ": unknown key '" + key + "'; " + valid_keys_hint(key));
  m_flat[key] = validate_config_value(*k, value, source);
}

void Config::set(const std::string& key, const std::string& text) {
  const ConfigKey* k = find_config_key(key);
  const std::string where = "--set " + key + "=" + text;
  if (!k) throw Error(where + ": unknown key '" + key + "'; " + valid_keys_hint(key));
  Json v;
  switch (k->type) {
    case KeyType::Int:
    case KeyType::Float: {
      char* end = nullptr;
      errno = 0;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno)
        throw Error(where + ": key '" + key + "' expects " + describe_expected(*k) + ", got '" + text + "'");
      if (k->type == KeyType::Int && std::floor(d) == d && std::fabs(d) < 9e15)
        v = static_cast<int64_t>(d);
      else
        v = d;
      break;
    }
    case KeyType::Bool:
      if (text == "true" || text == "1" || text == "on" || text == "yes")
        v = true;
      else if (text == "false" || text == "0" || text == "off" || text == "no")
        v = false;
      else
        throw Error(where + ": key '" + key + "' expects true or false, got '" + text + "'");
      break;
    case KeyType::IntList: {
      std::string t = text;
      if (!t.empty() && t.front() == '[') {
        try {
          v = Json::parse(t);
        } catch (const Json::parse_error&) {
          throw Error(where + ": key '" + key + "' expects a list like 256,256");
        }
      } else {
        v = Json::array();
        std::stringstream ss(t);
        std::string item;
        while (std::getline(ss, item, ',')) {
          char* end = nullptr;
          const long long n = std::strtoll(item.c_str(), &end, 10);
          if (item.empty() || *end != '\0')
            throw Error(where + ": key '" + key + "' expects a list of integers like 256,256, got '" + text + "'");
          v.push_back(n);
        }
      }
      break;
    }
    default: v = text;
  }
  m_flat[key] = validate_config_value(*k, v, where);
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
