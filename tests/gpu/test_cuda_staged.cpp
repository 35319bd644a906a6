// test_cuda_staged: two ranks on one GPU through dist.transport=mpi (dist/staged_communicator.h:
// device tensors staged through host memory and summed by MPI), which NCCL refuses. trainlab-cli
// trains the tiny char-gpt with DDP for 4 steps (global batch 8, evaluated every 2 steps) on one
// rank and under `mpirun -np 2` on the same GPU, in fp32 and in bf16; the two-rank losses (each
// rank half of every batch, the loss sums added) must be the one-rank losses:
//   fp32  within 1e-6 relative, the tolerance of test_cuda_dist and of the CPU ranks
//         (test_dist_ranks): only the order of the gradient additions differs;
//   bf16  within kBf16Tolerance relative: each rank's half-batch gradient is rounded to bf16
//         before the sum (then the sum rounded again, as NCCL and MPI do), where one rank rounds
//         the whole batch's gradient once.
// First, in this process, the staged communicator over a one-rank host communicator on GPU
// tensors: every collective through pinned staging buffers (the identity over one rank, so the
// values come back unchanged, after the compute stream's earlier work), staging counted as
// Communication memory. With one GPU, dist.transport=nccl on two ranks must end with the error
// that names dist.transport=mpi. Exit 77 without a GPU; without MPI in the build or without mpirun
// only the first part runs.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dist/launch.h"
#include "dist/staged_communicator.h"
#include "dist/world.h"
#include "parity_support.h"
#include "train/run_record.h"

using namespace trainlab;
using namespace trainlab::parity;

