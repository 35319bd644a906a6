// A training task: what differs between training a classifier on rows of features and a
// character model on token windows, behind one interface, so that the trainer's loop has no
// branch on the model's kind. A task owns its data (host and device copies), builds its model,
// chooses each step's sample indices, keeps the epoch accounting, evaluates, and gives the
// FLOPs and the predicted activation bytes (plan/memory_model.h) of its model.
//
// data_state()/restore_data_state() carry the position in the data order and the sampling RNG
// across a run checkpoint (train/run_checkpoint.h), so that a resumed run draws the batches an
// uninterrupted one would.
//
// A "unit" is what the loss averages over: a row for classification, a token for text (a text
// sample is a window of ctx tokens). Throughput, epochs and losses are per unit.
#pragma once
#include <memory>
#include <random>
#include <vector>

#include "config/train_options.h"
#include "data/data_sources.h"
#include "nn/model.h"
#include "nn/tensor_split.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "plan/memory_model.h"
#include "train/training_step.h"

namespace trainlab {

class Task {
 public:
  virtual ~Task() = default;

  // The model, randomly initialised from `seed` (checkpoint policy applied for text).
  virtual std::unique_ptr<Model> build_model(Backend& be, uint64_t seed) = 0;
  // Uploads the data to `be` and returns the step that trains `model` on it. Call once, after
  // build_model (on the model the trainer runs, which may wrap it).
  virtual std::unique_ptr<TrainingStep> make_step(Backend& be, Model& model, Optimizer& opt, int64_t batch,
                                                  int accumulate) = 0;

  // Training units (rows or tokens) in the training split, and units per sample (1 or ctx).
  virtual int64_t train_units() const = 0;
  virtual int64_t units_per_sample() const = 0;
  // Bytes of the data resident on the device (after make_step).
  virtual int64_t data_bytes() const = 0;

  // The indices of the next step's `samples` samples (TrainingStep::set_indices' layout); advances
  // the epoch accounting.
  virtual void next_indices(int64_t samples, std::vector<int32_t>& idx) = 0;
  // Fractional epochs completed after the step that drew `samples` samples.
  virtual double epoch(int64_t samples) const = 0;
  // Whether that step finished an epoch.
  virtual bool end_of_epoch(int64_t samples) const = 0;

  // Mean loss and accuracy per unit over the held-out split, with the step's buffers.
  virtual void evaluate(Backend& be, TrainingStep& step, int64_t batch, double& loss, double& accuracy) = 0;

  virtual double flops_per_sample(Model& model) = 0;
  // Activation bytes of one training step (plan/memory_model.h) at the model's current state.
  virtual int64_t activation_bytes(int64_t batch, int64_t element_bytes, bool fp8_matmul) const = 0;
  // The data order's state after the steps so far (JSON): classification {"epoch", "cursor"} (the
  // epoch's permutation is re-drawn from the seed), text {"window_rng" (the generator's state as
  // text), "tokens_seen"}. Restore after make_step; throws Error for a state this task cannot take.
  virtual Json data_state() const = 0;
  virtual void restore_data_state(const Json& state) = 0;

  // The linear layers' products of a step (plan/memory_model.h's LinearShape: what a GPU's fp8
  // units keep casts of).
  virtual std::vector<LinearShape> linear_shapes(int64_t batch) const { return {}; }
  // A checkpoint setting changed mid-run (text models only; classifiers ignore it).
  virtual void set_checkpointing(const CheckpointOptions&) {}
  // The tensor-parallel group the next build_model splits its blocks over (char-gpt only; the
  // trainer's checks refuse it for the others before the task sees it).
  virtual void set_tensor_parallel(const TensorParallel&) {}
  // The pipeline stage's blocks the next build_model holds (char-gpt only, as above).
  virtual void set_pipeline_slice(const PipelineSlice&) {}
};

// ClassificationTask for model.name digits-mlp and mlp, TextTask for char-gpt. Loads the data
// now, so that a bad data option fails before anything else is built. Throws Error when
// batch x accumulate exceeds a classification training split.
std::unique_ptr<Task> make_task(const ModelOptions& model, const DataOptions& data, const TrainOptions& train,
                                const CheckpointOptions& checkpoint);

}  // namespace trainlab
