// PipelineExecutor: one optimizer step of a pipeline stage (dist.pp, issue 39): this rank's list
// of a dist::PipelineTable (gpipe, 1f1b, or interleaved with one CharGpt a chunk; backward whole)
// run on its CharGpt stages (nn/transformer.h, PipelineSlice: chunk c of rank s is virtual stage
// k = c p + s), the activations sent forward and their gradients back point to point over the
// pipeline group, posted asynchronously (s-1 and s+1 below are virtual stages k-1 and k+1):
//   Forward i    receives micro-batch i's activation from stage s-1 (the first stage reads the
//                tokens), computes in activation slot i, posts the send of its output to s+1; the
//                last stage computes the loss (its gradient multiplier is the one-rank run's) and
//                the logits' gradient instead.
//   Backward i   receives the output's gradient from s+1 (the last stage has the loss's), computes
//                in slot i, adds the weight gradients (the first micro-batch writes them), posts
//                the send of the input gradient to s-1 and frees the slot.
// Sends never block (each has its own buffer until the step's end); a stage waits only for what
// it receives, and messages between two stages go in the order both post them (ascending
// micro-batch each way; each stream of messages its own, the receiving virtual stage and the kind,
// so that a pair of ranks that carries activations and gradients the same way never mixes them),
// so no schedule here deadlocks. The gradients are added in ascending
// micro-batch order on every stage (the tables promise it), so p stages give the one-rank run's
// gradients with train.accumulate m bit for bit (fp32, CPU).
#pragma once
#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "dist/pipeline_schedule.h"
#include "nn/transformer.h"

namespace trainlab {

// One action as it ran on this stage: seconds from the step's start; `wait_s` of it spent waiting
// for the received tensor.
struct PipeEvent {
  dist::PipeAction action;
  double start_s = 0, end_s = 0, wait_s = 0;
};

// A stage's step in parts (seconds): computing forwards and backwards (the loss with the last
// forwards), waiting for received tensors, and the rest (posting sends, copies, the final wait for
// the sends); bubble() = the share of the step not computing, the measured counterpart of the
// schedule's idle fraction (dist::simulate).
struct PipelineStepTimes {
  double step_s = 0, forward_s = 0, backward_s = 0, wait_s = 0;
  double other_s() const { return step_s - forward_s - backward_s - wait_s; }
  double bubble() const { return step_s > 0 ? 1.0 - (forward_s + backward_s) / step_s : 0.0; }
};

class PipelineExecutor {
 public:
  // `pipe`: the pipeline group (rank = stage); `chunks`: this rank's model chunks (one without
  // interleaving). Throws Error for a split backward (zb-h1: not run yet) or a table of another
  // number of stages or chunks.
  PipelineExecutor(std::vector<CharGpt*> chunks, dist::Communicator& pipe, dist::PipelineTable table);
  // One step's forwards and backwards: micro-batch i's tokens xs[i] int32 [B, T] (read on the first
  // stage) and labels ys[i] [B*T] (on the last); `mult` the loss gradient's multiplier; the last
  // stage accumulates {loss sum, correct} of every micro-batch into `stats` (fp32 [2]).
  void step(Backend& be, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, float mult, Tensor& stats);
  // Evaluation: the tokens x int32 [B, T] (read on the first stage) forward through the stages,
  // one chunk after the other (no training: no dropout, no activations kept). Returns the logits
  // on the last stage, an undefined tensor on the others.
  Tensor forward_only(Backend& be, const Tensor& x);
  const dist::PipelineTable& table() const { return m_table; }
  const std::vector<PipeEvent>& events() const { return m_events; }  // the last step's, in order
  PipelineStepTimes times() const;                                    // the last step's
  // The most micro-batches whose activations this stage held at once in the last step.
  int peak_in_flight() const { return m_peak; }

 private:
  std::vector<CharGpt*> m_chunks;
  dist::Communicator& m_pipe;
  dist::PipelineTable m_table;
  std::vector<PipeEvent> m_events;
  double m_step_s = 0;
  int m_peak = 0;
};

}  // namespace trainlab
