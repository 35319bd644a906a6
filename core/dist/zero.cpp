// ZeRO stages 1-3 (dist/data_parallel.h says what each keeps). The shard of this rank is one
// range [s, e) of the flat layout; the optimizer runs on "pieces": one Parameter per model
// parameter that meets the shard, whose tensors are 1-D views of the shard's part of the master,
// value and reduced-gradient buffers, and whose optimizer state (created by the optimizer on its
// first step, Optimizer::ensure_state) is therefore exactly the shard's.
#include <algorithm>
#include <chrono>
#include <map>

#include "dist/data_parallel.h"
#include "util/error.h"

namespace trainlab::dist {

namespace {

class Zero final : public DataParallel {
 public:
  Zero(int stage, Communicator& comm, Backend& be, Model& model, double bucket_mb)
      : DataParallel(stage == 1 ? DistStrategy::Zero1 : stage == 2 ? DistStrategy::Zero2 : DistStrategy::Zero3, comm, be,
                     model, bucket_mb),
        m_stage(stage) {
    m_n = m_flat.numel();
    m_shard = shard_range(m_n, comm.size(), comm.rank());
    m_counts = shard_counts(m_n, comm.size(), 0, m_n);
    m_grad_dtype = parameter_storage_dtype(model.compute_dtype());
    m_sixteen = m_grad_dtype != DType::F32;
    for (Parameter* p : m_flat.parameters())
      if (p->mask.defined()) throw Error("internal: ZeRO with pruning masks");
    if (stage == 3 && !model.reports_units())  // its parameters would never be gathered
      throw Error("dist.strategy zero3 needs a model that reports its units (" + model.kind() +
                  " here is wrapped, e.g. for distillation): use zero2 or ddp");
    // The reduced gradient of the shard: the gradient itself from stage 2 on, a receive buffer in stage 1.
    m_grad_shard = be.empty({m_shard.size()}, m_grad_dtype, stage >= 2 ? MemCategory::Gradients : MemCategory::Communication);
    if (stage == 3) keep_weight_shard();
    else if (m_sixteen) keep_master_shard();
    if (stage >= 2) drop_grads();
    make_pieces();
  }

  void begin_step(int micro_batches) override {
    DataParallel::begin_step(micro_batches);
    if (m_stage >= 2) m_flat.allocate(m_be, ParamBuffer::Grad, m_grad_dtype, MemCategory::Gradients);
    if (m_stage == 3) {
      m_replay = m_trace_done;
      m_recording = !m_trace_done;
      if (m_recording) m_trace.clear();
      m_trace_pos = 0;
    }
  }

  void finish_backward() override {
    wait_buckets();
    if (m_stage >= 2) drop_grads();  // outside the shard the gradients are dead now
    if (m_stage == 3 && m_recording) {
      m_recording = false;
      m_trace_done = true;
    }
  }

  // Each rank sees only its shard: the ranks agree on "any rank has inf or NaN".
  bool grads_finite() override {
    const Tensor* g = &m_grad_shard;
    double bad = m_shard.size() > 0 && !m_be.all_finite(std::span<const Tensor* const>(&g, 1)) ? 1.0 : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    m_comm.all_reduce_host(std::span<double>(&bad, 1), HostReduce::Max);
    m_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return bad == 0.0;
  }

  // Each rank sums its shard; the ranks add their sums.
  double grad_sum_squares() override {
    // The shard's pieces of the parameters this rank counts (the whole shard without tensor parallelism).
    std::vector<Tensor> pieces;
    if (m_norm_skip.empty() && m_shard.size() > 0) pieces.push_back(m_grad_shard);
    for (size_t i = 0; !m_norm_skip.empty() && i < m_flat.parameters().size(); ++i) {
      const int64_t lo = std::max(m_flat.offset(i), m_shard.begin);
      const int64_t hi = std::min(m_flat.offset(i) + m_flat.parameters()[i]->numel(), m_shard.end);
      if (lo < hi && counted(i)) pieces.push_back(element_range(m_grad_shard, lo - m_shard.begin, hi - m_shard.begin));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : pieces) ptrs.push_back(&t);
    double sum = ptrs.empty() ? 0.0 : m_be.sum_squares(ptrs);
    const auto t0 = std::chrono::steady_clock::now();
    m_comm.all_reduce_host(std::span<double>(&sum, 1), HostReduce::Sum);
    m_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return sum;
  }

