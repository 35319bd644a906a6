// Typed options of optim/: the optimizer, its learning-rate schedule and fp16 loss scaling, read
// from the optim.*, schedule.* and precision.loss_scale.* keys (config_schema.cpp states their
// ranges, defaults and meaning). Plain values: optim/ is built from these and never sees a Config.
// The defaults here are the schema's (a test holds them equal).
#pragma once
#include <string>

#include "config/config.h"

namespace trainlab {

struct OptimizerOptions {
  std::string name = "adamw";  // "adamw" | "sgd" | "adamw8bit" | "adafactor" | "lion"
  double lr = 1e-3;            // peak learning rate (the schedule's base)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  double weight_decay = 0.01;                     // AdamW (decoupled) and SGD (L2 on the gradient)
  double momentum = 0.9;                          // SGD; 0: no momentum buffer
  bool nesterov = false;                          // SGD
  long block_size = 2048;                         // adamw8bit: 2048 or 256
  bool stable_embedding = false;                  // adamw8bit: embeddings' moments in fp32
  std::string lion_state = "fp32";                // lion: "fp32" | "bf16"
  double adafactor_beta1 = 0.0;                   // adafactor: 0 = no first moment
  bool relative_step = false;                     // adafactor
  std::string offload = "none";                   // "none" | "cpu": masters and state in host memory (optim/offload.h)
};

struct ScheduleOptions {
  std::string name = "constant";  // "constant" | "warmup-cosine"
  long warmup_steps = 0;
  double min_lr = 0.0;  // warmup-cosine: lr at the last step
};

struct LossScaleOptions {
  double init = 65536.0;
  long growth_interval = 2000;
  bool enabled = true;  // dynamic loss scaling in fp16 runs (other formats never scale)
};

struct OptimOptions {
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  LossScaleOptions loss_scale;
  // optim.clip_norm: the gradient's global L2 norm (all parameters together; over every rank's
  // share in a run over several ranks) is scaled down to at most this before the update; 0: off.
  double clip_norm = 0.0;
};

OptimOptions optim_options(const Config& c);

}  // namespace trainlab
