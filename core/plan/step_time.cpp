#include "plan/step_time.h"

namespace trainlab {

double ring_allreduce_bytes(double bytes, int64_t ranks) {
  if (ranks <= 1) return 0.0;
  const double n = static_cast<double>(ranks);
  return 2.0 * (n - 1.0) / n * bytes;
}

double data_parallel_bytes(double gradient_bytes, int64_t ranks, int zero_stage) {
  return ring_allreduce_bytes(gradient_bytes, ranks) * (zero_stage >= 3 ? 1.5 : 1.0);
}

double tensor_parallel_bytes(int64_t layers, int64_t micro_batches, double activation_bytes, int64_t tp,
                             bool full_recompute) {
  const double per_layer = full_recompute ? 6.0 : 4.0;
  return static_cast<double>(layers * micro_batches) * per_layer * ring_allreduce_bytes(activation_bytes, tp);
}

double tensor_parallel_step_bytes(const TensorParallelTraffic& t) {
  if (t.tp <= 1) return 0.0;
  const double A = t.activation_bytes, half = static_cast<double>(t.tp - 1) / static_cast<double>(t.tp) * A;
  const double L = static_cast<double>(t.layers);
  double per = 0.0;  // one micro-batch
  if (!t.sequence_parallel) {
    per = (L * (t.full_recompute ? 6.0 : 4.0) + (t.first ? 1.0 : 0.0) + (t.last ? 1.0 : 0.0)) *
          ring_allreduce_bytes(A, t.tp);
  } else {
    per = L * ((t.full_recompute ? 14.0 : 10.0) * half + ring_allreduce_bytes(4.0 * t.layernorm_bytes, t.tp));
    if (t.first) per += 2.0 * half;
    if (t.last) per += 3.0 * half + ring_allreduce_bytes(2.0 * t.layernorm_bytes, t.tp);
  }
  return static_cast<double>(t.micro_batches) * per;
}

double pipeline_parallel_bytes(int64_t micro_batches, double activation_bytes, int64_t pp) {
  return pp > 1 ? 2.0 * static_cast<double>(micro_batches) * activation_bytes : 0.0;
}

double pipeline_bubble_fraction(int64_t pp, int64_t micro_batches) {
  return static_cast<double>(pp - 1) / static_cast<double>(micro_batches + pp - 1);
}

StepTime step_time(const StepTimeInputs& in) {
  StepTime t;
  t.tokens = in.tokens;
  t.model_flops = in.model_flops;
  t.hardware_flops = in.hardware_flops;
  t.compute_s = in.hardware_flops / static_cast<double>(in.gpus) / (in.peak_flops * in.mfu);
  t.tp_bytes = in.tp_bytes;
  t.pp_bytes = in.pp_bytes;
  t.dp_bytes = in.dp_bytes;
  t.tp_s = in.tp_bytes / in.tp_link;
  t.pp_s = in.pp_bytes / in.pp_link;
  t.dp_s = in.dp_bytes / in.dp_link;
  // The pipeline's busy time (compute and the in-pipeline communication) stretched by the bubble:
  // busy / (1 - f) = busy * (m + p - 1) / m, or by a simulated schedule's (idle + busy) / busy.
  const double busy = t.compute_s + t.tp_s + t.pp_s;
  if (in.pp > 1 && in.pipeline_idle >= 0.0 && in.pipeline_busy > 0.0) {
    t.bubble_fraction = in.pipeline_idle / (in.pipeline_idle + in.pipeline_busy);
    t.bubble_s = busy * in.pipeline_idle / in.pipeline_busy;
  } else {
    t.bubble_fraction = pipeline_bubble_fraction(in.pp, in.micro_batches);
    t.bubble_s = busy * static_cast<double>(in.pp - 1) / static_cast<double>(in.micro_batches);
  }
  t.step_s = busy + t.bubble_s + t.dp_s;
  return t;
}

}  // namespace trainlab
