#include "tensor/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trainlab {

namespace {
DynamicMap build(bool is_signed) {
  std::vector<double> data;
  constexpr int kMaxExponentBits = 7;
  for (int i = 0; i < kMaxExponentBits; ++i) {
    const int items = is_signed ? (1 << i) : (1 << (i + 1));  // fraction_items - 1 midpoints
    const double scale = std::pow(10.0, -(kMaxExponentBits - 1) + i);
    for (int k = 0; k < items; ++k) {
      // linspace(0.1, 1, items + 1): boundaries k and k + 1, their midpoint.
      const double a = 0.1 + 0.9 * k / items, b = 0.1 + 0.9 * (k + 1) / items;
      const double mean = (a + b) / 2.0;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  }
  data.push_back(0.0);
  data.push_back(1.0);
  std::sort(data.begin(), data.end());
  DynamicMap m{};
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(data.at(i));
  return m;
}
}  // namespace

const DynamicMap& dynamic_map_signed() {
  static const DynamicMap m = build(true);
  return m;
}
const DynamicMap& dynamic_map_unsigned() {
  static const DynamicMap m = build(false);
  return m;
}

}  // namespace trainlab
