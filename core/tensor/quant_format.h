// Quantization formats (DOMAIN.md section 5): symmetric uniform b-bit codes with one fp16 scale per group.
//
//   qmax = 2^(b-1) - 1;  s = fp16(max|w| / qmax) over the group;  q = clamp(rne(w / s), -qmax, qmax);
//   value = s * q.  A group of zeros has s = 0 and q = 0.
//
// Granularity is expressed as a group size over the row-major elements of a [rows, cols] weight:
// per tensor = one group of rows*cols, per output channel = groups of cols (one per row), per group
// g = groups of g consecutive weights inside a row (g must divide cols).
//
// Real storage: codes are packed little-endian, b bits each, element i at bit offset b*i (for
// b = 4 that is two weights a byte, low nibble first, the layout of DType::I4; for b = 8 plain
// int8). Scales are fp16.
// The weights-file layout of quantized tensors is in compress/quant.h.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainlab {

enum class QuantGranularity : uint8_t { Tensor, Channel, Group };
const char* granularity_name(QuantGranularity g);  // "tensor", "channel", "group"
QuantGranularity granularity_from_name(const std::string& s);  // throws Error naming the choices

struct QuantSpec {
  int bits = 8;
  QuantGranularity granularity = QuantGranularity::Channel;
  int group = 32;  // for Granularity::Group

  int qmax() const { return (1 << (bits - 1)) - 1; }
  // Elements per scale for a [rows, cols] matrix; throws Error when bits or group do not fit (or
  // the matrix is empty or has more than 2^63 - 1 elements).
  int64_t group_size(int64_t rows, int64_t cols) const;
  std::string label() const;  // "int4 group-32", "int8 channel"
  nlohmann::json to_json() const;
  // Strict (it reads files): an object whose optional bits is an integer in [2, 8], granularity
  // one of tensor/channel/group, group an integer >= 1; throws Error naming the key, never echoing
  // its value.
  static QuantSpec from_json(const nlohmann::json& j);
};

// Host reference of the formula above. `group` elements share a scale (see QuantSpec::group_size).
// scales receive n/group fp16-representable values, codes n values in [-qmax, qmax].
void quantize_groups(const float* w, int64_t n, int bits, int64_t group, float* scales, int8_t* codes);
// out = s * q, the fake-quantized values (w and out may alias).
void fake_quantize_host(const float* w, float* out, int64_t n, int bits, int64_t group);

// Little-endian b-bit packing of two's-complement codes (b = 4: two a byte, low nibble first).
std::vector<uint8_t> pack_codes(const std::vector<int8_t>& codes, int bits);
// Throws Error when `packed` holds fewer than n * bits bits (or n < 0, bits outside 2..8).
std::vector<int8_t> unpack_codes(const std::vector<uint8_t>& packed, int64_t n, int bits);

}  // namespace trainlab
