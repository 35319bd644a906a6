#include "train/pipeline_executor.h"

#include <chrono>

#include "util/error.h"

namespace trainlab {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

PipelineExecutor::PipelineExecutor(CharGpt& stage, dist::Communicator& pipe, dist::PipelineTable table)
    : m_stage(stage), m_pipe(pipe), m_table(std::move(table)) {
  if (m_table.chunks != 1 || m_table.kind == dist::PipelineSchedule::ZbH1)
    throw Error(std::string("pipeline runtime: dist.schedule ") + dist::pipeline_schedule_name(m_table.kind) +
                " does not run yet (gpipe and 1f1b do)");
  if (m_table.stages != pipe.size())
    throw Error("pipeline runtime: a table of " + std::to_string(m_table.stages) + " stages for a pipeline group of " +
                std::to_string(pipe.size()) + " ranks");
}

void PipelineExecutor::step(Backend& be, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, float mult,
                            Tensor& stats) {
  const int s = m_pipe.rank(), p = m_pipe.size(), m = m_table.micro_batches;
  if (static_cast<int>(xs.size()) != m || static_cast<int>(ys.size()) != m)
    throw Error("pipeline runtime: " + std::to_string(xs.size()) + " micro-batches for a table of " + std::to_string(m));
  const int64_t B = xs[0].dim(0), T = xs[0].dim(1), D = m_stage.config().dim;
  const DType dt = parameter_storage_dtype(m_stage.compute_dtype());
  // Each send keeps its buffer until the step's end; a receive's buffer lives until its use.
  std::vector<Tensor> sent;
  std::vector<dist::CommHandle> sends;
  std::vector<Tensor> grads(static_cast<size_t>(m));  // the last stage's logits gradients
  auto post_send = [&](const Tensor& t, int peer) {
    sent.push_back(be.empty(t.shape(), t.dtype(), MemCategory::Communication));
    be.copy(t, sent.back());
    sends.push_back(m_pipe.send(sent.back(), peer));
  };
  auto receive = [&](int peer, double& wait) {
    Tensor t = be.empty({B * T, D}, dt, MemCategory::Communication);
    const auto t0 = Clock::now();
    m_pipe.recv(t, peer)->wait();
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
    m_stage.select_slot(i);
    if (a.op == dist::PipeOp::Forward) {
      Tensor in = s == 0 ? xs[i] : receive(s - 1, ev.wait_s);
      Tensor out = m_stage.stage_forward(be, in, B, T, true);
      m_peak = std::max(m_peak, ++in_flight);
      if (s + 1 < p) {
        post_send(out, s + 1);
      } else {
        grads[i] = be.empty(out.shape(), out.dtype(), MemCategory::Activations);
        m_stage.cross_entropy(be, out, ys[i], &grads[i], mult, stats, !first_loss);
        first_loss = false;
      }
    } else {
      Tensor g = s + 1 < p ? receive(s + 1, ev.wait_s) : grads[i];
      Tensor dx = m_stage.stage_backward(be, g, i > 0);
      if (s > 0) post_send(dx, s - 1);
      grads[i] = Tensor();
      m_stage.release_slot(i);
      --in_flight;
    }
    ev.end_s = seconds(t_step, Clock::now());
    m_events.push_back(ev);
  }
  for (auto& h : sends) h->wait();
}

}  // namespace trainlab
