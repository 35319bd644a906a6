#include "dist/data_parallel.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace trainlab::dist {

using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

std::vector<GradBucket> make_buckets(const FlatParams& flat, size_t element_bytes, double bucket_mb) {
  const double cap = bucket_mb * 1024.0 * 1024.0;
  std::vector<GradBucket> out;
  size_t last = flat.size();
  while (last > 0) {
    size_t first = last;
    double bytes = 0.0;
    // At least one parameter; then more while the bucket stays within the cap.
    do {
      --first;
      bytes += static_cast<double>(flat.parameters()[first]->numel()) * static_cast<double>(element_bytes);
    } while (first > 0 && bytes + static_cast<double>(flat.parameters()[first - 1]->numel()) *
                                      static_cast<double>(element_bytes) <= cap);
    const Parameter& lastp = *flat.parameters()[last - 1];
    out.push_back({first, last, flat.offset(first), flat.offset(last - 1) + lastp.numel()});
    last = first;
  }
  return out;
}

std::vector<int32_t> local_batch_indices(const std::vector<int32_t>& global, int micro_batches, int ranks, int rank) {
  const size_t n = global.size();
  if (micro_batches < 1 || n % static_cast<size_t>(micro_batches) != 0 ||
      (n / static_cast<size_t>(micro_batches)) % static_cast<size_t>(ranks) != 0)
    throw Error("internal: " + std::to_string(n) + " batch indices do not split into " + std::to_string(micro_batches) +
                " micro-batches of " + std::to_string(ranks) + " equal slices");
  const size_t per = n / static_cast<size_t>(micro_batches), slice = per / static_cast<size_t>(ranks);
  std::vector<int32_t> out;
  out.reserve(slice * static_cast<size_t>(micro_batches));
  for (size_t j = 0; j < static_cast<size_t>(micro_batches); ++j) {
    const auto from = global.begin() + static_cast<long>(j * per + static_cast<size_t>(rank) * slice);
    out.insert(out.end(), from, from + static_cast<long>(slice));
  }
  return out;
}

// --- the base: buckets, timing, the host sums --------------------------------------------------

DataParallel::DataParallel(DistStrategy s, Communicator& comm, Backend& be, Model& model, double bucket_mb)
    : m_strategy(s), m_comm(comm), m_be(be), m_model(model), m_flat(model.flat_params()) {
  const size_t eb = dtype_bytes(parameter_storage_dtype(model.compute_dtype()), 1);
  m_buckets = make_buckets(m_flat, eb, bucket_mb);
  m_started.assign(m_buckets.size(), false);
  m_bytes_at_take = comm.bytes_sent();
  model.set_hooks(this);
}

DataParallel::~DataParallel() {
  if (m_model.hooks() == this) m_model.set_hooks(nullptr);
}

void DataParallel::begin_step(int micro_batches) {
  if (!m_inflight.empty()) throw Error("internal: a step began with collectives of the last one in flight");
  m_micro_batches = std::max(1, micro_batches);
  m_backward = 0;
  std::fill(m_started.begin(), m_started.end(), false);
}

void DataParallel::grads_ready(size_t first) {
  if (m_backward == m_micro_batches - 1) launch_ready(first);
  progress();
  if (first == 0) ++m_backward;
}

void DataParallel::launch_ready(size_t first) {
  for (size_t i = 0; i < m_buckets.size(); ++i)
    if (!m_started[i] && m_buckets[i].first_param >= first) {
      m_started[i] = true;
      m_inflight.push_back(reduce_bucket(m_buckets[i]));
    }
}

void DataParallel::progress() {
  for (auto& h : m_inflight) h->test();
}

void DataParallel::wait_comm(CommRequest& h) {
  const auto t0 = Clock::now();
  h.wait();
  m_comm_s += seconds_since(t0);
}

void DataParallel::wait_buckets() {
  launch_ready(0);  // buckets a model without hooks (or an earlier micro-batch count) left
  for (auto& h : m_inflight) wait_comm(*h);
  m_inflight.clear();
}