  void optimizer_step(Optimizer& opt) override {
    refresh_pieces();
    if (!m_piece_ptrs.empty()) opt.step(m_be, m_piece_ptrs);
    if (m_stage == 3) return;  // the parameters are gathered unit by unit when they are used
    gather_values();
  }

  void finish_training() override {
    if (m_stage == 3) {
      if (m_whole) return;
      m_model.set_hooks(nullptr);
      for (auto& [first, u] : m_units)  // a prefetch nobody used: its buffer must outlive the transfer
        if (u.pending) wait_comm(*u.pending);
      m_units.clear();
      m_flat.allocate(m_be, ParamBuffer::Master, DType::F32, m_sixteen ? MemCategory::Optimizer : MemCategory::Weights);
      gather_into(m_master_shard, m_flat.buffer(ParamBuffer::Master));
      if (m_sixteen) {
        m_flat.allocate(m_be, ParamBuffer::Value, m_grad_dtype, MemCategory::Weights);
        gather_into(m_value_shard, m_flat.buffer(ParamBuffer::Value));
      } else {
        for (Parameter* p : m_flat.parameters()) p->value = p->master;
      }
      m_whole = true;
      return;
    }
    if (m_sixteen && !m_whole) {  // each rank kept only its shard of the fp32 masters
      m_flat.allocate(m_be, ParamBuffer::Master, DType::F32, MemCategory::Optimizer);
      gather_into(m_master_shard, m_flat.buffer(ParamBuffer::Master));
      m_whole = true;
    }
  }

  // --- checkpoints: this rank's shard of the masters and of the optimizer state ---------------
  ShardRange state_range() const override { return m_shard; }

  std::vector<float> master_state() override {
    std::vector<float> out(static_cast<size_t>(m_shard.size()));
    if (!out.empty()) m_be.download(master_shard_view(), out.data(), DType::F32);
    return out;
  }

  std::map<std::string, std::vector<float>> optimizer_state(const Optimizer& opt) override {
    return opt.save_state(m_be, m_piece_ptrs);
  }

  void restore_state(Optimizer& opt, const std::vector<float>& master,
                     const std::map<std::string, std::vector<float>>& optim) override {
    if (static_cast<int64_t>(master.size()) != m_shard.size())
      throw Error("internal: a master shard of " + std::to_string(master.size()) + " values for a shard of " +
                  std::to_string(m_shard.size()));
    Tensor mine = master_shard_view();
    if (m_shard.size() > 0) m_be.upload(mine, master.data(), DType::F32);
    if (m_stage == 3) {
      if (m_sixteen && m_shard.size() > 0) m_be.copy(m_master_shard, m_value_shard);
    } else {  // every rank holds the whole compute copy between steps (fp32: the masters)
      if (m_sixteen && m_shard.size() > 0) {
        Tensor mine_value = m_flat.range(ParamBuffer::Value, m_shard.begin, m_shard.end);
        m_be.copy(m_master_shard, mine_value);
      }
      gather_values();
    }
    refresh_pieces();
    opt.load_state(m_be, m_piece_ptrs, optim);
  }

  // --- ZeRO-3: units gathered just in time --------------------------------------------------
  void before_unit(size_t first, size_t last, bool) override {
    if (m_stage != 3 || m_whole) return;
    if (m_recording) m_trace.emplace_back(first, last);
    Unit& u = start_gather(first, last);
    if (u.pending) {
      wait_comm(*u.pending);
      u.pending.reset();
    }
    ++u.users;
    bind_unit(u, first, last);
    if (m_replay) prefetch(first, last);
    progress();
  }

  void after_unit(size_t first, size_t, bool) override {
    if (m_stage != 3 || m_whole) return;
    auto it = m_units.find(first);
    if (it == m_units.end() || --it->second.users > 0) return;
    for (size_t i = first; i < it->second.last; ++i) {
      Parameter& p = *m_flat.parameters()[i];
      p.value = Tensor();
      p.master = Tensor();
    }
    m_units.erase(it);
  }

