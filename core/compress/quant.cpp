#include "compress/quant.h"

#include <sstream>

#include "util/error.h"

namespace trainlab {

QuantPlan QuantPlan::parse(const QuantSpec& def, const std::string& text) {
  QuantPlan p;
  p.default_spec = def;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    std::vector<std::string> f;
    std::stringstream is(item);
    std::string part;
    while (std::getline(is, part, ':')) f.push_back(part);
    if (f.size() < 2)
      throw Error("quant.overrides item '" + item + "': expected layer:bits[:granularity[:group]], e.g. net.4:8:channel");
    QuantSpec s = def;
    try {
      s.bits = std::stoi(f[1]);
      if (f.size() > 2) s.granularity = granularity_from_name(f[2]);
      if (f.size() > 3) s.group = std::stoi(f[3]);
    } catch (const std::invalid_argument&) {
      throw Error("quant.overrides item '" + item + "': bits and group must be integers");
    }
    if (s.bits < 2 || s.bits > 8) throw Error("quant.overrides item '" + item + "': bits must be 2..8");
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
