// Compression of a finished run's weights file, what `trainlab-cli quantize`, `prune` and `eval`
// run: post-training quantization to real low-bit storage, one-shot pruning, and the test figures
// of a weights file (fp32 or quantized; for the character model, its validation figures). The
// reports are JSON (the command prints them).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "compress/ptq_methods.h"
#include "data/dataset.h"
#include "data/text.h"
#include "io/weights.h"

namespace trainlab {

class Backend;

// What a weights file is measured on: a classification split, or (the character model) the
// validation tokens with the run's seed (the trainer's validation windows).
struct EvalData {
  const TrainTestSplit* classes = nullptr;
  const TokenSplit* text_val = nullptr;
  const TokenSplit* text_train = nullptr;  // the character model: gptq / awq calibration windows
  uint64_t seed = 0;  // train.seed of the run
  int64_t batch = 0;  // train.batch of the run (W8A8 calibration batch rows)
};

struct PtqOptions {
  PtqMethodOptions method;    // rtn, gptq or awq, with gptq's damp and act-order
  int calibration = 16;       // gptq / awq: batches of train.batch rows, or char-gpt windows (0 = none)
  QuantSpec spec;             // the default spec of every linear weight
  std::string overrides;      // per-layer specs (QuantPlan::parse)
  std::string out;            // quantized weights file to write ("" = none)
  bool w8a8 = false;          // also W8A8 (int8 weights and activations): a digits MLP only
  int calibration_batches = 8;
  int64_t val_windows = 64;   // text model: validation windows for the loss of both files
};

// The calibration data of gptq / awq for a weights file: `n` batches of data.batch rows of the
// classification training split, or `n` windows of the model's context of the training text.
CalibrationSet calibration_for(const SafeTensorsFile& f, const std::string& path, const EvalData& data, int n);

// Quantizes an fp32 weights file (`path` names it) by the method and measures both files: test
// accuracy, or for the character model the validation loss; sizes and bits a weight; the method,
// its calibration data and its per-layer output errors; optionally W8A8.
nlohmann::json quantize_report(Backend& be, const SafeTensorsFile& f, const std::string& path, const PtqOptions& o,
                               const EvalData& data);

struct PruneFileOptions {
  std::string method = "magnitude";  // magnitude, 2:4 or structured
  double sparsity = 0.5;  // fraction removed: of the weights (magnitude) or of the hidden units (structured)
  bool global_scope = false;  // magnitude: one threshold over all layers instead of one per layer
  std::string out;        // pruned weights file ("" = none; structured writes the smaller model)
  int64_t rows = 4096;    // batch rows of the speed measurement
};

// One-shot pruning of a weights file with the sparsity per layer, the sparse encoding's size and
// the measured speed of dense vs 2:4-masked vs structurally pruned forward passes.
nlohmann::json prune_report(Backend& be, const SafeTensorsFile& f, const std::string& path, const PruneFileOptions& o,
                            const TrainTestSplit& data);

struct WeightsEval {
  int64_t samples = 0;
  double accuracy = 0.0;
  double loss = 0.0;  // mean cross-entropy
};

// Test accuracy and loss of a weights file (fp32, or quantized: dequantized on load), computed as a
// run computes its test figures: chunks of 256 rows, fp32 sums of softmax_xent's statistics.
WeightsEval evaluate_weights(Backend& be, const SafeTensorsFile& f, const std::string& path, const ClassificationData& test);

struct TextWeightsEval {
  int64_t windows = 0, tokens = 0;  // validation windows scored, and their tokens (windows * context)
  double loss = 0.0;                // mean next-token cross-entropy (nats)
  double accuracy = 0.0;            // fraction of next tokens predicted (argmax)
};

// The validation figures of a char-gpt weights file (fp32, or quantized: dequantized on load),
// computed as the trainer computes a text run's val_loss and its summary's test_loss: `windows`
// windows of the validation split drawn from the run's seed (train.eval_windows, train.seed),
// `batch` windows a forward (train.batch), fp32 sums of softmax_xent's statistics. For a run trained
// in fp32 these are its summary's numbers. Throws Error naming `path` when the file is not a
// char-gpt model or `text`'s vocabulary is not the model's (its token ids would mean other
// characters, or lie past the embedding).
TextWeightsEval evaluate_text_weights(Backend& be, const SafeTensorsFile& f, const std::string& path, const TextCorpus& text,
                                      int64_t windows, int64_t batch, uint64_t seed);

}  // namespace trainlab
