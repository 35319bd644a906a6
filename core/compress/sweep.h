// The compression sweep (issue 5) on one trained baseline, as one table: what `trainlab-cli sweep`
// runs, as a library function.
//
// 1. trains the fp32 baseline (<out>/runs/baseline, must reach min_accuracy), or takes trained
//    weights (SweepOptions::baseline, e.g. to rerun one table on another device from the same start);
// 2. PTQ: bits 2..8 x {per tensor, per channel, per group of 32} rounded to nearest (method ptq),
//    and per channel and per group of 32 by GPTQ and AWQ (methods ptq-gptq, ptq-awq, calibrated on
//    quant.calibration batches of the training split) (+ W8A8 with calibrated int8 activations),
//    each a real quantized weights file;
// 3. pruning: sparsity {50, 75, 90, 95, 98}% x {one-shot, one-shot + fine-tune, gradual (cubic
//    schedule over the fine-tune steps)} with the classifier kept dense, plus 2:4 + fine-tune,
//    structured (hidden units removed, smaller dense MLP, fine-tuned) and a lottery ticket (rewound
//    to the initialisation);
// 4. QAT vs PTQ at 2, 3, 4 bits (per channel): QAT fine-tunes from the baseline;
// 5. distillation: 64-64 and 16-16 students from the baseline teacher (alpha 0.5, T = 1 and 4) vs
//    the same students on labels alone (same steps and seed);
// 6. measured forward speed of dense vs 2:4-masked dense vs structurally pruned models.
// Writes <out>/sweep.csv and <out>/sweep.json (one row a point: method, granularity, bits, sparsity
// in per cent, test_accuracy, model_bytes, bits_per_weight, train_steps, forward_ms, run_dir), and
// a run record per point under <out>/runs/ (trainings: the trainer's record; post-training points:
// point.json and the compressed weights).
//
// The sweep trains through a callback (compress/ sits below train/): each training point is a list
// of config overrides (dotted key, text) that the caller applies, in order, to the sweep's base
// config before running the trainer. A section whose operations the backend does not support
// (Backend::supports) is skipped with a note in the table instead of ending the sweep.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace trainlab {

class Backend;

struct SweepOptions {
  std::string model;          // the model swept (named in the table)
  std::string out;            // output folder: table and run records
  std::string baseline;       // trained fp32 weights to start from ("" = train a baseline)
  long steps = 0;             // baseline optimizer steps (0: the base config's epochs)
  // Fine-tuning steps of every pruning / QAT point. 1000 (1.5x the baseline's 660) lets the 95-98 %
  // points recover to a stable accuracy: with 300 the 98 % rows were still collapsing (35-54 %) and a
  // rounding difference between devices moved them by several test samples.
  long finetune = 1000;
  double min_accuracy = 0.97;  // the baseline must reach this test accuracy
  int64_t speed_rows = 4096;   // batch rows of the forward-speed measurement
  bool overwrite = false;      // replace the run records of an earlier sweep in `out` (else refused)
  // From the base config:
  int64_t seed = 0;              // train.seed (checked against a --baseline run's config.json)
  int64_t batch = 0;             // train.batch (W8A8 calibration batch rows)
  int calibration_batches = 0;   // quant.calibration_batches
  int calibration = 0;           // quant.calibration: gptq / awq batches of `batch` rows (0: no gptq / awq rows)
  double damp = 0.01;            // quant.damp
  bool act_order = false;        // quant.act_order
  bool include_output = false;   // prune.include_output
};

struct SweepRow {
  std::string method, granularity = "-";
  int bits = 32;
  double sparsity = 0.0;  // per cent
  double test_accuracy = 0.0;
  int64_t model_bytes = 0;
  double bits_per_weight = 32.0;
  long train_steps = 0;
  double forward_ms = 0.0;
  std::string run_dir, note;
  nlohmann::json to_json() const;
};

struct SweepTable {
  std::vector<SweepRow> rows;
  nlohmann::json header;  // model, device, baseline_weights, steps, wall_s, speed, skipped
  nlohmann::json to_json() const;  // header + "rows"
  std::string to_csv() const;
};

using SweepSets = std::vector<std::pair<std::string, std::string>>;
struct SweepTrained {  // what the sweep needs of a finished training run
  std::string status, message;  // "completed" or why not
  double test_accuracy = 0.0, final_train_loss = 0.0;  // NaN: no value (a run that did not complete)
  long steps = 0;
  int64_t params = 0;
};
using SweepTrain = std::function<SweepTrained(const SweepSets& sets)>;
using SweepLog = std::function<void(const std::string& line)>;

// Runs the sweep on `data` (the base config's split) with `be` for the post-training points, and
// writes the table files. Throws Error when the baseline misses min_accuracy or a point fails.
SweepTable run_sweep(Backend& be, const TrainTestSplit& data, const SweepOptions& o, const SweepTrain& train,
                     const SweepLog& log);

}  // namespace trainlab
