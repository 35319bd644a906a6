// Model weights on disk: the one place that saves and loads them (dense fp32 and packed quantized)
// and the one function that validates their metadata.
//
// A weights file is a safetensors file (io/safetensors.h) whose tensors carry the model's parameter
// names (the PyTorch peer's names, [out, in] layouts) and whose metadata holds
//   "trainlab_architecture"  JSON: what nn::build_model needs to rebuild the model;
//   "trainlab_config"        JSON: the resolved config of the run that wrote it (when a run did);
//   "trainlab_quant"         JSON, quantized files only: per quantized weight W its bits,
//                            granularity, group and shape.
// A quantized file stores each quantized weight W [rows, cols] (DOMAIN.md section 5) as
//   "W.qweight"  I8 [rows, cols] (8 bits) or U8 [ceil(rows*cols*b/8)] (b < 8: codes packed
//                little-endian, b bits each, element i at bit offset b*i: tensor/quant_format.h)
//   "W.scales"   F16 [ceil(rows*cols / group)]
// and every other tensor (biases) unchanged in F32. Bits a weight = (code bytes + scale bytes) * 8 /
// weights, so 4 bits with groups of 32 is 4 + 16/32 = 4.5 exactly. Dequantization is s * q in fp32
// (exact: q is a small integer and s an fp16 value).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/safetensors.h"
#include "tensor/quant_format.h"

namespace trainlab {

class Backend;
class Model;

// --- metadata -------------------------------------------------------------------------------------

struct QuantEntry {  // one quantized weight of a quantized file, checked against its tensors
  std::string name;  // the weight's name ("net.0.weight"); tensors name.qweight and name.scales
  QuantSpec spec;
  Shape shape;        // [rows, cols] of the dense weight
  int64_t group = 0;  // elements per scale (spec.group_size(rows, cols))
};

struct WeightsMetadata {
  Json architecture;  // null when the file has none
  Json config;        // null when the file has none
  bool quantized = false;
  std::vector<QuantEntry> quant;  // file order
};

// Every check of a weights file's metadata against the tensors present (weights_check.cpp), so
// that nothing is built, allocated or opened from a number or a name the file's bytes do not back:
//  - the trainlab_* metadata parse as JSON objects nested at most 32 levels (the parse error's
//    position is reported, never the text); at most 65536 tensors, no name twice, each holding
//    exactly the bytes its dtype and shape need (a file made in memory is checked too);
//  - each trainlab_quant entry: bits an integer in [2, 8], granularity tensor/channel/group, group
//    an integer that divides the input features, shape two integers in [1, 2^31 - 1];
//    W.qweight I8 [rows, cols] (8 bits) or U8 [ceil(n*b/8)] with exactly those bytes; W.scales
//    F16 [groups], finite and non-negative; every .qweight/.scales has an entry and every entry
//    its codes; no weight is stored both dense and quantized;
//  - every other tensor is a value: F32, F16, BF16, F8_E4M3 or F8_E5M2;
//  - the architecture, when present, against the tensors: every parameter of the model it
//    describes (nn/model.h visit_architecture, strict about its keys) is in the file with the
//    model's shape (a quantized one by its entry's shape), checked before any model is built.
// Throws Error naming `path`, the tensor or metadata key and what was expected; names from the
// file are printed with printable_name, values from the file are not printed.
WeightsMetadata validate_weights_metadata(const SafeTensorsFile& f, const std::string& path);

// The config of a file's trainlab_config metadata, read tolerantly (Config::from_record), to
// evaluate the weights again; `user_settings` (the caller's --set items) is applied on top. A
// weights file never makes the lab open a path: the keys that name files (data.path,
// compress.init_from, distill.teacher, run.out) are cleared, and when the file's run read its data
// from data.path, `user_settings` must name the data again, else Error saying to give
// --set data.path=FILE. Throws Error naming `path` when the file has no trainlab_config.
Config weights_config(const SafeTensorsFile& f, const std::string& path,
                      const std::function<void(Config&)>& user_settings = {});

// The vocabulary a char-gpt file stores (its architecture's "chars", UTF-8; "" for other files or
// files without one): a text is tokenised with it to evaluate the file (data/data_sources.h's
// load_text_data), so a model fine-tuned on a text with fewer characters reads that text again.
std::string stored_vocabulary(const SafeTensorsFile& f);

// --- the quantized file format ------------------------------------------------------------------

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

// A linear weight: a rank-2 tensor named *.weight. Only these are quantized (and pruned).
bool is_linear_weight(const std::string& name, const Shape& shape);

// The spec of each linear weight, by name (compress's QuantPlan::spec_for).
using QuantSpecFor = std::function<QuantSpec(const std::string& tensor_name)>;
// fp32 weights file (as a run writes) -> quantized weights file (real low-bit storage).
SafeTensorsFile quantize_weights(const SafeTensorsFile& fp32, const QuantSpecFor& spec_for, QuantFileReport* report);
// Codes and scales of a weight computed by another method than rounding to nearest (GPTQ): the
// file stores them as they are, in the same format (codes [rows * cols] in [-qmax, qmax], one
// fp16-representable scale a group of the spec).
struct QuantCodes {
  std::vector<float> scales;
  std::vector<int8_t> codes;
};
// As above; a weight named in `given` is stored with its codes (Error naming it when their sizes
// or range do not fit its spec), every other one rounded to nearest.
SafeTensorsFile quantize_weights(const SafeTensorsFile& fp32, const QuantSpecFor& spec_for, QuantFileReport* report,
                                 const std::map<std::string, QuantCodes>& given);
// Quantized weights file -> fp32 tensors (dequantized), same names as the original; a dense file is
// returned as it is. Validates the metadata first.
SafeTensorsFile dequantize_weights(const SafeTensorsFile& quantized, const std::string& path = "weights");
bool is_quantized_file(const SafeTensorsFile& f);
// Bytes of a file's tensors as stored (for a dense file, its fp32 size).
int64_t tensor_bytes(const SafeTensorsFile& f);

// --- models ---------------------------------------------------------------------------------------

// The model's fp32 masters as an in-memory weights file, with the architecture (and the config,
// when given: a null Json leaves trainlab_config out).
SafeTensorsFile model_to_file(Backend& be, Model& model, const Json& config = Json());
// model_to_file written to `path` with the run's config: what a run saves, what `trainlab-cli
// eval` and PyTorch's load_state_dict read.
void save_model_weights(Backend& be, Model& model, const Config& config, const std::string& path);
// Loads a weights file, fp32 or quantized (dequantized on load), into an existing model's masters
// and compute values: every parameter must be present with the model's shape. `path` names the file
// in errors.
void load_weights_any(Backend& be, Model& model, const SafeTensorsFile& f, const std::string& path);
// load_weights_any on the file at `path` (read here).
void load_model_weights(Backend& be, Model& model, const std::string& path);
// Builds the model of a file's architecture (seed 0) and loads its weights; the architecture is
// checked against the tensors first (validate_weights_metadata), so the model is as large as the
// file's bytes say, never larger.
std::unique_ptr<Model> model_from_file(Backend& be, const SafeTensorsFile& f, const std::string& path);
// read_safetensors + model_from_file.
std::unique_ptr<Model> load_model_file(Backend& be, const std::string& path);

}  // namespace trainlab
