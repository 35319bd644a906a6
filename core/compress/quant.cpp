#include "compress/quant.h"

#include <sstream>

#include "config/config.h"
#include "util/error.h"

namespace trainlab {

QuantPlan QuantPlan::parse(const QuantSpec& def, const std::string& text) {
  QuantPlan p;
  p.default_spec = def;
  std::stringstream ss(text);
  std::string item;
  // Items are named by their position, not echoed: the text may come from a config file.
  for (int n = 1; std::getline(ss, item, ','); ++n) {
    if (item.empty()) continue;
    const std::string where = "quant.overrides item " + std::to_string(n);
    std::vector<std::string> f;
    std::stringstream is(item);
    std::string part;
    while (std::getline(is, part, ':')) f.push_back(part);
    if (f.size() < 2 || f.size() > 4)
      throw Error(where + ": expected layer:bits[:granularity[:group]], e.g. net.4:8:channel");
    QuantSpec s = def;
    // bits and group take the ranges of quant.bits and quant.group, checked where the item is read
    // (whole text: "4x" is not 4, and a number past int is not std::stoi's raw "stoi").
    auto whole = [&](const std::string& digits, const char* field, const char* key) {
      int64_t v = 0;
      const std::string err = check_number(number_range(*find_config_key(key)), digits, nullptr, &v);
      if (!err.empty()) throw Error(where + ": " + field + ": " + err.substr(0, err.find(", got")));
      return static_cast<int>(v);
    };
    s.bits = whole(f[1], "bits", "quant.bits");
    if (f.size() > 2) s.granularity = granularity_from_name(f[2]);
    if (f.size() > 3) s.group = whole(f[3], "group", "quant.group");
    p.overrides[f[0]] = s;
  }
  return p;
}

QuantPlan QuantPlan::from_options(const QuantOptions& o) {
  QuantSpec s;
  s.bits = o.bits;
  s.granularity = granularity_from_name(o.granularity);
  s.group = o.group;
  return parse(s, o.overrides);
}

const QuantSpec& QuantPlan::spec_for(const std::string& name) const {
  auto it = overrides.find(name);
  if (it != overrides.end()) return it->second;
  const auto dot = name.rfind('.');
  if (dot != std::string::npos) {
    it = overrides.find(name.substr(0, dot));
    if (it != overrides.end()) return it->second;
  }
  return default_spec;
}

bool QuantPlan::quantizable(const std::string& name, const Shape& shape) { return is_linear_weight(name, shape); }

SafeTensorsFile quantize_weights(const SafeTensorsFile& fp32, const QuantPlan& plan, QuantFileReport* report) {
  return quantize_weights(fp32, [&plan](const std::string& name) { return plan.spec_for(name); }, report);
}

}  // namespace trainlab
