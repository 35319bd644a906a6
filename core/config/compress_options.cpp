#include "config/compress_options.h"

#include "config/train_options.h"

namespace trainlab {

QuantOptions quant_options(const Config& c) {
  QuantOptions q;
  q.mode = c.get_string("quant.mode");
  q.bits = static_cast<int>(c.get_int("quant.bits"));
  q.granularity = c.get_string("quant.granularity");
  q.group = static_cast<int>(c.get_int("quant.group"));
  q.overrides = c.get_string("quant.overrides");
  q.calibration_batches = static_cast<int>(c.get_int("quant.calibration_batches"));
  q.method = c.get_string("quant.method");
  q.calibration = static_cast<int>(c.get_int("quant.calibration"));
  q.damp = c.get_float("quant.damp");
  q.act_order = c.get_bool("quant.act_order");
  return q;
}

PruneOptions prune_options(const Config& c) {
  PruneOptions p;
  p.method = c.get_string("prune.method");
  p.sparsity = c.get_float("prune.sparsity");
  p.initial_sparsity = c.get_float("prune.initial_sparsity");
  p.start_step = c.get_int("prune.start_step");
  p.interval = c.get_int("prune.interval");
  p.n_steps = static_cast<int>(c.get_int("prune.n_steps"));
  p.global_scope = c.get_string("prune.scope") == "global";
  p.include_output = c.get_bool("prune.include_output");
  p.rewind = c.get_bool("prune.rewind");
  p.rewind_step = c.get_int("prune.rewind_step");
  p.now = c.get_float("prune.now");
  return p;
}

DistillOptions distill_options(const Config& c) {
  DistillOptions d;
  d.teacher = c.get_string("distill.teacher");
  d.alpha = c.get_float("distill.alpha");
  d.temperature = c.get_float("distill.temperature");
  return d;
}

CompressOptions compress_options(const Config& c) {
  CompressOptions o;
  o.quant = quant_options(c);
  o.prune = prune_options(c);
  o.distill = distill_options(c);
  o.init_from = c.get_string("compress.init_from");
  o.accumulate = micro_batches(c);
  o.run_config = c.to_json();
  return o;
}

}  // namespace trainlab
