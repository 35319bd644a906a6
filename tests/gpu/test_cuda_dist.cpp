// test_cuda_dist: core/dist on one GPU, with an NCCL communicator of one rank (its unique id made
// and "broadcast" without MPI): every collective of the communicator on device tensors (fp32 and
// bf16 sums, reduce-scatter and all-gather with their counts, in place too, broadcast, a
// sub-communicator), queued on the collectives' stream behind the compute stream's work; then the
// DDP driver over that communicator trains the digits MLP for a few steps and must give exactly
// the losses of the same steps without it (a sum over one rank is the identity), and so must ZeRO
// 1, 2 and 3 over it (each shard the whole model; within 1e-6), in fp32 and in bf16, where the
// ZeRO drivers keep the fp32 masters as their shard (optimizer memory: the ledger's optimizer
// state is that of the run without a driver, 12 bytes a parameter, masters and m, v; no second
// copy of the masters). Exit 77 without a
// GPU or without NCCL in the build. Several GPUs: tests/unit/test_dist_ranks runs the CPU ranks;
// on a machine with 2 GPUs and mpirun, `trainlab-cli train --gpus 2 ...` (README).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "config/dist_options.h"
#include "dist/data_parallel.h"
#include "dist/nccl_communicator.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "parity_support.h"
#include "train/training_step.h"

using namespace trainlab;
using namespace trainlab::parity;

namespace {

void expect(const std::string& what, bool ok) {
  (ok ? g_pass : g_fail)++;
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
}

Tensor dev(Backend& be, const std::vector<float>& v, DType dt = DType::F32) {
  Tensor t = be.empty({static_cast<int64_t>(v.size())}, dt, MemCategory::Communication);
  be.upload(t, v.data(), DType::F32);
  return t;
}

void collectives(Backend& gpu, dist::Communicator& c) {
  expect("kind nccl, rank 0 of 1", c.kind() == "nccl" && c.rank() == 0 && c.size() == 1);
  Tensor a = dev(gpu, {1.0f, -2.0f, 3.5f});
  auto h = c.all_reduce(a);
  h->wait();
  expect("fp32 all-reduce over one rank is the identity", host(gpu, a) == std::vector<float>{1.0f, -2.0f, 3.5f});
  Tensor b = dev(gpu, {1.0f, 0.5f}, DType::BF16);
  c.all_reduce(b)->wait();
  expect("bf16 all-reduce", host(gpu, b) == std::vector<float>{1.0f, 0.5f});
  Tensor out = gpu.empty({3}, DType::F32, MemCategory::Communication);
  const int64_t three[] = {3};
  c.reduce_scatter(a, out, three)->wait();
  expect("reduce-scatter", host(gpu, out) == host(gpu, a));
  Tensor full = dev(gpu, {9.0f, 8.0f, 7.0f});
  c.all_gather(full, full, three)->wait();  // in place
  expect("all-gather in place", host(gpu, full) == std::vector<float>{9.0f, 8.0f, 7.0f});
  c.all_gather(a, full, three)->wait();
  expect("all-gather", host(gpu, full) == std::vector<float>{1.0f, -2.0f, 3.5f});
  c.broadcast(full, 0)->wait();
  expect("broadcast", host(gpu, full) == std::vector<float>{1.0f, -2.0f, 3.5f});
  // Stream order: a fill queued on the compute stream before the collective is what it reduces.
  Tensor big = gpu.empty({1 << 20}, DType::F32, MemCategory::Communication);
  gpu.fill(big, 2.0f);
  auto pending = c.all_reduce(big);
  pending->wait();
  const std::vector<float> got = host(gpu, big);
  expect("a collective runs after the compute stream's earlier work", got.front() == 2.0f && got.back() == 2.0f);
  auto sub = c.split(0, 0);
  Tensor s = dev(gpu, {4.0f});
  sub->all_reduce(s)->wait();
  expect("sub-communicator", sub->size() == 1 && host(gpu, s) == std::vector<float>{4.0f});
}

// The digits MLP on random rows: `steps` AdamW steps in `compute` format, with the data-parallel
// driver of `strategy` over `comm` or without. `optimizer_bytes` receives the ledger's optimizer
// memory after the last step, `params` the model's parameters.
std::vector<float> train(Backend& gpu, dist::Communicator* comm, int steps, DistStrategy strategy = DistStrategy::Ddp,
                         DType compute = DType::F32, int64_t* optimizer_bytes = nullptr, int64_t* params = nullptr) {
  auto model = build_model(gpu, {{"kind", "mlp"}, {"sizes", {64, 256, 256, 10}}, {"activation", "relu"}}, 7);
  model->set_compute_dtype(gpu, compute);
  if (params) *params = model->flat_params().numel();
  auto opt = make_optimizer(OptimizerOptions{});
  const int64_t n = 512, batch = 64;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 16.0f);
  std::vector<float> x(static_cast<size_t>(n * 64));
  for (auto& v : x) v = u(rng);
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
  Tensor tx = gpu.empty({n, 64}, DType::F32, MemCategory::Workspace), ty = gpu.empty({n}, DType::I32, MemCategory::Workspace);
  gpu.upload(tx, x.data(), DType::F32);
  gpu.upload(ty, y.data(), DType::I32);
  TrainingStep step(gpu, *model, *opt, tx, ty, batch, 2);
  std::unique_ptr<dist::DataParallel> dp;
  DistOptions o;
  o.bucket_mb = 0.05;  // several buckets
  o.strategy = strategy;
  if (comm) dp = dist::DataParallel::create(o, *comm, gpu, *model);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    StepScalars sc;
    sc.lr = 1e-3f;
    sc.step = static_cast<float>(s + 1);
    gpu.set_step_scalars(sc);
    std::vector<int32_t> idx(static_cast<size_t>(2 * batch));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>((s * 128 + static_cast<int>(i) * 7) % n);
    step.set_indices(idx);
    if (dp) {
      dp->begin_step(2);
      step.forward_backward();
      dp->finish_backward();
      if (dp->grads_finite()) dp->optimizer_step(*opt);
    } else {
      step.full_step();
    }
    losses.push_back(host(gpu, step.stats())[0]);
  }
  if (optimizer_bytes) *optimizer_bytes = gpu.ledger().snapshot().current[static_cast<size_t>(MemCategory::Optimizer)];
  if (dp) dp->finish_training();  // ZeRO: the whole masters again, from the shards
  return losses;
}

}  // namespace

