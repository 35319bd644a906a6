#include "config/train_options.h"

#include "util/error.h"

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
  o.init_from = c.get_string("compress.init_from");
  return o;
}

PrecisionOptions precision_options(const Config& c) {
  PrecisionOptions o;
  o.dtype = c.get_string("precision.dtype");
  return o;
}

CheckpointOptions checkpoint_options(const Config& c) {
  return {c.get_string("checkpoint.policy"), c.get_int("checkpoint.k")};
}

int micro_batches(const Config& c) {
  const int64_t m = c.get_int("train.micro_batches"), k = c.get_int("train.accumulate");
  if (m == 0) return static_cast<int>(k);
  if (k != 1 && k != m)
    throw Error("train.micro_batches " + std::to_string(m) + " and train.accumulate " + std::to_string(k) +
                " are the same quantity (micro-batches per optimizer step) and disagree: set one of them (or both to " +
                std::to_string(m) + ")");
  return static_cast<int>(m);
}

TrainOptions train_options(const Config& c) {
  TrainOptions o;
  o.epochs = c.get_int("train.epochs");
  o.steps = c.get_int("train.steps");
  o.batch = c.get_int("train.batch");
  o.accumulate = micro_batches(c);
  o.eval_every = c.get_int("train.eval_every");
  o.eval_windows = c.get_int("train.eval_windows");
  o.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  return o;
}

}  // namespace trainlab
