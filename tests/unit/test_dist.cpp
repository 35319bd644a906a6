// core/dist on one process: where a rank stands (the launchers' environment variables, malformed
// ones named), the mpirun command line of --ranks, shards and buckets of the flat layout, each
// rank's part of a batch, the single-rank communicator, the process-group grid, and the reducer's
// timing: with a recording communicator, each bucket of gradients is reduced while the backward
// pass goes on, and only in the last micro-batch's backward; every strategy over one rank in fp32
// and bf16 (ZeRO's master shard). (Several ranks: test_dist_ranks.)
// Also dist.transport's decision without GPUs or MPI (dist/world.h): choose_transport for each
// device, transport, number of local ranks and GPU count (nccl where every local rank has a GPU of
// its own, staged MPI where they share, plain MPI on the CPU), rank_device's GPU for each rank, and
// every error message; make_world applies the decision before it touches MPI (the staged
// communicator itself: test_staged_comm; on a GPU: tests/gpu/test_cuda_staged).
#include <QtTest>
#include <map>
#include <thread>

#include "backend/cpu_backend.h"
#include "config/dist_options.h"
#include "dist/data_parallel.h"
#include "dist/launch.h"
#include "dist/process_groups.h"
#include "dist/world.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "test_support.h"
#include "train/training_step.h"

using namespace trainlab;
using namespace trainlab::test;
using namespace trainlab::dist;

