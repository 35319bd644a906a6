// The time of a training step on a layout of G = DP x TP x PP GPUs: compute from the FLOPs, the
// device's peak and a measured MFU; communication from the bytes each GPU sends per step over the
// link its group uses; the pipeline's bubble. Notation of ../shared/docs/DOMAIN.md section 4
// (W or N ranks of a group, p stages, m micro-batches), and docs/PLANNER.md for the sources:
//
//   ring all-reduce of B bytes over n ranks     2 (n - 1) / n * B sent per rank (reduce-scatter
//                                               (n-1)/n B, then all-gather (n-1)/n B)
//   data parallel (ZeRO 0, 1, 2)                one all-reduce of the gradients per optimizer step
//                                               (ZeRO 1/2: a reduce-scatter of the gradients and an
//                                               all-gather of the parameters, the same volume)
//   ZeRO 3                                      1.5 x that: parameters all-gathered before the
//                                               forward and again before the backward, gradients
//                                               reduce-scattered (Rajbhandari et al. 2020, 3 Psi)
//   tensor parallel (Megatron-LM 2019)          per layer and micro-batch, 2 all-reduces of the
//                                               b s h activations forward and 2 backward (one more
//                                               forward's 2 with full recomputation)
//   pipeline parallel                           per micro-batch, a stage sends its b s h output
//                                               forward and receives its gradient backward
//   bubble (GPipe, PipeDream-1F1B)              (p - 1) / (m + p - 1) of the pipeline's time idle:
//                                               the busy time t grows to t (m + p - 1) / m
//
// A step's time is compute + tensor- and pipeline-parallel communication + bubble + the
// data-parallel reduction, with no overlap assumed (an upper bound: DDP overlaps its buckets with
// the backward pass, which the planner does not credit).
#pragma once
#include <cstdint>

namespace trainlab {

// Bytes one rank sends in a ring all-reduce of `bytes` over `ranks` ranks (0 for one rank).
double ring_allreduce_bytes(double bytes, int64_t ranks);
// Bytes a data-parallel rank sends per optimizer step: the all-reduce of `gradient_bytes`
// (ZeRO 0-2), 1.5 x that at ZeRO 3.
double data_parallel_bytes(double gradient_bytes, int64_t ranks, int zero_stage);
// Bytes a tensor-parallel rank sends per step: `layers` layers, `micro_batches` micro-batches,
// 4 all-reduces of `activation_bytes` (b s h eb) each (6 with full recomputation).
double tensor_parallel_bytes(int64_t layers, int64_t micro_batches, double activation_bytes, int64_t tp,
                             bool full_recompute);

// The tensor-parallel traffic of one rank in a training step as the lab's char-gpt sends it
// (nn/transformer.h), per micro-batch, in the ring model's bytes (dist/communicator.h), with
// A = b s h eb one micro-batch's residual stream and "half" = (t - 1) / t A, one all-gather or
// reduce-scatter of it (an all-reduce is two halves):
//   without sequence parallelism  a block: 2 all-reduces forward, 2 backward (+2 recomputed with
//                                 full recomputation); the vocabulary-parallel embedding's
//                                 all-reduce (first stage) and the output layer's input gradient's
//                                 (last stage);
//   with it                       a block: 4 halves forward (all-gather before qkv and fc,
//                                 reduce-scatter after proj and out), 6 backward (the branch
//                                 gradient gathered for out and proj, the LayerNorm outputs
//                                 gathered again for the weight gradients, the input gradients
//                                 reduce-scattered), +4 recomputed; the LayerNorms' gradients
//                                 (4 h eb) all-reduced; the embedding a half each way, the output
//                                 layer 3 halves and the final LayerNorm's gradients (2 h eb).
// The loss's row statistics (3 b s host values, vocabulary-parallel) are not counted.
struct TensorParallelTraffic {
  int64_t layers = 1, micro_batches = 1, tp = 1;
  double activation_bytes = 0.0;  // A = b s h eb
  double layernorm_bytes = 0.0;   // h eb: one LayerNorm's weight (or bias) gradient
  bool full_recompute = false, sequence_parallel = false;
  bool first = true, last = true;  // the stage holds the embedding / the output layer
};
double tensor_parallel_step_bytes(const TensorParallelTraffic& t);
// Bytes a pipeline stage sends per step: its output forward and its input's gradient backward,
// per micro-batch (0 for one stage).
double pipeline_parallel_bytes(int64_t micro_batches, double activation_bytes, int64_t pp);
// The idle fraction of a pipeline of p stages and m micro-batches: (p - 1) / (m + p - 1).
double pipeline_bubble_fraction(int64_t pp, int64_t micro_batches);

struct StepTime {
  double tokens = 0;          // tokens (or samples) per optimizer step, all GPUs
  double model_flops = 0;     // useful FLOPs per step, all GPUs (what MFU counts)
  double hardware_flops = 0;  // with recomputation
  double compute_s = 0;       // hardware FLOPs per GPU / (peak * mfu)
  double tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;  // sent per GPU per step
  double tp_s = 0, pp_s = 0, dp_s = 0;
  double bubble_fraction = 0, bubble_s = 0;
  double step_s = 0;
  double communication_s() const { return tp_s + pp_s + dp_s; }
  double tokens_per_s() const { return step_s > 0 ? tokens / step_s : 0.0; }
};

// The time of one step from the per-GPU work and bytes, the links and the pipeline's shape.
struct StepTimeInputs {
  double tokens = 0, model_flops = 0, hardware_flops = 0;
  int64_t gpus = 1;
  double peak_flops = 0;  // FLOP/s of one GPU in the precision in use
  double mfu = 0.4;       // measured model FLOPs utilisation (of a run without recomputation)
  double tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;
  double tp_link = 1, pp_link = 1, dp_link = 1;  // bytes/s of the link each group uses
  int64_t pp = 1, micro_batches = 1;
  // A schedule's idle and busy time a stage (any unit; plan/planner.h simulates them): when
  // pipeline_idle >= 0 the bubble fraction is idle / (idle + busy) and the busy time stretches by
  // (idle + busy) / busy; otherwise the closed form (p - 1) / (m + p - 1) above.
  double pipeline_idle = -1.0, pipeline_busy = 0.0;
};
StepTime step_time(const StepTimeInputs& in);

}  // namespace trainlab
