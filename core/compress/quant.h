// Quantization (DOMAIN.md section 5): symmetric uniform b-bit codes with one fp16 scale per group.
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
// int8). Scales are fp16. A quantized weights file (safetensors) holds for each quantized weight W:
//   "W.qweight"  I8 [rows, cols] (8 bits) or U8 [ceil(rows*cols*b/8)] (packed, b < 8)
//   "W.scales"   F16 [number of groups]
// other tensors (biases) unchanged in F32, and metadata "trainlab_quant" (JSON: per weight its bits,
// granularity, group and shape). Bits a weight = (code bytes + scale bytes) * 8 / weights, so 4
// bits with groups of 32 is 4 + 16/32 = 4.5 exactly.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tensor/quant_format.h"

namespace trainlab {

class Backend;
class Model;

// Which weights of a model get quantized, and how: a default spec for every linear weight
// (rank-2 tensors named *.weight) and per-layer overrides by tensor or layer name prefix.
struct QuantPlan {
  QuantSpec default_spec;
  std::map<std::string, QuantSpec> overrides;  // "net.4" or "net.4.weight" -> spec
  // Parses "net.4:8:channel,net.0:4:group:64" (layer:bits[:granularity[:group]]).
  static QuantPlan parse(const QuantSpec& def, const std::string& overrides_text);
  const QuantSpec& spec_for(const std::string& tensor_name) const;
  static bool quantizable(const std::string& name, const Shape& shape);
};

struct QuantFileReport {
  int64_t quantized_weights = 0;  // weights stored as codes
  int64_t code_bytes = 0, scale_bytes = 0;
  int64_t other_bytes = 0;        // tensors kept in fp32 (biases)
  int64_t model_bytes = 0;        // all tensor bytes (codes + scales + others)
  int64_t file_bytes = 0;         // header included (0 until written)
  double bits_per_weight() const {
    return quantized_weights ? 8.0 * static_cast<double>(code_bytes + scale_bytes) / static_cast<double>(quantized_weights) : 0.0;
  }
  nlohmann::json to_json() const;
};

// fp32 weights file (as a run writes) -> quantized weights file (real low-bit storage).
SafeTensorsFile quantize_weights(const SafeTensorsFile& fp32, const QuantPlan& plan, QuantFileReport* report);
// Quantized weights file -> fp32 tensors (dequantized), same names as the original.
SafeTensorsFile dequantize_weights(const SafeTensorsFile& quantized);
bool is_quantized_file(const SafeTensorsFile& f);
// Bytes of a file's tensors when every tensor is fp32 (the dense baseline).
int64_t tensor_bytes(const SafeTensorsFile& f);

// Loads a weights file, fp32 or quantized (dequantized on load), into a model's masters/values.
void load_weights_any(Backend& be, Model& model, const SafeTensorsFile& f, const std::string& path_for_errors);
// The model's fp32 masters as an in-memory safetensors file (with the model's architecture).
SafeTensorsFile model_to_file(Backend& be, Model& model);

}  // namespace trainlab
