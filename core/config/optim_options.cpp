#include "config/optim_options.h"

#include "util/error.h"

namespace trainlab {

OptimOptions optim_options(const Config& c) {
  OptimOptions o;
  OptimizerOptions& opt = o.optimizer;
  opt.name = c.get_string("optim.name");
  opt.lr = c.get_float("optim.lr");
  opt.beta1 = c.get_float("optim.beta1");
  opt.beta2 = c.get_float("optim.beta2");
  opt.eps = c.get_float("optim.eps");
  opt.weight_decay = c.get_float("optim.weight_decay");
  opt.momentum = c.get_float("optim.momentum");
  opt.nesterov = c.get_bool("optim.nesterov");
  opt.block_size = c.get_int("optim.block_size");
  if (opt.block_size != 256 && opt.block_size != 2048)
    throw Error("optim.block_size " + std::to_string(opt.block_size) + ": expected 256 or 2048");
  opt.stable_embedding = c.get_bool("optim.stable_embedding");
  opt.lion_state = c.get_string("optim.lion_state");
  opt.adafactor_beta1 = c.get_float("optim.adafactor_beta1");
  opt.relative_step = c.get_bool("optim.relative_step");
  opt.offload = c.get_string("optim.offload");
  o.schedule.name = c.get_string("schedule.name");
  o.schedule.warmup_steps = c.get_int("schedule.warmup_steps");
  o.schedule.min_lr = c.get_float("schedule.min_lr");
  o.loss_scale.init = c.get_float("precision.loss_scale.init");
  o.loss_scale.growth_interval = c.get_int("precision.loss_scale.growth_interval");
  o.loss_scale.enabled = c.get_bool("precision.loss_scale.enabled");
  o.clip_norm = c.get_float("optim.clip_norm");
  return o;
}

}  // namespace trainlab