 protected:
  CommHandle reduce_bucket(const GradBucket& b) override {
    Tensor in = m_flat.range(ParamBuffer::Grad, b.begin, b.end);
    const int64_t lo = std::clamp(b.begin, m_shard.begin, m_shard.end), hi = std::clamp(b.end, m_shard.begin, m_shard.end);
    Tensor out = element_range(m_grad_shard, lo - m_shard.begin, hi - m_shard.begin);
    return m_comm.reduce_scatter(in, out, shard_counts(m_n, m_comm.size(), b.begin, b.end));
  }

 private:
  struct Unit {
    size_t last = 0;
    Tensor buffer;        // the unit's parameters, gathered (communication memory)
    CommHandle pending;   // the gather, until waited for
    int users = 0;
  };

  // Stage 3: the weights become the shard. fp32: the masters' shard is the weights; 16-bit: the
  // compute copy's shard is the weights and the masters' shard is the optimizer's.
  void keep_weight_shard() {
    m_master_shard = m_be.empty({m_shard.size()}, DType::F32, m_sixteen ? MemCategory::Optimizer : MemCategory::Weights);
    if (m_shard.size() > 0) m_be.copy(m_flat.range(ParamBuffer::Master, m_shard.begin, m_shard.end), m_master_shard);
    if (m_sixteen) {
      m_value_shard = m_be.empty({m_shard.size()}, m_grad_dtype, MemCategory::Weights);
      if (m_shard.size() > 0) m_be.copy(m_flat.range(ParamBuffer::Value, m_shard.begin, m_shard.end), m_value_shard);
    }
    for (Parameter* p : m_flat.parameters()) {  // the whole-model buffers go with their last views
      p->value = Tensor();
      p->master = Tensor();
    }
  }

  // ZeRO-1/2 in 16-bit: the fp32 masters become the shard (optimizer memory, DeepSpeed's
  // partitioned fp32 weights); the whole compute copy stays and is all-gathered after each update.
  void keep_master_shard() {
    m_master_shard = m_be.empty({m_shard.size()}, DType::F32, MemCategory::Optimizer);
    if (m_shard.size() > 0) m_be.copy(m_flat.range(ParamBuffer::Master, m_shard.begin, m_shard.end), m_master_shard);
    for (Parameter* p : m_flat.parameters()) p->master = Tensor();  // the whole buffer goes with its views
  }

  // Every rank's shard of the compute copy (fp32: the masters themselves) to everyone.
  void gather_values() {
    Tensor full = m_flat.buffer(ParamBuffer::Value);
    gather_into(element_range(full, m_shard.begin, m_shard.end), full);
  }

  void drop_grads() {
    for (Parameter* p : m_flat.parameters()) p->grad = Tensor();
  }

  // The fp32 masters of this rank's shard (their own buffer unless they are fp32 ZeRO-1/2's weights).
  bool masters_sharded() const { return m_stage == 3 || m_sixteen; }
  Tensor master_shard_view() {
    return masters_sharded() ? m_master_shard : m_flat.range(ParamBuffer::Master, m_shard.begin, m_shard.end);
  }

  // The compute-format shard a unit is gathered from (fp32: the masters' shard).
  Tensor& gather_source() { return m_sixteen && m_stage == 3 ? m_value_shard : m_master_shard; }

  void gather_into(const Tensor& mine, const Tensor& full) {
    Tensor out = full;
    CommHandle h = m_comm.all_gather(mine, out, m_counts);
    wait_comm(*h);
  }

  Unit& start_gather(size_t first, size_t last) {
    auto it = m_units.find(first);
    if (it != m_units.end()) return it->second;
    const int64_t begin = m_flat.offset(first);
    const int64_t end = m_flat.offset(last - 1) + m_flat.parameters()[last - 1]->numel();
    Unit& u = m_units[first];
    u.last = last;
    const Tensor& src = gather_source();
    u.buffer = m_be.empty({end - begin}, src.dtype(), MemCategory::Communication);
    const int64_t lo = std::clamp(begin, m_shard.begin, m_shard.end), hi = std::clamp(end, m_shard.begin, m_shard.end);
    u.pending = m_comm.all_gather(element_range(src, lo - m_shard.begin, hi - m_shard.begin), u.buffer,
                                  shard_counts(m_n, m_comm.size(), begin, end));
    return u;
  }

