// Optimizer offload on the GPU (optim.offload cpu, optim/offload.h): char-gpt tiny trains 30 steps
// on cuda:0 with and without offload, in fp32 and in bf16, and
//   losses     each step's loss with offload equals the one without within 1e-4 relative (fp32:
//              the CPU's AdamW against the GPU's differs in the last bits of sqrt and division) or
//              2e-2 (bf16: such a difference can move a weight across one bf16 step);
//   ledger     with offload the device holds no optimizer bytes (masters and state are Host), the
//              Host bytes equal plan/memory_model.h's prediction, and the device's bytes for
//              masters + state are at least 60 % below the run without offload (issue 19).
// Qt-free; exits 77 (skipped) without a usable CUDA device.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "backend/backend.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace trainlab;

namespace {

struct Outcome {
  std::vector<double> losses;
  StepMetrics last;
  std::string status;
};

int64_t cat(const MemoryBytes& m, MemCategory c) { return m.by_category[static_cast<size_t>(c)]; }

Outcome run(const std::string& precision, bool offload, const std::string& dir) {
  Config c;
  c.set("device.name", "cuda");
  c.set("model.name", "char-gpt");
  c.set("model.preset", "tiny");
  c.set("train.batch", "16");
  c.set("train.steps", "30");
  c.set("train.eval_every", "1000");
  c.set("train.seed", "1");
  c.set("precision.dtype", precision);
  c.set("optim.offload", offload ? "cpu" : "none");
  c.set("run.out", dir);
  c.set("run.save_weights", "false");
  Outcome o;
  TrainerCallbacks cb;
  cb.on_step = [&](const StepMetrics& m) {
    o.losses.push_back(m.loss);
    o.last = m;
  };
  Trainer t(c, cb);
  o.status = t.run().status;
  return o;
}

int check(const std::string& precision, double tol, const std::string& root) {
  const Outcome base = run(precision, false, root + "/base-" + precision);
  const Outcome off = run(precision, true, root + "/offload-" + precision);
  int bad = 0;
  auto fail = [&](const std::string& why) {
    std::printf("FAIL %s: %s\n", precision.c_str(), why.c_str());
    ++bad;
  };
  if (base.status != "completed" || off.status != "completed") fail("status " + base.status + " / " + off.status);
  if (base.losses.size() != off.losses.size() || base.losses.empty()) return bad + 1;
  double worst = 0.0;
  for (size_t i = 0; i < base.losses.size(); ++i)
    worst = std::max(worst, std::fabs(off.losses[i] - base.losses[i]) / std::fabs(base.losses[i]));
  std::printf("%s: final loss %.6f (offload %.6f), worst relative difference %.3g (tolerance %.g)\n", precision.c_str(),
              base.losses.back(), off.losses.back(), worst, tol);
  if (!(worst <= tol)) fail("losses differ beyond the tolerance");
  const int64_t dev_base = cat(base.last.mem_current, MemCategory::Optimizer);
  const int64_t dev_off = cat(off.last.mem_current, MemCategory::Optimizer);
  const int64_t host = cat(off.last.mem_current, MemCategory::Host);
  const int64_t host_predicted = cat(off.last.mem_predicted, MemCategory::Host);
  // fp32 runs: the masters are the device's weights in both runs; only the state moves.
  const double saved = 1.0 - static_cast<double>(dev_off) / static_cast<double>(dev_base);
  std::printf("%s: device optimizer+master bytes %lld -> %lld (%.1f %% less); host %lld (predicted %lld)\n",
              precision.c_str(), static_cast<long long>(dev_base), static_cast<long long>(dev_off), 100.0 * saved,
              static_cast<long long>(host), static_cast<long long>(host_predicted));
  if (dev_off != 0) fail("the device still holds optimizer bytes");
  if (host != host_predicted) fail("host bytes differ from the prediction");
  if (cat(off.last.mem_predicted, MemCategory::Optimizer) != 0) fail("the prediction keeps optimizer bytes on the device");
  if (!(saved >= 0.6)) fail("less than 60 % saved");
  return bad;
}

}  // namespace

int main() {
  try {
    create_backend("cuda");
  } catch (const Error& e) {
    std::printf("SKIP: no usable CUDA device (%s)\n", e.what());
    return 77;
  }
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("trainlab-test-cuda-offload-" + std::to_string(::getpid()));
  int bad = 0;
  try {
    bad += check("fp32", 1e-4, root.string());
    bad += check("bf16", 2e-2, root.string());
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    ++bad;
  }
  fs::remove_all(root);
  std::printf("%s\n", bad == 0 ? "PASS" : "FAILED");
  return bad == 0 ? 0 : 1;
}
