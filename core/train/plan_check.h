// The planner (plan/planner.h) joined to the lab's own names and runs: a precision, an optimizer
// and a GPU resolved into a PlanSetup, and "check on this machine": a short run of the lab's own
// model with a plan's layout on one device, its ledger measurement beside the planner's
// prediction. `trainlab-cli plan --check` and the app's Planner view call these; the preset tests
// (tests/unit/test_plan_presets.cpp, tests/gpu/test_cuda_plan.cpp) hold the two within 2 %.
#pragma once
#include <functional>
#include <string>

#include "config/config.h"
#include "plan/planner.h"

namespace trainlab {

// Fills s's precision (element bytes, fp8 products: train/precision.h's policy of that name), its
// optimizer's state bytes a parameter (plan/memory_model.h's optimizer_state_bytes over the model's
// parameter shapes, PlanModel::param_shapes), and the GPU's memory, links and peak for the
// precision (plan's gpu_spec). Throws Error naming --precision, --optimizer or --gpu and the names.
void resolve_plan_setup(PlanSetup& s, const std::string& precision, const std::string& optimizer,
                        const std::string& gpu);

// "" when the layout can run here: the lab's own model (a preset, or a transformer shape over
// tinyshakespeare's vocabulary), on one device (DP = TP = PP = 1, so ZeRO 0). Otherwise why not,
// in a sentence the app shows and the CLI prints.
std::string plan_check_unsupported(const PlanSetup& s, const Layout& l);

// The run's config: model, precision, optimizer, micro-batch, gradient accumulation over the
// layout's micro-batches, checkpoint policy of its recomputation, `device`, `steps` steps into
// `out` without saving weights.
Config plan_check_config(const PlanSetup& s, const Layout& l, const std::string& device, const std::string& out,
                         long steps);

struct PlanCheck {
  MemoryByCategory predicted{};  // the planner's per-GPU bytes (the lab's count) for this run
  MemoryByCategory measured{};   // the ledger's current bytes after the last step
  MemoryByCategory peak{};       // the ledger's peak over the run
  MemoryByCategory run_predicted{};  // the trainer's own prediction at the last step (StepMetrics)
  std::string device;            // the backend's name ("CPU (2 threads, OpenBLAS)", "NVIDIA H200")
  std::string run_dir;
  long steps = 0;
  double step_s_measured = 0;    // the last step's time (the first includes warm-up)
  double step_s_predicted = 0;   // with the device's peak and the setup's MFU; 0 where unknown (CPU)
  double mfu_measured = 0;       // 0 where the device's peak is unknown
};

// Runs the check (throws Error when plan_check_unsupported says why not, or the run fails).
// `steps` optimizer steps, more while fp16 skips its first updates (the first applied update
// creates the optimizer state, so 1 is enough for memory); `on_step` sees each step (the app's
// progress).
PlanCheck check_plan(const PlanSetup& s, const Layout& l, const std::string& device, const std::string& out,
                     long steps, const std::function<void(long step)>& on_step = {});

}  // namespace trainlab