  // The unit's parameters become views of its gathered buffer (fp32: master and value alike).
  void bind_unit(Unit& u, size_t first, size_t last) {
    const int64_t base = m_flat.offset(first);
    for (size_t i = first; i < last; ++i) {
      Parameter& p = *m_flat.parameters()[i];
      const Tensor v = element_range(u.buffer, m_flat.offset(i) - base, m_flat.offset(i) - base + p.numel());
      p.value = v.reshape(p.shape);
      if (!m_sixteen) p.master = p.value;
    }
  }

  // The unit the traced step used next: its gather starts now, behind this unit's computation.
  void prefetch(size_t first, size_t last) {
    if (m_trace_pos >= m_trace.size() || m_trace[m_trace_pos] != std::make_pair(first, last)) {
      m_replay = false;  // this step runs differently from the traced one: no more guesses
      return;
    }
    ++m_trace_pos;
    if (m_trace_pos < m_trace.size()) start_gather(m_trace[m_trace_pos].first, m_trace[m_trace_pos].second);
  }

  void make_pieces() {
    m_pieces.clear();
    m_pieces.reserve(m_flat.size());
    for (size_t i = 0; i < m_flat.size(); ++i) {
      const Parameter& p = *m_flat.parameters()[i];
      const int64_t lo = std::max(m_flat.offset(i), m_shard.begin);
      const int64_t hi = std::min(m_flat.offset(i) + p.numel(), m_shard.end);
      if (lo >= hi) continue;
      Parameter piece;
      piece.name = p.name;
      piece.shape = {hi - lo};
      piece.decay = p.decay;
      m_pieces.push_back(std::move(piece));
      m_piece_at.push_back(lo);
    }
    m_piece_ptrs.clear();
    for (Parameter& p : m_pieces) m_piece_ptrs.push_back(&p);
  }

  // The pieces' views of this step's buffers (the optimizer state stays the pieces' own).
  void refresh_pieces() {
    for (size_t k = 0; k < m_pieces.size(); ++k) {
      Parameter& piece = m_pieces[k];
      const int64_t lo = m_piece_at[k], n = piece.numel();
      piece.grad = element_range(m_grad_shard, lo - m_shard.begin, lo - m_shard.begin + n);
      piece.master = masters_sharded() ? element_range(m_master_shard, lo - m_shard.begin, lo - m_shard.begin + n)
                                       : m_flat.range(ParamBuffer::Master, lo, lo + n);
      if (!m_sixteen)
        piece.value = piece.master;
      else
        piece.value = m_stage == 3 ? element_range(m_value_shard, lo - m_shard.begin, lo - m_shard.begin + n)
                                   : m_flat.range(ParamBuffer::Value, lo, lo + n);
    }
  }

  int m_stage;
  int64_t m_n = 0;
  ShardRange m_shard;
  std::vector<int64_t> m_counts;
  DType m_grad_dtype = DType::F32;
  bool m_sixteen = false;
  Tensor m_grad_shard, m_master_shard, m_value_shard;
  std::vector<Parameter> m_pieces;
  std::vector<int64_t> m_piece_at;
  std::vector<Parameter*> m_piece_ptrs;
  // Stage 3 (m_whole, every stage: finish_training made the model whole again).
  std::map<size_t, Unit> m_units;
  std::vector<std::pair<size_t, size_t>> m_trace;
  size_t m_trace_pos = 0;
  bool m_recording = false, m_trace_done = false, m_replay = false, m_whole = false;
};

}  // namespace

std::unique_ptr<DataParallel> make_zero(int stage, Communicator& comm, Backend& be, Model& model, double bucket_mb) {
  return std::make_unique<Zero>(stage, comm, be, model, bucket_mb);
}

}  // namespace trainlab::dist
