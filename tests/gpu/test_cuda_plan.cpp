// The planner against the CUDA ledger (issue 18's acceptance, the GPU half): for the lab's digits
// MLP and the char-gpt presets tiny, small and gpt2 (at its full 1024-token window), every
// precision (fp32, tf32, bf16, fp16, fp8) and every checkpoint policy (off, selective, every-block,
// every-k with k = 2), one step of the lab's own model on cuda:0 (train/plan_check.h's check_plan)
// measures weights, gradients, optimizer state and activations with the ledger, and the planner's
// prediction for that layout (DP = TP = PP = 1, the lab's count, with the fp8 units' casts in fp8)
// must be within 2 % of each and equal to the trainer's own prediction. Qt-free; exits 77
// (skipped) without a usable CUDA device. tests/unit/test_plan_presets.cpp is the CPU half.
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "backend/backend.h"
#include "plan_presets.h"
#include "util/error.h"

using namespace trainlab;
using namespace trainlab::plan_test;

int main() {
  try {
    create_backend("cuda");
  } catch (const Error& e) {
    std::printf("SKIP: no usable CUDA device (%s)\n", e.what());
    return 77;
  }
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("trainlab-test-cuda-plan-" + std::to_string(::getpid()));
  int pass = 0, fail = 0, n = 0;
  auto run = [&](const PresetCase& c) {
    const std::string dir = (root / ("run-" + std::to_string(++n))).string();
    std::string log, bad;
    try {
      bad = check_preset(c, "cuda", dir, 0.02, &log);
    } catch (const Error& e) {
      bad = case_name(c) + ": " + e.what() + "\n";
    }
    fs::remove_all(dir);
    std::printf("%s", log.c_str());
    std::printf("%s %s\n%s", bad.empty() ? "PASS" : "FAIL", case_name(c).c_str(), bad.c_str());
    std::fflush(stdout);
    (bad.empty() ? pass : fail)++;
  };
  for (const std::string& p : kPrecisions) {
    PresetCase c{"digits-mlp", p};
    c.batch = 128;
    run(c);
  }
  const struct {
    const char* model;
    int64_t batch;
  } gpts[] = {{"char-gpt-tiny", 32}, {"char-gpt-small", 16}, {"char-gpt-gpt2", 4}};
  for (const auto& g : gpts)
    for (const std::string& p : kPrecisions)
      for (const Policy& pol : kPolicies) {
        PresetCase c{g.model, p, pol};
        c.batch = g.batch;
        run(c);
      }
  fs::remove_all(root);
  std::printf("%d passed, %d failed\n", pass, fail);
  return fail ? 1 : 0;
}
