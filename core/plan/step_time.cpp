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
  t.bubble_fraction = pipeline_bubble_fraction(in.pp, in.micro_batches);
  // The pipeline's busy time (compute and the in-pipeline communication) stretched by the bubble:
  // busy / (1 - f) = busy * (m + p - 1) / m.
  const double busy = t.compute_s + t.tp_s + t.pp_s;
  t.bubble_s = busy * static_cast<double>(in.pp - 1) / static_cast<double>(in.micro_batches);
  t.step_s = busy + t.bubble_s + t.dp_s;
  return t;
}

}  // namespace trainlab
