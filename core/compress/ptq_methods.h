// Post-training quantization of a model's weights file by method (issue 40): rtn (round to
// nearest), gptq and awq (the layer algorithms are compress/gptq.h's). What `trainlab-cli quantize
// --method`, the sweep, the sensitivity allocation and the app's quantize dialog run. Every method
// writes the lab's quantized file (io/weights.h), so decoding, evaluation and the sweep read it
// unchanged.
//
// Calibration data: `calibration` batches of the training split (a classification model: batches
// of train.batch rows, consecutive from the start) or windows of the training text (char-gpt:
// `calibration` windows of the model's context drawn from the run's seed), never the data that the
// quantized model is judged on. gptq and awq without calibration data are an Error.
//
// GPTQ quantizes the linear layers in the order of the forward pass, each from its inputs in the
// model whose earlier layers are already quantized (the paper's sequential scheme: one forward over
// the calibration data per layer, on the backend given, the GPTQ itself on the host).
//
// AWQ searches each layer's scale on the fp32 model's inputs and folds 1/s into the operation
// before the layer, which must be exact for any input:
//   char-gpt  qkv and fc: the LayerNorm's weight and bias before them (ln1, ln2); proj: the v rows
//             of qkv (weight and bias; the attention output is a convex combination of v's rows);
//             head: the final LayerNorm. `out` follows the GELU, which is not positively
//             homogeneous (gelu(x/s) != gelu(x)/s), and an explicit multiply of its inputs would be a
//             tensor that the file format and the decoders do not read: out is rounded to nearest.
//   mlp       a layer after a ReLU (or no activation): the previous linear layer's rows and bias
//             (relu(x)/s = relu(x/s) for s > 0). The first layer (the data) and a layer after a
//             GELU are not scaled.
// Then every linear weight (scaled or not) gets its groups' clipping ranges searched on its output
// error over the calibration inputs (clip_quantize), the codes stored as chosen.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compress/quant.h"
#include "data/dataset.h"
#include "data/text.h"
#include "io/weights.h"
#include "tensor/tensor.h"

namespace trainlab {

class Backend;

// "rtn", "gptq", "awq"; throws Error naming the choices.
void check_ptq_method(const std::string& method);

struct PtqMethodOptions {
  std::string method = "rtn";  // quant.method
  double damp = 0.01;          // quant.damp: GPTQ's dampening, a fraction of the mean Hessian diagonal, (0, 1]
  bool act_order = false;      // quant.act_order: GPTQ's columns by descending Hessian diagonal
  int awq_grid = 20;           // AWQ's alpha grid: 0, 1/grid, ..., 1
  double awq_alpha = -1.0;     // AWQ with this alpha in [0, 1] instead of the search (< 0: search)
  void validate() const;       // method and damp, with the keys' names
};

// Model inputs a batch: float features [rows, features] or int32 token windows [windows, context].
struct CalibrationBatch {
  Shape shape;
  std::vector<float> features;
  std::vector<int32_t> tokens;
};

struct CalibrationSet {
  std::vector<CalibrationBatch> batches;
  std::string description;  // "8 batches of 64 rows of the training split (512 samples)"
  int64_t samples = 0;      // rows, or tokens
};

// `batches` batches of `batch` rows from the start of the training split (fewer when it is short).
CalibrationSet classification_calibration(const ClassificationData& train, int64_t batch, int batches);
// `windows` windows of `context` tokens of the training text, drawn from `seed`, 16 a batch.
CalibrationSet text_calibration(const TokenSplit& train, int64_t context, int windows, uint64_t seed);

// AWQ's scaling: the fp32 file with each foldable layer's weight W diag(s) and 1/s folded into
// the operation before it (the model computes the same function, up to rounding); `layers`
// (optional) receives the per-layer report; `codes` (optional) every linear weight's codes after
// the clipping search (clip_quantize, on the scaled weights), which quantize_by_method stores.
SafeTensorsFile awq_scaled_weights(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const QuantPlan& plan,
                                   const PtqMethodOptions& o, const CalibrationSet& cal, nlohmann::json* layers = nullptr,
                                   std::map<std::string, QuantCodes>* codes = nullptr);

// Quantizes an fp32 weights file by the method; rtn needs no calibration. `info` (optional)
// receives the method, the calibration data and per layer the output errors on the calibration
// inputs of rounding to nearest and of the method (mean squared, per output value), and for AWQ
// the alpha chosen and where 1/s was folded (or why not).
SafeTensorsFile quantize_by_method(Backend& be, const SafeTensorsFile& fp32, const std::string& path, const QuantPlan& plan,
                                   const PtqMethodOptions& o, const CalibrationSet& cal, QuantFileReport* report,
                                   nlohmann::json* info = nullptr);

}  // namespace trainlab
