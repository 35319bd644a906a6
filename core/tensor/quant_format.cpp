#include "tensor/quant_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

const char* granularity_name(QuantGranularity g) {
  switch (g) {
    case QuantGranularity::Tensor: return "tensor";
    case QuantGranularity::Channel: return "channel";
    case QuantGranularity::Group: return "group";
  }
  return "?";
}

QuantGranularity granularity_from_name(const std::string& s) {
  if (s == "tensor" || s == "per-tensor") return QuantGranularity::Tensor;
  if (s == "channel" || s == "per-channel") return QuantGranularity::Channel;
  if (s == "group" || s == "per-group") return QuantGranularity::Group;
  throw Error("unknown quantization granularity '" + s + "': expected tensor, channel or group");
}

int64_t QuantSpec::group_size(int64_t rows, int64_t cols) const {
  if (bits < 2 || bits > 8) throw Error("quantization bits must be 2..8, got " + std::to_string(bits));
  int64_t n = 0;
  if (rows < 1 || cols < 1 || __builtin_mul_overflow(rows, cols, &n))
    throw Error("quantization needs a [rows, cols] matrix of at most 2^63 - 1 elements, got [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
  switch (granularity) {
    case QuantGranularity::Tensor: return n;
    case QuantGranularity::Channel: return cols;
    case QuantGranularity::Group:
      if (group <= 0 || cols % group != 0)
        throw Error("quantization group " + std::to_string(group) + " does not divide the " + std::to_string(cols) +
                    " input features of a layer (use 32, 64 or 128, or per-channel)");
      return group;
  }
  return cols;
}

std::string QuantSpec::label() const {
  std::string s = "int" + std::to_string(bits) + " " + granularity_name(granularity);
  if (granularity == QuantGranularity::Group) s += "-" + std::to_string(group);
  return s;
}

nlohmann::json QuantSpec::to_json() const {
  nlohmann::json j = {{"bits", bits}, {"granularity", granularity_name(granularity)}};
  if (granularity == QuantGranularity::Group) j["group"] = group;
  return j;
}

namespace {
// An optional integer key of a spec object, in [lo, hi] (a float, bool or string is refused, not
// truncated).
int spec_int(const nlohmann::json& j, const char* key, int def, int lo, int hi) {
  const auto it = j.find(key);
  if (it == j.end()) return def;
  const bool integer = it->is_number_integer();
  if (!integer || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    throw Error(std::string("key '") + key + "': expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return it->get<int>();
}
}  // namespace

QuantSpec QuantSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("expected a JSON object {bits, granularity, group}");
  QuantSpec s;
  s.bits = spec_int(j, "bits", 8, 2, 8);
  const auto g = j.find("granularity");
  if (g != j.end()) {
    // The name is not echoed: it comes from a file.
    const std::string name = g->is_string() ? g->get<std::string>() : std::string();
    if (name != "tensor" && name != "channel" && name != "group")
      throw Error("key 'granularity': expected tensor, channel or group");
    s.granularity = granularity_from_name(name);
  }
  s.group = spec_int(j, "group", 32, 1, INT32_MAX);
  return s;
}

void quantize_groups(const float* w, int64_t n, int bits, int64_t group, float* scales, int8_t* codes) {
  const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
  for (int64_t g0 = 0, gi = 0; g0 < n; g0 += group, ++gi) {
    const int64_t g1 = std::min(n, g0 + group);
    float mx = 0.0f;
    for (int64_t i = g0; i < g1; ++i) mx = std::max(mx, std::fabs(w[i]));
    float s = round_to(DType::F16, mx / qmax);
    if (!std::isfinite(s)) s = 65504.0f;  // fp16's largest: scales beyond it saturate
    scales[gi] = s;
    for (int64_t i = g0; i < g1; ++i) {
      float q = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
      q = std::clamp(q, -qmax, qmax);
      codes[i] = static_cast<int8_t>(q);
    }
  }
}

void fake_quantize_host(const float* w, float* out, int64_t n, int bits, int64_t group) {
  const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    const int64_t g1 = std::min(n, g0 + group);
    float mx = 0.0f;
    for (int64_t i = g0; i < g1; ++i) mx = std::max(mx, std::fabs(w[i]));
    float s = round_to(DType::F16, mx / qmax);
    if (!std::isfinite(s)) s = 65504.0f;
    for (int64_t i = g0; i < g1; ++i) {
      float q = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
      out[i] = s * std::clamp(q, -qmax, qmax);
    }
  }
}

std::vector<uint8_t> pack_codes(const std::vector<int8_t>& codes, int bits) {
  if (bits == 8) {
    std::vector<uint8_t> out(codes.size());
    std::memcpy(out.data(), codes.data(), codes.size());
    return out;
  }
  const uint32_t mask = (1u << bits) - 1u;
  std::vector<uint8_t> out((codes.size() * static_cast<size_t>(bits) + 7) / 8, 0);
  size_t bit = 0;
  for (int8_t c : codes) {
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(c)) & mask;
    for (int b = 0; b < bits; ++b, ++bit)
      if (u >> b & 1u) out[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  }
  return out;
}

std::vector<int8_t> unpack_codes(const std::vector<uint8_t>& packed, int64_t n, int bits) {
  if (n < 0 || bits < 2 || bits > 8) throw Error("packed codes: " + std::to_string(n) + " weights of " + std::to_string(bits) + " bits");
  // Bits needed, without overflow: n * bits <= packed.size() * 8.
  const uint64_t un = static_cast<uint64_t>(n), have = packed.size();
  if (un / 8 * static_cast<uint64_t>(bits) + (un % 8 * static_cast<uint64_t>(bits) + 7) / 8 > have)
    throw Error("packed int" + std::to_string(bits) + " codes: " + std::to_string(packed.size()) + " bytes for " +
                std::to_string(n) + " weights");
  std::vector<int8_t> out(static_cast<size_t>(n));
  if (bits == 8) {
    std::memcpy(out.data(), packed.data(), out.size());
    return out;
  }
  size_t bit = 0;
  const int32_t sign = 1 << (bits - 1);
  for (int64_t i = 0; i < n; ++i) {
    int32_t u = 0;
    for (int b = 0; b < bits; ++b, ++bit) u |= ((packed[bit / 8] >> (bit % 8)) & 1) << b;
    out[static_cast<size_t>(i)] = static_cast<int8_t>(u >= sign ? u - (sign << 1) : u);
  }
  return out;
}

}  // namespace trainlab
