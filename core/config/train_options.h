// Typed option structs of the training parts (data, model, precision, checkpointing, optimizer,
// schedule, the training loop), each built from a Config by one function. The layers that take
// them (data/, optim/, train/'s tasks) see plain values, never the Config object or the schema's
// dotted keys; the builders are the one place that maps keys to fields (the schema, in
// config_schema.cpp, holds ranges and help). A default-constructed struct equals the builder's
// result for a default Config (tests/unit/test_train_options.cpp holds them together).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/optim_options.h"

namespace trainlab {

struct DataOptions {
  std::string name = "digits";  // data.name: digits | fashion-mnist | idx | tinyshakespeare | text
  std::string path;             // data.path: empty means the bundled or installed default
  double test_fraction = 0.2;   // data.test_fraction (digits: the seeded test split)
  double val_fraction = 0.1;    // data.val_fraction (text: the validation chunks)
  uint64_t seed = 1;            // train.seed: the split's and the chunks' shuffle
  bool operator==(const DataOptions&) const = default;
};

struct ModelOptions {
  std::string name = "digits-mlp";  // model.name: digits-mlp | mlp | char-gpt
  std::vector<int64_t> hidden{256, 256};  // model.hidden (mlp)
  std::string activation = "relu";  // model.activation (mlp)
  std::string preset = "tiny";      // model.preset (char-gpt); the four below override it when > 0
  int64_t layers = 0, heads = 0, dim = 0, context = 0;
  bool pad_vocab = false;           // model.pad_vocab
  double dropout = 0.0;             // model.dropout
  // compress.init_from: the trained weights (a run folder or a file) the run starts from; a text
  // model then keeps their vocabulary and must have their shape.
  std::string init_from;
  bool operator==(const ModelOptions&) const = default;
};

struct PrecisionOptions {
  std::string dtype = "fp32";       // precision.dtype: a name of train/precision.h's table
  // (precision.loss_scale.* are optim/'s: OptimOptions::loss_scale in config/optim_options.h)
  bool operator==(const PrecisionOptions&) const = default;
};

struct CheckpointOptions {
  std::string policy = "off";  // checkpoint.policy: off | every-block | every-k | selective
  int64_t k = 0;               // checkpoint.k (every-k; <= 0: round(sqrt(layers)))
  bool operator==(const CheckpointOptions&) const = default;
};

struct TrainOptions {
  int64_t epochs = 30, steps = 0;  // train.epochs, train.steps (steps > 0 overrides epochs)
  int64_t batch = 64;             // train.batch: samples (text: windows) per micro-batch
  int accumulate = 1;             // micro-batches per optimizer step (micro_batches(): train.accumulate or train.micro_batches)
  int64_t eval_every = 0;         // train.eval_every: steps between evaluations (0: each epoch)
  int64_t eval_windows = 256;       // train.eval_windows (text: fixed validation windows)
  uint64_t seed = 1;              // train.seed
  bool operator==(const TrainOptions&) const = default;
};

DataOptions data_options(const Config& c);
ModelOptions model_options(const Config& c);
PrecisionOptions precision_options(const Config& c);
CheckpointOptions checkpoint_options(const Config& c);
TrainOptions train_options(const Config& c);
// Micro-batches per optimizer step: train.micro_batches where set (> 0), else train.accumulate
// (the same quantity under two names). Throws Error naming both values when both are set and differ.
int micro_batches(const Config& c);

}  // namespace trainlab