int main() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  if (!gpu->supports_collectives()) {
    std::printf("SKIP: this build has no NCCL (TRAINLAB_NCCL off)\n");
    return 77;
  }
  try {
    auto comm = dist::make_nccl_communicator(*gpu, dist::make_single_rank(*gpu));
    collectives(*gpu, *comm);
    const std::vector<float> plain = train(*gpu, nullptr, 5);
    const std::vector<float> ddp = train(*gpu, comm.get(), 5);
    expect("DDP over a one-rank NCCL communicator gives the plain losses bit for bit", plain == ddp);
    for (size_t i = 0; i < plain.size(); ++i) std::printf("  step %zu loss sum %.9g / %.9g\n", i + 1, plain[i], ddp[i]);
    // Issue 17: every strategy through the NCCL path at one rank gives the losses without it.
    for (DistStrategy z : {DistStrategy::Zero1, DistStrategy::Zero2, DistStrategy::Zero3}) {
      const std::vector<float> zl = train(*gpu, comm.get(), 5, z);
      double worst = 0;  // the largest relative difference (0: bit for bit)
      for (size_t i = 0; i < zl.size(); ++i) worst = std::max(worst, std::abs(double(zl[i]) - plain[i]) / std::abs(double(plain[i])));
      std::printf("  %s: largest relative difference from the plain losses %.3g\n", dist_strategy_name(z), worst);
      expect(std::string(dist_strategy_name(z)) + " over a one-rank NCCL communicator gives the plain losses (1e-6)",
             zl.size() == plain.size() && worst <= 1e-6);
      for (size_t i = 0; i < zl.size(); ++i) std::printf("  %s step %zu loss sum %.9g\n", dist_strategy_name(z), i + 1, zl[i]);
    }
    // bf16: the masters are the ZeRO shard (here the whole model); the losses are the plain run's.
    int64_t plain_opt = 0, params = 0;
    const std::vector<float> plain16 = train(*gpu, nullptr, 5, DistStrategy::Ddp, DType::BF16, &plain_opt, &params);
    std::printf("  bf16 without a driver: optimizer memory %lld bytes for %lld parameters (12 a parameter: masters, m, v)\n",
                static_cast<long long>(plain_opt), static_cast<long long>(params));
    expect("bf16 without a driver: masters and m, v are 12 bytes a parameter", plain_opt == 12 * params);
    for (DistStrategy z : {DistStrategy::Ddp, DistStrategy::Zero1, DistStrategy::Zero2, DistStrategy::Zero3}) {
      int64_t opt_bytes = 0;
      const std::vector<float> zl = train(*gpu, comm.get(), 5, z, DType::BF16, &opt_bytes);
      double worst = 0;
      for (size_t i = 0; i < zl.size(); ++i) worst = std::max(worst, std::abs(double(zl[i]) - plain16[i]) / std::abs(double(plain16[i])));
      std::printf("  bf16 %s: largest relative difference %.3g, optimizer memory %lld bytes for %lld parameters\n",
                  dist_strategy_name(z), worst, static_cast<long long>(opt_bytes), static_cast<long long>(params));
      expect(std::string("bf16 ") + dist_strategy_name(z) + " over a one-rank NCCL communicator gives the plain losses (1e-6)",
             zl.size() == plain16.size() && worst <= 1e-6);
      expect(std::string("bf16 ") + dist_strategy_name(z) + ": the optimizer memory of the run without a driver (one master copy)",
             opt_bytes == plain_opt);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  return finish();
}
