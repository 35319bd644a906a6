// Shared by the preset tests of the planner (tests/unit/test_plan_presets.cpp, test_plan_gpt2.cpp
// and tests/gpu/test_cuda_plan.cpp; Qt-free): the lab's precisions and checkpoint policies, and one
// check of the planner's prediction against the ledger's measurement of a real run
// (train/plan_check.h's check_plan) within a relative tolerance, category by category.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "train/plan_check.h"

namespace trainlab::plan_test {

inline const std::vector<std::string> kPrecisions{"fp32", "tf32", "bf16", "fp16", "fp8"};

struct Policy {
  const char* name;  // the config's checkpoint.policy
  Recompute recompute;
  int64_t every;
};
// off, selective, every-block, every-k (k = 2)
inline const std::vector<Policy> kPolicies{{"off", Recompute::None, 1},
                                           {"selective", Recompute::Selective, 1},
                                           {"every-block", Recompute::Full, 1},
                                           {"every-k", Recompute::Full, 2}};

struct PresetCase {
  std::string model;      // a plan_model_presets() name
  std::string precision;  // a kPrecisions name
  Policy policy{"off", Recompute::None, 1};
  int64_t batch = 1;
  int64_t seq = 0;        // > 0: a shorter window than the preset's context
};

inline std::string case_name(const PresetCase& c) {
  return c.model + " " + c.precision + " " + c.policy.name + " b=" + std::to_string(c.batch) +
         (c.seq > 0 ? " s=" + std::to_string(c.seq) : "");
}

// Runs the case on `device` into `dir` (one optimizer step) and returns "" when the planner's
// weights, gradients, optimizer and activation bytes are each within `tolerance` (relative) of the
// ledger's and equal to the trainer's own prediction of the run (StepMetrics::mem_predicted), else
// lines naming the categories that are not. The predicted and measured bytes go to `log`.
inline std::string check_preset(const PresetCase& c, const std::string& device, const std::string& dir,
                                double tolerance, std::string* log = nullptr) {
  PlanSetup s;
  s.model = plan_model_preset(c.model, "--model");
  if (c.seq > 0) s.model.transformer.context = c.seq;
  resolve_plan_setup(s, c.precision, "adamw", "h200");
  s.micro_batch = c.batch;
  Layout l;
  l.recompute = s.model.kind == PlanModelKind::Transformer ? c.policy.recompute : Recompute::None;
  l.recompute_every = c.policy.every;
  const PlanCheck r = check_plan(s, l, device, dir, 1);
  std::string bad;
  char line[256];
  for (MemCategory k : {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer, MemCategory::Activations}) {
    const double p = static_cast<double>(r.predicted[static_cast<size_t>(k)]);
    const double m = static_cast<double>(r.measured[static_cast<size_t>(k)]);
    std::snprintf(line, sizeof line, "%s %s: predicted %.0f measured %.0f (%.3f %%)\n", case_name(c).c_str(),
                  mem_category_name(k), p, m, p > 0 ? 100.0 * m / p : 0.0);
    if (log) *log += line;
    if (!(p > 0 && std::fabs(m - p) <= tolerance * p)) bad += line;
    // One model: the trainer's own prediction of the run is the planner's.
    if (r.run_predicted[static_cast<size_t>(k)] != r.predicted[static_cast<size_t>(k)])
      bad += case_name(c) + " " + mem_category_name(k) + ": the trainer predicted " +
             std::to_string(r.run_predicted[static_cast<size_t>(k)]) + ", the planner " + std::to_string(r.predicted[static_cast<size_t>(k)]) + "\n";
  }
  return bad;
}

}  // namespace trainlab::plan_test
