#include "config/train_options.h"

namespace trainlab {

DataOptions data_options(const Config& c) {
  DataOptions o;
  o.name = c.get_string("data.name");
  o.path = c.get_string("data.path");
  o.test_fraction = c.get_float("data.test_fraction");
  o.val_fraction = c.get_float("data.val_fraction");
  o.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  return o;
}

ModelOptions model_options(const Config& c) {
  ModelOptions o;
  o.name = c.get_string("model.name");
  o.hidden = c.get_int_list("model.hidden");
  o.activation = c.get_string("model.activation");
  o.preset = c.get_string("model.preset");
  o.layers = c.get_int("model.layers");
  o.heads = c.get_int("model.heads");
  o.dim = c.get_int("model.dim");
  o.context = c.get_int("model.context");
  o.pad_vocab = c.get_bool("model.pad_vocab");
  o.dropout = c.get_float("model.dropout");
  return o;
}

PrecisionOptions precision_options(const Config& c) {
  PrecisionOptions o;
  o.dtype = c.get_string("precision.dtype");
  o.loss_scale_enabled = c.get_bool("precision.loss_scale.enabled");
  o.loss_scale_init = c.get_float("precision.loss_scale.init");
  o.loss_scale_growth_interval = c.get_int("precision.loss_scale.growth_interval");
  return o;
}

CheckpointOptions checkpoint_options(const Config& c) {
  return {c.get_string("checkpoint.policy"), c.get_int("checkpoint.k")};
}

OptimOptions optim_options(const Config& c) {
  OptimOptions o;
  o.name = c.get_string("optim.name");
  o.lr = c.get_float("optim.lr");
  o.beta1 = c.get_float("optim.beta1");
  o.beta2 = c.get_float("optim.beta2");
  o.eps = c.get_float("optim.eps");
  o.weight_decay = c.get_float("optim.weight_decay");
  o.momentum = c.get_float("optim.momentum");
  o.nesterov = c.get_bool("optim.nesterov");
  return o;
}

ScheduleOptions schedule_options(const Config& c) {
  return {c.get_string("schedule.name"), c.get_int("schedule.warmup_steps"), c.get_float("schedule.min_lr")};
}

TrainOptions train_options(const Config& c) {
  TrainOptions o;
  o.epochs = c.get_int("train.epochs");
  o.steps = c.get_int("train.steps");
  o.batch = c.get_int("train.batch");
  o.accumulate = static_cast<int>(c.get_int("train.accumulate"));
  o.eval_every = c.get_int("train.eval_every");
  o.eval_windows = c.get_int("train.eval_windows");
  o.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  return o;
}

}  // namespace trainlab
