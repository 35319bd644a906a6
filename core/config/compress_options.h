// The compression options (quant.*, prune.*, distill.*, compress.*) as plain values: what
// compress/ works from, so that it never holds the run's Config. compress_options(config) reads
// them; the trainer reads them again when a mid-run key changed and hands them to
// Compression::on_setting. The meaning, range and default of each field is the schema's
// (config_schema.cpp); the fields below have no defaults of their own.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"

namespace trainlab {

struct QuantOptions {
  std::string mode;         // quant.mode: "none" or "qat"
  int bits = 0;             // quant.bits, 2..8
  std::string granularity;  // quant.granularity: "tensor", "channel" or "group"
  int group = 0;            // quant.group: weights per scale with granularity "group"
  std::string overrides;    // quant.overrides: "layer:bits[:granularity[:group]],..."
  int calibration_batches = 0;  // quant.calibration_batches (W8A8 activation scales)
  std::string method;       // quant.method: "rtn", "gptq" or "awq" (post-training)
  int calibration = 0;      // quant.calibration: batches (digits) or windows (char-gpt) for gptq / awq
  double damp = 0.0;        // quant.damp: gptq's dampening, a fraction of the mean Hessian diagonal
  bool act_order = false;   // quant.act_order: gptq's column order
  bool qat() const { return mode == "qat"; }
};

struct PruneOptions {
  std::string method;            // prune.method: "none", "magnitude", "gradual" or "2:4"
  double sparsity = 0.0;         // prune.sparsity: the target (final) fraction of zeros
  double initial_sparsity = 0.0; // prune.initial_sparsity (gradual)
  long start_step = 0;           // prune.start_step
  long interval = 0;             // prune.interval (gradual)
  int n_steps = 0;               // prune.n_steps (gradual)
  bool global_scope = false;     // prune.scope == "global"
  bool include_output = false;   // prune.include_output
  bool rewind = false;           // prune.rewind (lottery ticket)
  long rewind_step = 0;          // prune.rewind_step
  double now = 0.0;              // prune.now (mid-run one-shot prune; 0 = none)
};

struct DistillOptions {
  std::string teacher;        // distill.teacher: weights file of the teacher ("" = no distillation)
  double alpha = 0.0;         // distill.alpha
  double temperature = 0.0;   // distill.temperature
};

struct CompressOptions {
  QuantOptions quant;
  PruneOptions prune;
  DistillOptions distill;
  std::string init_from;  // compress.init_from: weights to start from ("" = the model's initialisation)
  int accumulate = 1;     // train.accumulate (the distillation gradient's 1 / (batch * accumulate))
  Json run_config;        // the resolved config, stored in the metadata of a quantized weights file
};

QuantOptions quant_options(const Config& c);
PruneOptions prune_options(const Config& c);
DistillOptions distill_options(const Config& c);
CompressOptions compress_options(const Config& c);

}  // namespace trainlab