namespace {

// The largest relative loss difference of bf16 DDP over two ranks against one rank that the
// rounding of the half-batch gradients explains (see above): the same run on two CPU ranks
// against one differs by up to 3e-5 (fp32: 1.2e-7); the bound leaves the GPU's other kernels
// room for 15 times that.
constexpr double kBf16Tolerance = 5e-4;

void expect(const std::string& what, bool ok) {
  (ok ? g_pass : g_fail)++;
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `args` through sh with stderr into `err_file`; the exit status.
int run(const std::vector<std::string>& args, const std::string& err_file) {
  std::string line;
  for (const auto& a : args) line += quoted(a) + " ";
  return dist::run_and_wait({"sh", "-c", line + "2> " + quoted(err_file)});
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> train_args(const std::string& precision, const std::string& out) {
  return {TRAINLAB_CLI_PATH, "train", "--device", "cuda", "--quiet", "--model", "char-gpt", "--steps", "4",
          "--batch", "8", "--seed", "5", "--precision", precision, "--out", out, "--set", "train.eval_windows=16",
          "--set", "train.eval_every=2", "--set", "run.save_weights=false"};
}

std::vector<std::string> mpirun(const std::vector<std::string>& args) {
  std::vector<std::string> a{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "NCCL_NVLS_ENABLE=0"};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

// Every step's training loss, then every evaluation's loss.
std::vector<double> losses(const std::string& dir) {
  std::vector<double> out, val;
  for (const StepMetrics& m : load_run(dir).steps) {
    out.push_back(m.loss);
    if (m.val_loss) val.push_back(*m.val_loss);
  }
  out.insert(out.end(), val.begin(), val.end());
  return out;
}

void compare(const std::string& what, const std::vector<double>& one, const std::vector<double>& two, double tol) {
  double worst = one.empty() || one.size() != two.size() ? INFINITY : 0.0;
  for (size_t i = 0; i < one.size() && i < two.size(); ++i)
    worst = std::max(worst, std::fabs(two[i] - one[i]) / std::fabs(one[i]));
  for (size_t i = 0; i < one.size() && i < two.size(); ++i) std::printf("  %.9g / %.9g\n", one[i], two[i]);
  std::printf("  %s: %zu losses, largest relative difference %.3g (tol %.0e)\n", what.c_str(), one.size(), worst, tol);
  expect(what, worst <= tol);
}

Tensor dev(Backend& be, const std::vector<float>& v, DType dt = DType::F32) {
  Tensor t = be.empty({static_cast<int64_t>(v.size())}, dt, MemCategory::Workspace);
  be.upload(t, v.data(), DType::F32);
  return t;
}

void staged_collectives(Backend& gpu) {
  CpuBackend cpu;
  auto c = dist::make_staged_communicator(gpu, dist::make_single_rank(cpu));
  expect("kind mpi-staged on GPU tensors", c->kind() == "mpi-staged" && c->device() == DeviceKind::Cuda);
  const std::vector<float> v{1.0f, -2.0f, 3.5f};
  Tensor a = dev(gpu, v);
  c->all_reduce(a)->wait();
  expect("fp32 all-reduce", host(gpu, a) == v);
  Tensor b = dev(gpu, {1.0f, 0.5f}, DType::BF16);
  c->all_reduce(b)->wait();
  expect("bf16 all-reduce", host(gpu, b) == std::vector<float>{1.0f, 0.5f});
  Tensor out = gpu.empty({3}, DType::F32, MemCategory::Workspace);
  const int64_t three[] = {3};
  c->reduce_scatter(a, out, three)->wait();
  expect("reduce-scatter", host(gpu, out) == v);
  Tensor whole = dev(gpu, {9.0f, 8.0f, 7.0f});
  c->all_gather(a, whole, three)->wait();
  expect("all-gather", host(gpu, whole) == v);
  c->broadcast(whole, 0)->wait();
  expect("broadcast", host(gpu, whole) == v);
  Tensor big = gpu.empty({1 << 20}, DType::F32, MemCategory::Workspace);
  gpu.fill(big, 2.0f);
  auto pending = c->all_reduce(big);
  pending->wait();
  const std::vector<float> got = host(gpu, big);
  expect("a collective stages the compute stream's earlier work", got.front() == 2.0f && got.back() == 2.0f);
  const int64_t staging = gpu.ledger().snapshot().current[static_cast<size_t>(MemCategory::Communication)];
  expect("staging is Communication memory (" + std::to_string(staging) + " B)", staging >= (int64_t{4} << 20));
}

void staged_matches_one_rank(const std::string& tmp, const std::string& precision, double tol) {
  const std::string one = tmp + "/one-" + precision, two = tmp + "/two-" + precision, err = tmp + "/err.txt";
  int code = run(train_args(precision, one), err);
  expect(precision + ": one rank trains", code == 0);
  if (code != 0) std::printf("%s\n", read_all(err).c_str());
  std::vector<std::string> args = train_args(precision, two);
  args.insert(args.end(), {"--set", "dist.transport=mpi"});
  code = run(mpirun(args), err);
  expect(precision + ": two ranks on one GPU with dist.transport=mpi train", code == 0);
  if (code != 0) std::printf("%s\n", read_all(err).c_str());
  if (code == 0) compare(precision + ": two staged ranks give the one-rank losses", losses(one), losses(two), tol);
}

void nccl_refuses_a_shared_gpu(const std::string& tmp) {
  std::vector<std::string> args = train_args("fp32", tmp + "/nccl");
  args.insert(args.end(), {"--set", "dist.transport=nccl"});
  const std::string err = tmp + "/err-nccl.txt";
  const int code = run(mpirun(args), err);
  const std::string text = read_all(err);
  expect("dist.transport=nccl with two ranks on one GPU ends with an error naming dist.transport=mpi",
         code != 0 && text.find("dist.transport nccl needs a GPU for each rank") != std::string::npos &&
             text.find("use dist.transport=mpi") != std::string::npos);
}

}  // namespace

int main() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  {
    std::unique_ptr<Backend> gpu = cuda_or_skip();  // released before the ranks start
    if (!gpu) return 77;
    try {
      staged_collectives(*gpu);
    } catch (const std::exception& e) {
      std::printf("FAIL: exception: %s\n", e.what());
      ++g_fail;
    }
  }
  if (!dist::built_with_mpi() || std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    std::printf("SKIP (two ranks): this build has no MPI or mpirun is not on the PATH\n");
    return finish();
  }
  char tmpl[] = "/tmp/test_cuda_staged.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::printf("FAIL: no temporary folder\n");
    return 1;
  }
  const std::string tmp = tmpl;
  try {
    staged_matches_one_rank(tmp, "fp32", 1e-6);
    staged_matches_one_rank(tmp, "bf16", kBf16Tolerance);
    if (available_devices().size() == 2) nccl_refuses_a_shared_gpu(tmp);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  if (std::system(("rm -rf " + quoted(tmp)).c_str()) != 0) std::printf("note: %s is left behind\n", tmp.c_str());
  return finish();
}
