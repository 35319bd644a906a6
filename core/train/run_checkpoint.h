// Run checkpoints: what run.checkpoint_every writes into a run folder so that `trainlab-cli train
// --resume DIR` (and the app's Resume) continues an interrupted run (stopped, killed with -9,
// crashed) as if it had not stopped: on the CPU the continued run's losses are bit-identical to an
// uninterrupted run's, and metrics.jsonl holds each step once.
//
// Files in the run folder:
//   checkpoint.json                the small state: the step, the trainer's counters, the config
//                                  as of the checkpoint (mid-run changes included), the data order
//                                  and sampling RNG (Task::data_state), the model's dropout draws
//                                  (Model::random_state), the loss scaler, and the name, size and
//                                  CRC-32 of the tensors file
//   checkpoint-<step>.safetensors  fp32 tensors: "master" (the weights, one flat buffer at the
//                                  FlatParams offsets), "optim/m", "optim/v" (Optimizer::save_state),
//                                  "mask/<param>", "rewind/<param>" (Compression::state_tensors)
// Compute copies are not saved: they are the masters rounded to the compute format (fake-quantized
// with QAT), recomputed on restore. Gradients are not state: every step overwrites them.
//
// A tensor-parallel run writes the whole model's state (gathered from the shards): a checkpoint
// in the one-rank run's layout, which any dist.tp resumes by cutting each rank's shards from it.
//
// A run whose masters and optimizer state are sharded over its ranks (ZeRO) keeps them out of the
// tensors file: each rank writes its shard, and checkpoint.json's "shards" describes the layout
// (train/run_shards.h). Any checkpoint, sharded or whole, resumes at any number of ranks and with
// any dist.strategy: each rank takes the part of the state its new layout keeps.
//
// Writing is atomic: the tensors file is written under its own name and fsync'd; checkpoint.json
// is written to a temporary file, fsync'd and renamed over the old one (the folder is fsync'd
// after each rename); only then is the previous tensors file removed. Whenever the process dies,
// the folder holds the old checkpoint or the new one, whole.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "compress/compression.h"
#include "config/config.h"
#include "nn/model.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/run_shards.h"
#include "train/task.h"

namespace trainlab {

// The trainer's counters at a step boundary.
struct RunProgress {
  long step = 0;             // optimizer steps done (lines of metrics.jsonl)
  long optimizer_steps = 0;  // updates applied (Adam's t; fewer when fp16 loss scaling skipped some)
  long total_steps = 1, steps_per_epoch = 1;
  double last_loss = 0.0;                          // the last finite training loss
  double samples_done = 0.0, train_seconds = 0.0;  // for the summary's samples/s
  double wall_s = 0.0;                             // seconds since the run started
};

// checkpoint.json, parsed and checked (no tensors).
struct RunCheckpointInfo {
  RunProgress progress;
  Json config;        // nested, as Config::to_json writes it
  Json data;          // Task::data_state
  Json model_random;  // Model::random_state
  LossScaler::State loss_scaler;
  std::string tensors_file;  // "checkpoint-<step>.safetensors", a name inside the run folder
  uint64_t tensors_bytes = 0;
  uint32_t tensors_crc32 = 0;
  std::optional<ShardLayout> shards;  // a sharded run's masters and optimizer state (run_shards.h)
};

// What a run holds that a checkpoint saves and restores (the trainer's objects).
struct RunParts {
  Backend& be;
  Model& model;  // the model the trainer runs (parameters() order is the flat order)
  Optimizer& opt;
  LossScaler& scaler;
  Task& task;
  Compression& compress;
  // A run over several ranks whose masters and optimizer state are sharded (ZeRO): every rank
  // calls write_run_checkpoint and restore_run_checkpoint, and saves and restores its own range
  // through this; rank 0 writes the rest. Null otherwise (one rank, or DDP: rank 0 alone writes).
  dist::DataParallel* sharded = nullptr;
  // A tensor-parallel run (dist.tp > 1): the group whose shards the model holds. Its checkpoint is
  // the whole model's, gathered over the group (every rank of it calls write_run_checkpoint;
  // `writes` names the one rank that writes the files), so that any layout resumes it: each rank
  // cuts its shards from the whole state.
  dist::Communicator* tensor = nullptr;
  bool writes = true;
};

// Writes a checkpoint of the run in `dir` after progress.step steps (see the top of this file).
// Throws Error naming the file that cannot be written; the previous checkpoint is then still whole.
void write_run_checkpoint(const std::string& dir, const RunProgress& progress, const Config& config,
                          const RunParts& parts);

// checkpoint.json's bytes, checked field by field: Error "<origin>: <field>: expected ..." (the
// message never quotes the file's content). The byte-based entry point of the fuzz target.
RunCheckpointInfo parse_run_checkpoint(std::string_view bytes, const std::string& origin);
// DIR/checkpoint.json, or nothing when the folder has none. Throws Error for one that is damaged.
std::optional<RunCheckpointInfo> read_run_checkpoint(const std::string& dir);

// Puts the checkpoint of `dir` into parts, built by the trainer's setup from `config` (which must
// be the checkpoint's own config, up to resume_settable_keys and run.out) and returns its progress.
// Checks the tensors file against checkpoint.json (size, CRC-32) and every tensor against the
// model (names, shapes); throws Error naming the file and what does not fit.
RunProgress restore_run_checkpoint(const std::string& dir, const Config& config, const RunParts& parts);

// The config to continue the run in `dir` with: its checkpoint's config (config.json's, with the
// values that mid-run changes had at the checkpoint) and run.out = dir. Throws Error naming the
// folder and what is missing: no config.json, no checkpoint ("DIR has no checkpoint: the run was
// started with run.checkpoint_every = 0"), a completed or diverged run, or a checkpoint whose
// config differs from config.json in a key that cannot change during a run.
Config resume_config(const std::string& dir);
// The keys that may be changed (--set) when a run is resumed: they do not change its numbers
// (run.checkpoint_every, run.name, run.save_weights, device.kernel_timing). The dist.* keys may
// change too (a run resumed at another number of ranks or strategy reshards its state): its
// losses then agree with the uninterrupted run's within 1e-6 (the sums over ranks in another order).
const std::vector<std::string>& resume_settable_keys();
// Throws Error naming the first key in which `changed` differs from `base` that is not one of
// resume_settable_keys().
void check_resume_overrides(const Config& base, const Config& changed);

// Cuts the metrics.jsonl at `path` after the line of step `step`: the lines of later steps and a
// torn last line (no newline: a write the process did not finish) go; every line before is kept
// byte for byte. Returns the step of the last line kept (0 when none). A missing file is created.
long truncate_metrics(const std::string& path, long step);
// truncate_metrics on bytes: how many leading bytes of `text` to keep (0, or just after a newline);
// `last_step` gets the step of the last line kept (0 when none).
size_t metrics_bytes_to_keep(std::string_view text, long step, long& last_step);

}  // namespace trainlab