void DataParallel::sum(std::span<double> v) {
  const auto t0 = Clock::now();
  m_comm.all_reduce_host(v, HostReduce::Sum);
  m_wait_s += seconds_since(t0);
}

std::vector<float> DataParallel::master_state() {
  std::vector<float> out(static_cast<size_t>(m_flat.numel()));
  for (size_t i = 0; i < m_flat.size(); ++i)
    m_be.download(m_flat.parameters()[i]->master, out.data() + m_flat.offset(i), DType::F32);
  return out;
}

std::map<std::string, std::vector<float>> DataParallel::optimizer_state(const Optimizer& opt) {
  return opt.save_state(m_be, m_flat.parameters());
}

void DataParallel::restore_state(Optimizer& opt, const std::vector<float>& master,
                                 const std::map<std::string, std::vector<float>>& optim) {
  for (size_t i = 0; i < m_flat.size(); ++i) {
    Parameter& p = *m_flat.parameters()[i];
    m_be.upload(p.master, master.data() + m_flat.offset(i), DType::F32);
    if (p.value.defined() && !p.value.same_storage(p.master)) m_be.copy(p.master, p.value);
  }
  opt.load_state(m_be, m_flat.parameters(), optim);
}

DistStepMetrics DataParallel::take_metrics(double step_s) {
  DistStepMetrics m;
  m.comm_s = m_comm_s;
  m.wait_s = m_wait_s;
  m.compute_s = std::max(0.0, step_s - m_comm_s - m_wait_s);
  m.bytes_sent = m_comm.bytes_sent() - m_bytes_at_take;
  m_bytes_at_take = m_comm.bytes_sent();
  m_comm_s = m_wait_s = 0.0;
  return m;
}

// --- DDP ---------------------------------------------------------------------------------------

namespace {

// Every rank keeps the whole model; each bucket is all-reduced in place in the flat gradient
// buffer. The loss's gradient multiplier already divides by the global batch (TrainingStep), so
// the sum over ranks is the gradient of the global batch's mean loss.
class Ddp final : public DataParallel {
 public:
  Ddp(Communicator& comm, Backend& be, Model& model, double bucket_mb)
      : DataParallel(DistStrategy::Ddp, comm, be, model, bucket_mb) {}

  void finish_backward() override { wait_buckets(); }

  // The reduced gradients are the same on every rank, so is the answer.
  bool grads_finite() override {
    std::vector<const Tensor*> grads;
    for (Parameter* p : m_flat.parameters()) grads.push_back(&p->grad);
    return m_be.all_finite(grads);
  }

  double grad_sum_squares() override {
    std::vector<const Tensor*> grads;
    const std::vector<Parameter*>& params = m_flat.parameters();
    for (size_t i = 0; i < params.size(); ++i)
      if (counted(i)) grads.push_back(&params[i]->grad);
    return m_be.sum_squares(grads);
  }

  void optimizer_step(Optimizer& opt) override {
    std::vector<Parameter*> params = m_flat.parameters();
    opt.step(m_be, params);
  }

 protected:
  CommHandle reduce_bucket(const GradBucket& b) override {
    Tensor g = m_flat.range(ParamBuffer::Grad, b.begin, b.end);
    return m_comm.all_reduce(g);
  }
};

}  // namespace

std::unique_ptr<DataParallel> make_zero(int stage, Communicator& comm, Backend& be, Model& model, double bucket_mb);

std::unique_ptr<DataParallel> DataParallel::create(const DistOptions& o, Communicator& comm, Backend& be, Model& model) {
  // A communicator of one rank is valid for every stage (each shard is the whole model): the GPU
  // test runs ZeRO over a one-GPU NCCL communicator. A user's run of one rank with ZeRO is refused
  // earlier, by train/distributed.cpp, where it is a mistake rather than a test.
  const int stage = zero_stage(o.strategy);
  if (stage == 0) return std::make_unique<Ddp>(comm, be, model, o.bucket_mb);
  return make_zero(stage, comm, be, model, o.bucket_mb);
}

}  // namespace trainlab::dist
