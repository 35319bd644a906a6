// Quantization (DOMAIN.md section 5): symmetric uniform b-bit codes with one fp16 scale per group.
//
//   qmax = 2^(b-1) - 1;  s = fp16(max|w| / qmax) over the group;  q = clamp(rne(w / s), -qmax, qmax);
//   value = s * q.  A group of zeros has s = 0 and q = 0.
//
// Granularity is expressed as a group size over the row-major elements of a [rows, cols] weight:
// per tensor = one group of rows*cols, per output channel = groups of cols (one per row), per group
// g = groups of g consecutive weights inside a row (g must divide cols).
//
// The quantized weights file (real storage: packed codes + fp16 scales) and its validation are
// io/weights.h; this header keeps the plan of which weights get which spec.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/compress_options.h"
#include "io/weights.h"
#include "tensor/quant_format.h"

namespace trainlab {

// Which weights of a model get quantized, and how: a default spec for every linear weight
// (rank-2 tensors named *.weight) and per-layer overrides by tensor or layer name prefix.
struct QuantPlan {
  QuantSpec default_spec;
  std::map<std::string, QuantSpec> overrides;  // "net.4" or "net.4.weight" -> spec
  // Parses "net.4:8:channel,net.0:4:group:64" (layer:bits[:granularity[:group]]).
  static QuantPlan parse(const QuantSpec& def, const std::string& overrides_text);
  const QuantSpec& spec_for(const std::string& tensor_name) const;
  static bool quantizable(const std::string& name, const Shape& shape);
  // The plan of quant.bits/granularity/group (the default) and quant.overrides.
  static QuantPlan from_options(const QuantOptions& o);
};

// fp32 weights file -> quantized weights file with the plan's spec for each linear weight.
SafeTensorsFile quantize_weights(const SafeTensorsFile& fp32, const QuantPlan& plan, QuantFileReport* report);

}  // namespace trainlab
