// Runs of trainlab-cli from a GPU test (Qt-free): one rank, or two ranks under mpirun on the one
// GPU (dist.transport=mpi), and their losses compared. The GPU machine has no Qt, so these are
// the GPU tests' counterpart of tests/support/rank_runs.h. Each result is counted with expect().
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dist/launch.h"
#include "dist/world.h"
#include "parity_support.h"
#include "train/run_record.h"

namespace trainlab::parity {

inline void expect(const std::string& what, bool ok) {
  (ok ? g_pass : g_fail)++;
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `args` through sh with stderr into `err_file`; the exit status.
inline int run(const std::vector<std::string>& args, const std::string& err_file) {
  std::string line;
  for (const auto& a : args) line += quoted(a) + " ";
  return dist::run_and_wait({"sh", "-c", line + "2> " + quoted(err_file)});
}

inline std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The trainlab-cli the tests run: $TRAINLAB_CLI (binaries carried to the GPU machine, built
// elsewhere), else the one built beside the tests.
inline std::string cli_path() {
  const char* env = std::getenv("TRAINLAB_CLI");
  return env && *env ? env : TRAINLAB_CLI_PATH;
}

inline std::vector<std::string> train_args(const std::string& precision, const std::string& out) {
  return {cli_path(), "train", "--device", "cuda", "--quiet", "--model", "char-gpt", "--steps", "4",
          "--batch", "8", "--seed", "5", "--precision", precision, "--out", out, "--set", "train.eval_windows=16",
          "--set", "train.eval_every=2", "--set", "run.save_weights=false"};
}

inline std::vector<std::string> mpirun(const std::vector<std::string>& args) {
  std::vector<std::string> a{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "NCCL_NVLS_ENABLE=0"};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

// Every step's training loss, then every evaluation's loss.
inline std::vector<double> losses(const std::string& dir) {
  std::vector<double> out, val;
  for (const StepMetrics& m : load_run(dir).steps) {
    out.push_back(m.loss);
    if (m.val_loss) val.push_back(*m.val_loss);
  }
  out.insert(out.end(), val.begin(), val.end());
  return out;
}

inline void compare(const std::string& what, const std::vector<double>& one, const std::vector<double>& two, double tol) {
  double worst = one.empty() || one.size() != two.size() ? INFINITY : 0.0;
  for (size_t i = 0; i < one.size() && i < two.size(); ++i)
    worst = std::max(worst, std::fabs(two[i] - one[i]) / std::fabs(one[i]));
  for (size_t i = 0; i < one.size() && i < two.size(); ++i) std::printf("  %.9g / %.9g\n", one[i], two[i]);
  std::printf("  %s: %zu losses, largest relative difference %.3g (tol %.0e)\n", what.c_str(), one.size(), worst, tol);
  expect(what, worst <= tol);
}

// The first 5 training losses within `first`, every loss (training and evaluation) within `all`,
// relative: the tolerances of runs whose sums are added in another order (tensor and pipeline
// parallelism against one rank).
inline void compare_first_and_all(const std::string& what, const std::vector<double>& one,
                                  const std::vector<double>& two, double first, double all) {
  double worst5 = one.size() == two.size() && one.size() > 5 ? 0.0 : INFINITY, worst = worst5;
  for (size_t i = 0; i < one.size() && i < two.size(); ++i) {
    const double d = std::fabs(two[i] - one[i]) / std::fabs(one[i]);
    if (i < 5) worst5 = std::max(worst5, d);
    worst = std::max(worst, d);
  }
  std::printf("  %s: %zu losses, largest relative difference %.3g in the first 5 (tol %.0e), %.3g overall (tol %.0e)\n",
              what.c_str(), one.size(), worst5, first, worst, all);
  expect(what, worst5 <= first && worst <= all);
}

// The part of a test that runs trainlab-cli on several ranks: a SKIP without MPI in the build or
// mpirun on the PATH, else `body` in a fresh temporary folder (/tmp/NAME.XXXXXX, removed after),
// an exception counted as a failure. Returns the test's exit code (finish()).
inline int with_ranks_folder(const std::string& name, const std::function<void(const std::string&)>& body) {
  if (!dist::built_with_mpi() || std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    std::printf("SKIP (several ranks): this build has no MPI or mpirun is not on the PATH\n");
    return finish();
  }
  std::string tmpl = "/tmp/" + name + ".XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    std::printf("FAIL: no temporary folder\n");
    return 1;
  }
  const std::string tmp = tmpl;
  try {
    body(tmp);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  if (std::system(("rm -rf " + quoted(tmp)).c_str()) != 0) std::printf("note: %s is left behind\n", tmp.c_str());
  return finish();
}

}  // namespace trainlab::parity