namespace {

// Rank `local_rank` of `local_size` ranks on this machine, of `size` in all, under mpirun.
LaunchInfo place(int local_rank, int local_size, int size = 0) {
  LaunchInfo p;
  p.launcher = "mpirun";
  p.size = size > 0 ? size : local_size;
  p.rank = p.local_rank = local_rank;
  p.local_size = local_size;
  return p;
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


// What a short training leaves: its losses, the ledger's optimizer bytes after the last step and,
// after DataParallel::finish_training, every parameter's fp32 master.
struct Trained {
  std::vector<float> losses, masters;
  int64_t optimizer_bytes = 0, params = 0;
};

// The digits MLP on random rows in `compute` format: `steps` AdamW steps of 2 micro-batches, with
// the data-parallel driver of `strategy` over a communicator of one rank, or without one (comm null).
Trained train_run(Backend& be, Communicator* comm, DistStrategy strategy, int steps, DType compute = DType::F32);

std::vector<float> train_losses(Backend& be, Communicator* comm, DistStrategy strategy, int steps) {
  return train_run(be, comm, strategy, steps).losses;
}

Trained train_run(Backend& be, Communicator* comm, DistStrategy strategy, int steps, DType compute) {
  auto model = build_model(be, {{"kind", "mlp"}, {"sizes", {64, 256, 256, 10}}, {"activation", "relu"}}, 7);
  model->set_compute_dtype(be, compute);
  auto opt = make_optimizer(OptimizerOptions{});
  const int64_t n = 512, batch = 64;
  std::vector<float> x = random_vector(static_cast<size_t>(n * 64), 3);
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
  Tensor tx = upload_f32(be, x, {n, 64});
  Tensor ty = be.empty({n}, DType::I32, MemCategory::Workspace);
  be.upload(ty, y.data(), DType::I32);
  TrainingStep step(be, *model, *opt, tx, ty, batch, 2);
  std::unique_ptr<DataParallel> dp;
  DistOptions o;
  o.bucket_mb = 0.05;  // several buckets
  o.strategy = strategy;
  if (comm) dp = DataParallel::create(o, *comm, be, *model);
  Trained out;
  std::vector<float>& losses = out.losses;
  for (int s = 0; s < steps; ++s) {
    StepScalars sc;
    sc.lr = 1e-3f;
    sc.step = static_cast<float>(s + 1);
    be.set_step_scalars(sc);
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
    losses.push_back(download_f32(be, step.stats())[0]);
  }
  out.optimizer_bytes = be.ledger().snapshot().current[static_cast<size_t>(MemCategory::Optimizer)];
  if (dp) dp->finish_training();
  for (Parameter* p : model->parameters()) {
    const std::vector<float> m = download_f32(be, p->master);
    out.masters.insert(out.masters.end(), m.begin(), m.end());
  }
  out.params = static_cast<int64_t>(out.masters.size());
  return out;
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto owned = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

// Rank 0 of two that records every collective and the model's progress, in one log.
class RecordingComm final : public Communicator {
 public:
  explicit RecordingComm(std::vector<std::string>& log) : Communicator(0, 2, 5.0), m_log(log) {}
  std::string kind() const override { return "recording"; }
  DeviceKind device() const override { return DeviceKind::Cpu; }
  CommHandle all_reduce(Tensor& t) override {
    m_log.push_back("all-reduce " + std::to_string(t.numel()));
    return completed_request();
  }
  CommHandle reduce_scatter(const Tensor&, Tensor&, std::span<const int64_t>) override { return completed_request(); }
  CommHandle all_gather(const Tensor&, Tensor&, std::span<const int64_t>) override { return completed_request(); }
  CommHandle broadcast(Tensor&, int) override { return completed_request(); }
  CommHandle send(const Tensor&, int, int) override { return completed_request(); }
  CommHandle recv(Tensor&, int, int) override { return completed_request(); }
  void barrier() override {}
  void all_reduce_host(std::span<double>, HostReduce) override {}
  std::vector<uint64_t> all_gather_host(uint64_t v) override { return {v, v}; }
  std::vector<double> all_gather_host(std::span<const double> v) override { return {v.begin(), v.end()}; }
  void broadcast_host(std::vector<uint8_t>&, int) override {}
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }

 private:
  std::vector<std::string>& m_log;
};

// Passes the model's hooks on to the data-parallel driver, writing each finished-gradients report
// into the same log first.
class Spy final : public ModelHooks {
 public:
  Spy(ModelHooks& inner, std::vector<std::string>& log) : m_inner(inner), m_log(log) {}
  void grads_ready(size_t first) override {
    m_log.push_back("ready " + std::to_string(first));
    m_inner.grads_ready(first);
  }

 private:
  ModelHooks& m_inner;
  std::vector<std::string>& m_log;
};

}  // namespace

class TestDist : public QObject {
  Q_OBJECT
 private slots:
  void launchFromEnvironment() {
    LaunchInfo i = launch_info(env_of({}));
    QVERIFY(!i.launched());
    QCOMPARE(i.size, 1);
    i = launch_info(env_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"PMIX_RANK", "3"}}));
    QCOMPARE(i.launcher, std::string("mpirun"));
    QCOMPARE(i.rank, 3);
    QCOMPARE(i.size, 4);
    QCOMPARE(i.local_rank, 1);
    QCOMPARE(i.local_size, 2);
    i = launch_info(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                            {"SLURM_NTASKS_PER_NODE", "4(x2)"}, {"SLURM_STEP_ID", "0"}}));
    QCOMPARE(i.launcher, std::string("slurm"));
    QCOMPARE(i.rank, 5);
    QCOMPARE(i.size, 8);
    QCOMPARE(i.local_rank, 1);
    // An sbatch script itself (no job step) is not one of the ranks: it starts them with srun.
    i = launch_info(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}}));
    QVERIFY(!i.launched());
    i = launch_info(env_of({{"PMIX_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
    QCOMPARE(i.launcher, std::string("pmix"));
    QCOMPARE(i.rank, 1);
    QCOMPARE(i.size, 2);
    i = launch_info(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}));
    QCOMPARE(i.launcher, std::string("hydra"));
    QCOMPARE(i.size, 2);
  }

  // A launcher variable that is set but wrong ends the run with an error naming it.
  void badLaunchEnvironment_data() {
    QTest::addColumn<QStringList>("vars");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("rank not a number") << QStringList{"OMPI_COMM_WORLD_RANK", "one", "OMPI_COMM_WORLD_SIZE", "2"}
                                       << "OMPI_COMM_WORLD_RANK='one': expected an integer from 0 to";
    QTest::newRow("rank past size") << QStringList{"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "2"}
                                    << "OMPI_COMM_WORLD_RANK=2: expected an integer from 0 to 1";
    QTest::newRow("size zero") << QStringList{"SLURM_PROCID", "0", "SLURM_NTASKS", "0", "SLURM_STEP_ID", "1"}
                               << "SLURM_NTASKS='0': expected an integer from 1 to";
    QTest::newRow("size missing") << QStringList{"PMI_RANK", "0"} << "PMI_RANK is set but PMI_SIZE is not";
    QTest::newRow("local rank") << QStringList{"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
                                               "OMPI_COMM_WORLD_LOCAL_RANK", "-1"}
                                << "OMPI_COMM_WORLD_LOCAL_RANK='-1': expected an integer from 0 to 1";
  }
  void badLaunchEnvironment() {
    QFETCH(QStringList, vars);
    QFETCH(QString, mentions);
    std::map<std::string, std::string> m;
    for (int i = 0; i + 1 < vars.size(); i += 2) m[vars[i].toStdString()] = vars[i + 1].toStdString();
    const std::string e = error_of([&] { launch_info(env_of(m)); });
    QVERIFY2(e.find(mentions.toStdString()) != std::string::npos, e.c_str());
  }

  void mpirunCommandLine() {
    qunsetenv("NCCL_NVLS_ENABLE");
    qputenv("TRAINLAB_THREADS", "2");  // the caller's choice stands
    const auto a = mpirun_argv(3, "/bin/trainlab-cli", {"train", "--ranks", "3"}, true);
    const std::vector<std::string> want{"mpirun", "-np", "3", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                                        "none", "-x", "NCCL_NVLS_ENABLE=0", "/bin/trainlab-cli", "train", "--ranks", "3"};
    QCOMPARE(a, want);
    qunsetenv("TRAINLAB_THREADS");
    const auto b = mpirun_argv(2, "x", {}, false);
    QVERIFY(std::find(b.begin(), b.end(), "--allow-run-as-root") == b.end());
    // Without it, each rank takes its share of the cores (at least one).
    const std::string share = "TRAINLAB_THREADS=" + std::to_string(std::max(1u, std::thread::hardware_concurrency() / 2));
    QVERIFY(std::find(b.begin(), b.end(), share) != b.end());
  }

  void rankDevice() {
    LaunchInfo two;
    two.launcher = "mpirun";
    two.size = 2;
    two.rank = two.local_rank = 1;
    two.local_size = 2;
    // Two GPUs for the two local ranks: each its own (more cases: transportRankDevice below).
    QCOMPARE(rank_device("cuda", two, "auto", 2), std::string("cuda:1"));
    QCOMPARE(rank_device("auto", two, "auto", 2), std::string("cuda:1"));
    QCOMPARE(rank_device("cpu", two, "auto", 2), std::string("cpu"));
    QCOMPARE(rank_device("cuda", LaunchInfo{}, "auto", 2), std::string("cuda"));
    const std::string e = error_of([&] { rank_device("cuda:0", two, "auto", 2); });
    QVERIFY2(e.find("device.name cuda:0 names one GPU for the 2 ranks") != std::string::npos, e.c_str());
  }

  void shardsCoverTheLayout() {
    for (int64_t n : {1, 7, 8, 85002})
      for (int w : {1, 2, 3, 8}) {
        int64_t at = 0;
        for (int r = 0; r < w; ++r) {
          const ShardRange s = shard_range(n, w, r);
          QCOMPARE(s.begin, at);
          QVERIFY(s.size() >= 0 && s.size() <= (n + w - 1) / w);
          at = s.end;
        }
        QCOMPARE(at, n);
        const auto c = shard_counts(n, w, n / 3, n - n / 5);
        int64_t total = 0;
        for (int64_t x : c) total += x;
        QCOMPARE(total, (n - n / 5) - n / 3);
      }
    QCOMPARE(shard_counts(10, 2, 3, 8), (std::vector<int64_t>{2, 3}));
  }

  // Buckets are whole parameters, from the last one back, about bucket_mb each; together they
  // cover the flat buffer once.
  void bucketsFromTheEnd() {
    CpuBackend be;
    // net.0.weight 16384, net.0.bias 256, net.2.weight 65536, net.2.bias 256, net.4.weight 2560, net.4.bias 10
    Mlp mlp(be, {64, 256, 256, 10}, Activation::ReLU, 1);
    const FlatParams flat = mlp.flat_params();
    const auto b = make_buckets(flat, 4, 0.07);  // 73,400 bytes: 18,350 floats
    QCOMPARE(b.size(), size_t(3));
    QCOMPARE(b[0].first_param, size_t(3));  // the last three parameters (2,826 floats)
    QCOMPARE(b[0].last_param, size_t(6));
    QCOMPARE(b[1].first_param, size_t(2));  // net.2.weight alone, over the size
    QCOMPARE(b[2].first_param, size_t(0));
    int64_t end = flat.numel();
    for (const GradBucket& x : b) {
      QCOMPARE(x.end, end);
      QCOMPARE(x.begin, flat.offset(x.first_param));
      end = x.begin;
    }
    QCOMPARE(end, int64_t(0));
    QCOMPARE(make_buckets(flat, 4, 25.0).size(), size_t(1));
    QCOMPARE(make_buckets(flat, 4, 0.001).size(), flat.size());  // each parameter alone
  }

  void localBatchIndices() {
    std::vector<int32_t> g(12);
    for (int i = 0; i < 12; ++i) g[static_cast<size_t>(i)] = i;
    QCOMPARE(local_batch_indices(g, 2, 2, 0), (std::vector<int32_t>{0, 1, 2, 6, 7, 8}));
    QCOMPARE(local_batch_indices(g, 2, 2, 1), (std::vector<int32_t>{3, 4, 5, 9, 10, 11}));
    QCOMPARE(local_batch_indices(g, 1, 3, 2), (std::vector<int32_t>{8, 9, 10, 11}));
    QVERIFY(!error_of([&] { local_batch_indices(g, 1, 5, 0); }).empty());
  }

  void distOptions() {
    QVERIFY(dist_options(Config()) == DistOptions{});
    Config c;
    c.set("dist.strategy", "zero2");
    c.set("dist.bucket_mb", "0.5");
    c.set("dist.ranks", "4");
    c.set("dist.timeout_s", "30");
    const DistOptions o = dist_options(c);
    QCOMPARE(o.strategy, DistStrategy::Zero2);
    QCOMPARE(zero_stage(o.strategy), 2);
    QCOMPARE(o.bucket_mb, 0.5);
    QCOMPARE(o.ranks, 4);
    QCOMPARE(o.timeout_s, 30.0);
    const std::string e = error_of([&] { c.set("dist.bucket_mb", "0"); });
    QVERIFY2(e.find("dist.bucket_mb") != std::string::npos && e.find("expected a number in [0.001, 4096]") != std::string::npos, e.c_str());
    QVERIFY(error_of([&] { c.set("dist.strategy", "zero4"); }).find("ddp, zero1, zero2, zero3") != std::string::npos);
  }

  void singleRankCollectives() {
    CpuBackend be;
    auto c = make_single_rank(be);
    QCOMPARE(c->size(), 1);
    Tensor t = upload_f32(be, {1, 2, 3, 4}, {4});
    c->all_reduce(t)->wait();
    QCOMPARE(download_f32(be, t), (std::vector<float>{1, 2, 3, 4}));
    Tensor out = be.empty({4}, DType::F32, MemCategory::Communication);
    const int64_t four[] = {4};
    c->reduce_scatter(t, out, four)->wait();
    QCOMPARE(download_f32(be, out), (std::vector<float>{1, 2, 3, 4}));
    be.fill(out, 0.0f);
    c->all_gather(t, out, four)->wait();
    QCOMPARE(download_f32(be, out), (std::vector<float>{1, 2, 3, 4}));
    QVERIFY(!error_of([&] { c->broadcast(t, 1); }).empty());
    double v[2] = {1.5, 2.5};
    c->all_reduce_host(v, HostReduce::Sum);
    QCOMPARE(v[1], 2.5);
    check_same_config(*c, "anything");  // one rank agrees with itself
    QVERIFY(text_hash("a") != text_hash("b"));
  }

  void processGroupGrid() {
    // 8 ranks, tensor 2 x pipeline 2: data parallel 2. rank = tp + 2 (dp + 2 pp).
    const GridPlace p = grid_place(7, 8, {2, 2});
    QCOMPARE(p.tp, 1);
    QCOMPARE(p.dp, 1);
    QCOMPARE(p.pp, 1);
    const GridPlace q = grid_place(2, 8, {2, 2});
    QCOMPARE(q.tp, 0);
    QCOMPARE(q.dp, 1);
    QCOMPARE(q.pp, 0);
    QVERIFY(error_of([] { grid_place(0, 6, {4, 1}); }).find("do not divide the 6 ranks") != std::string::npos);
    CpuBackend be;
    ProcessGroups g(make_single_rank(be), {}, be);
    QCOMPARE(&g.group("data"), &g.world());
    QCOMPARE(g.group("tensor").size(), 1);
    QVERIFY(error_of([&] { g.group("expert"); }).find("world, data, tensor and pipeline") != std::string::npos);
  }

  // The library refuses what only a launcher can provide (the command line starts the ranks).
  void trainerNeedsItsRanks() {
    QTemporaryDir tmp;
    Config c = digits_config(tmp.path().toStdString() + "/run", 2);
    c.set("dist.ranks", "2");
    std::string e = error_of([&] { Trainer(c).run(); });
    QVERIFY2(e.find("dist.ranks is 2, but this process was not started by a launcher: use trainlab-cli train --ranks 2") !=
                 std::string::npos,
             e.c_str());
    c.set("dist.ranks", "0");
    c.set("dist.strategy", "zero3");
    e = error_of([&] { Trainer(c).run(); });
    QVERIFY2(e.find("dist.strategy zero3 shards the model over the ranks and needs at least 2 of them; this run has 1") !=
                 std::string::npos,
             e.c_str());
  }

  // Every strategy runs over a communicator of one rank (each shard the whole model) with the
  // losses of no data parallelism at all; tests/gpu/test_cuda_dist.cpp does the same over NCCL.
  void everyStrategyOverOneRank() {
    CpuBackend be;
    const std::vector<float> plain = train_losses(be, nullptr, DistStrategy::Ddp, 4);
    for (DistStrategy z : {DistStrategy::Ddp, DistStrategy::Zero1, DistStrategy::Zero2, DistStrategy::Zero3}) {
      auto comm = make_single_rank(be);
      const std::vector<float> got = train_losses(be, comm.get(), z, 4);
      QVERIFY2(got == plain, dist_strategy_name(z));
    }
    QVERIFY(plain.back() < plain.front());
  }

  // bf16: ZeRO keeps its shard of the fp32 masters (here the whole model) in place of the whole
  // buffer, so the optimizer memory is the plain run's (12 bytes a parameter: masters, m, v), and
  // finish_training gives back the plain run's masters bit for bit. test_cuda_dist does it on a GPU.
  void sixteenBitStrategiesOverOneRank() {
    CpuBackend be;
    const Trained plain = train_run(be, nullptr, DistStrategy::Ddp, 4, DType::BF16);
    QCOMPARE(plain.optimizer_bytes, 12 * plain.params);
    for (DistStrategy z : {DistStrategy::Ddp, DistStrategy::Zero1, DistStrategy::Zero2, DistStrategy::Zero3}) {
      auto comm = make_single_rank(be);
      const Trained got = train_run(be, comm.get(), z, 4, DType::BF16);
      QVERIFY2(got.losses == plain.losses, dist_strategy_name(z));
      QVERIFY2(got.optimizer_bytes == plain.optimizer_bytes, dist_strategy_name(z));
      QVERIFY2(got.masters == plain.masters, dist_strategy_name(z));
    }
  }

  // PyTorch DDP's reducer: a bucket is reduced as soon as the backward has finished its gradients,
  // before the backward of the layers below it; with accumulation, only in the last micro-batch.
  void bucketsReduceDuringBackward() {
    CpuBackend be;
    Mlp mlp(be, {64, 256, 256, 10}, Activation::ReLU, 1);
    std::vector<std::string> log;
    RecordingComm comm(log);
    DistOptions o;
    o.bucket_mb = 0.07;  // buckets: parameters [3, 6), [2, 3), [0, 2)
    auto dp = DataParallel::create(o, comm, be, mlp);
    Spy spy(*dp, log);
    mlp.set_hooks(&spy);
    Tensor x = upload_f32(be, random_vector(8 * 64, 3), {8, 64});
    Tensor dlogits = upload_f32(be, random_vector(8 * 10, 4), {8, 10});
    dp->begin_step(2);
    for (int micro = 0; micro < 2; ++micro) {
      log.push_back("backward " + std::to_string(micro));
      mlp.forward(be, x, true);
      mlp.backward(be, dlogits, micro > 0);
    }
    dp->finish_backward();
    const std::vector<std::string> want{"backward 0", "ready 4",           "ready 2",           "ready 0",
                                        "backward 1", "ready 4",           "ready 2",           "all-reduce 2826",
                                        "all-reduce 65536", "ready 0",     "all-reduce 16640"};
    std::string got;
    for (const auto& l : log) got += l + "; ";
    QVERIFY2(log == want, got.c_str());
    mlp.set_hooks(nullptr);
  }

  // --- dist.transport ----------------------------------------------------------------------
  // device, transport, local ranks, ranks in all, GPUs -> the communicator's kind and whether a notice says why.
  void choice_data() {
    QTest::addColumn<bool>("cuda");
    QTest::addColumn<QString>("transport");
    QTest::addColumn<int>("local");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("gpus");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<bool>("notice");
    QTest::newRow("one rank, nccl on the cpu") << false << "nccl" << 1 << 1 << 0 << "single" << false;
    QTest::newRow("one rank, cuda") << true << "auto" << 1 << 1 << 1 << "single" << false;
    QTest::newRow("cpu auto") << false << "auto" << 2 << 2 << 0 << "mpi" << false;
    QTest::newRow("cpu mpi") << false << "mpi" << 3 << 3 << 0 << "mpi" << false;
    QTest::newRow("cpu on a gpu machine") << false << "auto" << 2 << 2 << 8 << "mpi" << false;
    QTest::newRow("auto, a gpu each") << true << "auto" << 2 << 2 << 2 << "nccl" << false;
    QTest::newRow("auto, spare gpus") << true << "auto" << 2 << 2 << 8 << "nccl" << false;
    QTest::newRow("auto, one gpu") << true << "auto" << 2 << 2 << 1 << "mpi-staged" << true;
    QTest::newRow("auto, 3 ranks on 2 gpus") << true << "auto" << 3 << 3 << 2 << "mpi-staged" << true;
    QTest::newRow("auto, 2 machines of 1 gpu") << true << "auto" << 1 << 2 << 1 << "nccl" << false;
    QTest::newRow("nccl, a gpu each") << true << "nccl" << 4 << 8 << 4 << "nccl" << false;
    QTest::newRow("mpi, a gpu each") << true << "mpi" << 2 << 2 << 2 << "mpi-staged" << false;
    QTest::newRow("mpi, one gpu") << true << "mpi" << 2 << 2 << 1 << "mpi-staged" << false;
  }
  void choice() {
    QFETCH(bool, cuda);
    QFETCH(QString, transport);
    QFETCH(int, local);
    QFETCH(int, size);
    QFETCH(int, gpus);
    QFETCH(QString, kind);
    QFETCH(bool, notice);
    const TransportChoice c = choose_transport(cuda ? DeviceKind::Cuda : DeviceKind::Cpu, transport.toStdString(),
                                               place(0, local, size), gpus);
    QCOMPARE(QString(transport_name(c.transport)), kind);
    QVERIFY2(c.notice.empty() != notice, c.notice.c_str());
    if (notice) QVERIFY2(mentions(c.notice, "dist.transport auto: " + std::to_string(local) + " ranks on this machine and " +
                                                std::to_string(gpus) + " GPU") &&
                             mentions(c.notice, "not a fast one"),
                         c.notice.c_str());
  }

  void choiceErrors() {
    std::string e = error_of([] { choose_transport(DeviceKind::Cpu, "nccl", place(0, 2), 0); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors, but this rank runs on the CPU (device cpu): use "
                         "dist.transport=auto or mpi"),
             e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "nccl", place(1, 2), 1); });
    QVERIFY2(mentions(e, "dist.transport nccl needs a GPU for each rank, and there are 2 ranks on this machine and 1 GPU") &&
                 mentions(e, "use dist.transport=mpi") && mentions(e, "no more ranks on a machine than it has GPUs"),
             e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "nccl", place(0, 3), 2); });
    QVERIFY2(mentions(e, "3 ranks on this machine and 2 GPUs"), e.c_str());
    e = error_of([] { choose_transport(DeviceKind::Cuda, "gloo", place(0, 2), 2); });
    QVERIFY2(mentions(e, "dist.transport 'gloo': expected auto, nccl or mpi"), e.c_str());
  }

  // configured device, transport, local rank of local ranks, GPUs -> this rank's device.
  void transportRankDevice_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<QString>("transport");
    QTest::addColumn<int>("local_rank");
    QTest::addColumn<int>("local");
    QTest::addColumn<int>("gpus");
    QTest::addColumn<QString>("want");
    QTest::newRow("one rank keeps its device") << "cuda:3" << "nccl" << 0 << 1 << 1 << "cuda:3";
    QTest::newRow("a gpu each") << "cuda" << "nccl" << 1 << 2 << 2 << "cuda:1";
    QTest::newRow("auto device, a gpu each") << "auto" << "auto" << 1 << 2 << 4 << "cuda:1";
    QTest::newRow("mpi, a gpu each") << "cuda" << "mpi" << 1 << 2 << 2 << "cuda:1";
    QTest::newRow("mpi, one gpu") << "cuda" << "mpi" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("auto, one gpu") << "cuda" << "auto" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("auto, rank 2 on 2 gpus") << "cuda" << "auto" << 2 << 3 << 2 << "cuda:0";
    QTest::newRow("auto, rank 3 on 2 gpus") << "auto" << "auto" << 3 << 4 << 2 << "cuda:1";
    QTest::newRow("mpi, a named gpu for all") << "cuda:0" << "mpi" << 1 << 2 << 1 << "cuda:0";
    QTest::newRow("cpu") << "cpu" << "auto" << 1 << 2 << 2 << "cpu";
    QTest::newRow("cpu, mpi") << "cpu" << "mpi" << 1 << 2 << 0 << "cpu";
    QTest::newRow("no gpu: cuda") << "cuda" << "auto" << 1 << 2 << 0 << "cuda:1";
    QTest::newRow("no gpu: auto falls back later") << "auto" << "nccl" << 1 << 2 << 0 << "auto";
  }
  void transportRankDevice() {
    QFETCH(QString, device);
    QFETCH(QString, transport);
    QFETCH(int, local_rank);
    QFETCH(int, local);
    QFETCH(int, gpus);
    QFETCH(QString, want);
    QCOMPARE(q(rank_device(device.toStdString(), place(local_rank, local), transport.toStdString(), gpus)), want);
  }

  void transportRankDeviceErrors() {
    std::string e = error_of([] { rank_device("cuda", place(1, 2), "nccl", 1); });
    QVERIFY2(mentions(e, "dist.transport nccl needs a GPU for each rank") && mentions(e, "use dist.transport=mpi"),
             e.c_str());
    for (const char* transport : {"auto", "nccl"}) {
      e = error_of([&] { rank_device("cuda:0", place(1, 2), transport, 1); });
      QVERIFY2(mentions(e, "device.name cuda:0 names one GPU for the 2 ranks on this machine: use cuda") &&
                   mentions(e, "or dist.transport=mpi to run them all on cuda:0"),
               e.c_str());
    }
    e = error_of([] { rank_device("cpu", place(0, 2), "nccl", 0); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors") && mentions(e, "(device cpu)"), e.c_str());
    e = error_of([] { rank_device("cuda", place(0, 2), "ucx", 2); });
    QVERIFY2(mentions(e, "dist.transport 'ucx': expected auto, nccl or mpi"), e.c_str());
  }

  // make_world decides before it asks MPI: nccl on CPU ranks fails here even without mpirun; one
  // rank needs no transport at all.
  void makeWorldDecidesFirst() {
    CpuBackend be;
    const std::string e = error_of([&] { make_world(place(0, 2), be, 1.0, "nccl"); });
    QVERIFY2(mentions(e, "dist.transport nccl moves GPU tensors, but this rank runs on the CPU"), e.c_str());
    std::string notice = "stale";
    auto one = make_world(LaunchInfo{}, be, 1.0, "nccl", &notice);
    QCOMPARE(q(one->kind()), QString("single"));
    QVERIFY(notice.empty());
  }
};

QTEST_APPLESS_MAIN(TestDist)
#include "test_dist.moc"
