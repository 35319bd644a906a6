#include "train/pipeline_executor.h"

#include <chrono>

#include "util/error.h"

namespace trainlab {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
// The message stream into virtual stage k: its activations (0) or its output's gradients (1).
int stream_into(int k, bool gradient) { return 2 * k + (gradient ? 1 : 0); }
}  // namespace

PipelineExecutor::PipelineExecutor(std::vector<CharGpt*> chunks, dist::Communicator& pipe, dist::PipelineTable table)
    : m_chunks(std::move(chunks)), m_pipe(pipe), m_table(std::move(table)) {
  if (m_table.kind == dist::PipelineSchedule::ZbH1)
    throw Error("pipeline runtime: dist.schedule zb-h1 does not run yet (gpipe, 1f1b and interleaved do)");
  if (m_table.stages != pipe.size() || m_table.chunks != static_cast<int>(m_chunks.size()))
    throw Error("pipeline runtime: a table of " + std::to_string(m_table.stages) + " stages x " +
                std::to_string(m_table.chunks) + " chunks for a pipeline group of " + std::to_string(pipe.size()) +
                " ranks with " + std::to_string(m_chunks.size()) + " chunks each");
  if (2 * m_table.virtual_stages() > dist::Communicator::kMaxStream)
    throw Error("pipeline runtime: " + std::to_string(m_table.virtual_stages()) + " virtual stages need more message "
                "streams than a communicator has");
}

void PipelineExecutor::step(Backend& be, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, float mult,
                            Tensor& stats) {
  const int s = m_pipe.rank(), m = m_table.micro_batches, V = m_table.virtual_stages();
  if (static_cast<int>(xs.size()) != m || static_cast<int>(ys.size()) != m)
    throw Error("pipeline runtime: " + std::to_string(xs.size()) + " micro-batches for a table of " + std::to_string(m));
  const int64_t B = xs[0].dim(0), T = xs[0].dim(1), D = m_chunks[0]->config().dim;
  const DType dt = parameter_storage_dtype(m_chunks[0]->compute_dtype());
  // Each send keeps its buffer until the step's end; a receive's buffer lives until its use.
  std::vector<Tensor> sent;
  std::vector<dist::CommHandle> sends;
  std::vector<Tensor> grads(static_cast<size_t>(m));  // the last virtual stage's logits gradients
  auto post_send = [&](const Tensor& t, int peer, int stream) {
    sent.push_back(be.empty(t.shape(), t.dtype(), MemCategory::Communication));
    be.copy(t, sent.back());
    sends.push_back(m_pipe.send(sent.back(), peer, stream));
  };
  auto receive = [&](int peer, int stream, double& wait) {
    Tensor t = be.empty({B * T, D}, dt, MemCategory::Communication);
    const auto t0 = Clock::now();
    m_pipe.recv(t, peer, stream)->wait();
    wait = seconds(t0, Clock::now());
    return t;
  };
  m_events.clear();
  int in_flight = 0;
  m_peak = 0;
  bool first_loss = true;
  const auto t_step = Clock::now();
  for (const dist::PipeAction& a : m_table.actions[static_cast<size_t>(s)]) {
    PipeEvent ev{a, seconds(t_step, Clock::now()), 0, 0};
    const size_t i = static_cast<size_t>(a.micro_batch);
    const int k = m_table.virtual_stage(a);
    CharGpt& chunk = *m_chunks[static_cast<size_t>(a.chunk)];
    chunk.select_slot(i);
    if (a.op == dist::PipeOp::Forward) {
      Tensor in = k == 0 ? xs[i] : receive(m_table.receives_from(a), stream_into(k, false), ev.wait_s);
      Tensor out = chunk.stage_forward(be, in, B, T, true);
      m_peak = std::max(m_peak, ++in_flight);
      if (k + 1 < V) {
        post_send(out, m_table.sends_to(a), stream_into(k + 1, false));
      } else {
        grads[i] = be.empty(out.shape(), out.dtype(), MemCategory::Activations);
        chunk.cross_entropy(be, out, ys[i], &grads[i], mult, stats, !first_loss);
        first_loss = false;
      }
    } else {
      Tensor g = k + 1 < V ? receive(m_table.receives_from(a), stream_into(k, true), ev.wait_s) : grads[i];
      // Each chunk adds its micro-batches' weight gradients in ascending order, the first writes.
      Tensor dx = chunk.stage_backward(be, g, i > 0);
      if (k > 0) post_send(dx, m_table.sends_to(a), stream_into(k - 1, true));
      if (k + 1 == V) grads[i] = Tensor();
      chunk.release_slot(i);
      --in_flight;
    }
    ev.end_s = seconds(t_step, Clock::now());
    m_events.push_back(ev);
  }
  for (auto& h : sends) h->wait();
  m_step_s = seconds(t_step, Clock::now());
}

Tensor PipelineExecutor::forward_only(Backend& be, const Tensor& x) {
  const int s = m_pipe.rank(), p = m_pipe.size(), V = m_table.virtual_stages();
  const int64_t B = x.dim(0), T = x.dim(1), D = m_chunks[0]->config().dim;
  const DType dt = parameter_storage_dtype(m_chunks[0]->compute_dtype());
  Tensor out;
  for (size_t c = 0; c < m_chunks.size(); ++c) {
    const int k = static_cast<int>(c) * p + s;
    Tensor in = x;
    if (k > 0) {
      in = be.empty({B * T, D}, dt, MemCategory::Communication);
      m_pipe.recv(in, (k - 1) % p, stream_into(k, false))->wait();
    }
    m_chunks[c]->select_slot(0);
    out = m_chunks[c]->stage_forward(be, in, B, T, false);
    if (k + 1 < V) {
      m_pipe.send(out, (k + 1) % p, stream_into(k + 1, false))->wait();
      out = Tensor();
    }
  }
  return out;
}

PipelineStepTimes PipelineExecutor::times() const {
  PipelineStepTimes t;
  t.step_s = m_step_s;
  for (const PipeEvent& e : m_events) {
    const double compute = e.end_s - e.start_s - e.wait_s;
    (e.action.op == dist::PipeOp::Forward ? t.forward_s : t.backward_s) += compute;
    t.wait_s += e.wait_s;
  }
  return t;
}

}  // namespace trainlab
