#include "train/training_step.h"

#include "train/pipeline_executor.h"
#include "util/error.h"

namespace trainlab {

TrainingStep::TrainingStep(Backend& be, Model& model, Optimizer& opt, Tensor data_x, Tensor data_y, int64_t batch,
                           int accumulate)
    : m_be(be), m_model(model), m_opt(opt), m_data_x(std::move(data_x)), m_data_y(std::move(data_y)), m_batch(batch),
      m_k(accumulate) {
  m_params = m_model.parameters();
  m_opt.attach(m_be, m_params);
  m_stats = m_be.empty({2}, DType::F32, MemCategory::Workspace);
  m_be.fill(m_stats, 0.0f);
  ensure_buffers();
}

TrainingStep::TrainingStep(Backend& be, Model& model, Optimizer& opt, Tensor tokens, int64_t batch, int64_t ctx,
                           int accumulate)
    : m_be(be), m_model(model), m_opt(opt), m_data_x(std::move(tokens)), m_batch(batch), m_k(accumulate), m_ctx(ctx) {
  if (ctx <= 0 || m_data_x.dtype() != DType::I32 || m_data_x.numel() <= ctx)
    throw Error("internal: token windows need int32 tokens longer than the context");
  m_params = m_model.parameters();
  m_opt.attach(m_be, m_params);
  m_stats = m_be.empty({2}, DType::F32, MemCategory::Workspace);
  m_be.fill(m_stats, 0.0f);
  ensure_buffers();
}

void TrainingStep::ensure_buffers() {
  if (m_ctx > 0) {
    const int64_t n = m_batch * m_ctx;
    if (!m_idx.defined() || m_idx.numel() != n * m_k) {
      m_idx = Tensor();
      m_idx = m_be.empty({n * m_k}, DType::I32, MemCategory::Workspace);
      m_be.fill(m_idx, 0.0f);
    }
    if (!m_eval_idx.defined()) m_eval_idx = m_be.empty({n}, DType::I32, MemCategory::Workspace);
    if (!m_tok_x.defined()) m_tok_x = m_be.empty({n, 1}, DType::I32, MemCategory::Activations);
    if (!m_y.defined()) m_y = m_be.empty({n, 1}, DType::I32, MemCategory::Activations);
    return;
  }
  const int64_t features = m_data_x.dim(1);
  if (!m_idx.defined() || m_idx.numel() != m_batch * m_k) {
    m_idx = Tensor();
    m_idx = m_be.empty({m_batch * m_k}, DType::I32, MemCategory::Workspace);
    m_be.fill(m_idx, 0.0f);
  }
  if (!m_eval_idx.defined()) m_eval_idx = m_be.empty({m_batch}, DType::I32, MemCategory::Workspace);
  if (!m_x32.defined()) m_x32 = m_be.empty({m_batch, features}, DType::F32, MemCategory::Activations);
  const DType dt = m_model.compute_dtype() == DType::F32 ? DType::F32 : m_model.parameters().front()->value.dtype();
  if (dt == DType::F32) {
    m_x = m_x32;
  } else if (!m_x.defined() || m_x.dtype() != dt) {
    m_x = Tensor();
    m_x = m_be.empty({m_batch, features}, dt, MemCategory::Activations);
  }
  if (!m_y.defined()) m_y = m_be.empty({m_batch}, DType::I32, MemCategory::Activations);
}

void TrainingStep::on_format_changed() {
  m_dlogits = Tensor();
  ensure_buffers();
}

void TrainingStep::set_accumulate(int k) {
  if (k < 1) throw Error("train.accumulate must be >= 1");
  m_k = k;
  ensure_buffers();
}

void TrainingStep::set_indices(const std::vector<int32_t>& idx) {
  if (static_cast<int64_t>(idx.size()) != m_batch * m_k * tokens_per_sample())
    throw Error("internal: expected " + std::to_string(m_batch * m_k * tokens_per_sample()) + " batch indices, got " +
                std::to_string(idx.size()));
  m_be.upload(m_idx, idx.data(), DType::I32);
}

void TrainingStep::micro_batch(const Tensor& x_src, const Tensor& y_src, const Tensor& idx, bool first, bool train) {
  if (m_ctx > 0) {  // token windows: inputs at idx, labels at idx + 1 (the same tokens shifted by one)
    const int64_t n = m_data_x.numel();
    m_be.gather_rows(m_data_x.reshape({n, 1}), idx, m_tok_x);
    Tensor next = m_data_x.slice_rows(1, n).reshape({n - 1, 1});
    m_be.gather_rows(next, idx, m_y);
    Tensor logits = m_model.forward(m_be, m_tok_x.reshape({m_batch, m_ctx}), train);
    if (!m_dlogits.defined() || m_dlogits.shape() != logits.shape() || m_dlogits.dtype() != logits.dtype()) {
      m_dlogits = Tensor();
      m_dlogits = m_be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
    }
    const float mult = 1.0f / static_cast<float>(m_batch * m_ranks * m_ctx * m_k);
    m_model.cross_entropy(m_be, logits, m_y.reshape({m_batch * m_ctx}), &m_dlogits, mult, m_stats, !first);
    m_model.backward(m_be, m_dlogits, !first);
    return;
  }
  m_be.gather_rows(x_src, idx, m_x32);
  if (!m_x.same_storage(m_x32)) m_be.copy(m_x32, m_x);
  m_be.gather_rows(y_src, idx, m_y);
  Tensor logits = m_model.forward(m_be, m_x, train);
  if (train) {
    if (!m_dlogits.defined() || m_dlogits.shape() != logits.shape() || m_dlogits.dtype() != logits.dtype()) {
      m_dlogits = Tensor();
      m_dlogits = m_be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
    }
    const float mult = 1.0f / static_cast<float>(m_batch * m_ranks * m_k);
    m_model.cross_entropy(m_be, logits, m_y, &m_dlogits, mult, m_stats, !first);
    m_model.backward(m_be, m_dlogits, !first);
  }
}

void TrainingStep::set_pipeline(PipelineExecutor* exec) {
  if (exec && m_ctx <= 0) throw Error("internal: a pipeline runs token windows only");
  m_pipeline = exec;
  m_be.fill(m_stats, 0.0f);
}

void TrainingStep::forward_backward() {
  const int64_t per = m_batch * tokens_per_sample();
  if (m_pipeline) {  // every micro-batch's tokens and labels first: the schedule interleaves them
    const int64_t n = m_data_x.numel();
    Tensor next = m_data_x.slice_rows(1, n).reshape({n - 1, 1});
    m_pipe_x.resize(static_cast<size_t>(m_k));
    m_pipe_y.resize(static_cast<size_t>(m_k));
    for (int j = 0; j < m_k; ++j) {
      Tensor& x = m_pipe_x[static_cast<size_t>(j)];
      Tensor& y = m_pipe_y[static_cast<size_t>(j)];
      if (!x.defined()) x = m_be.empty({per, 1}, DType::I32, MemCategory::Activations);
      if (!y.defined()) y = m_be.empty({per, 1}, DType::I32, MemCategory::Activations);
      Tensor idx = m_idx.slice_rows(j * per, (j + 1) * per);
      m_be.gather_rows(m_data_x.reshape({n, 1}), idx, x);
      m_be.gather_rows(next, idx, y);
    }
    std::vector<Tensor> xs, ys;
    for (int j = 0; j < m_k; ++j) {
      xs.push_back(m_pipe_x[static_cast<size_t>(j)].reshape({m_batch, m_ctx}));
      ys.push_back(m_pipe_y[static_cast<size_t>(j)].reshape({per}));
    }
    const float mult = 1.0f / static_cast<float>(m_batch * m_ranks * m_ctx * m_k);
    m_pipeline->step(m_be, xs, ys, mult, m_stats);
    return;
  }
  for (int j = 0; j < m_k; ++j) {
    Tensor idx = m_idx.slice_rows(j * per, (j + 1) * per);
    micro_batch(m_data_x, m_data_y, idx, j == 0, true);
  }
}

void TrainingStep::full_step() {
  forward_backward();
  m_opt.step(m_be, m_params);
}

void TrainingStep::run_full_step(const std::string& key) {
  if (!m_opt.host_step()) {
    m_be.run_step(key, [&] { full_step(); });
    return;
  }
  m_be.run_step(key + "_forward_backward", [&] { forward_backward(); });
  m_opt.step(m_be, m_params);
}

void TrainingStep::eval_rows(const Tensor& x, const Tensor& y, int64_t begin, int64_t end, Tensor& acc, bool first) {
  const int64_t rows = end - begin;
  if (rows <= 0 || rows > m_batch) throw Error("internal: eval chunk of " + std::to_string(rows) + " rows");
  // Same batch shape as training (so the model's buffers are reused); rows past `end` repeat the
  // first row and are left out of the statistics.
  std::vector<int32_t> idx(static_cast<size_t>(m_batch), static_cast<int32_t>(begin));
  for (int64_t i = 0; i < rows; ++i) idx[static_cast<size_t>(i)] = static_cast<int32_t>(begin + i);
  m_be.upload(m_eval_idx, idx.data(), DType::I32);
  m_be.gather_rows(x, m_eval_idx, m_x32);
  if (!m_x.same_storage(m_x32)) m_be.copy(m_x32, m_x);
  m_be.gather_rows(y, m_eval_idx, m_y);
  Tensor logits = m_model.forward(m_be, m_x, false);
  m_model.cross_entropy(m_be, logits.slice_rows(0, rows), m_y.slice_rows(0, rows), nullptr, 1.0f, acc, !first);
}

void TrainingStep::eval_windows(const Tensor& tokens, const std::vector<int64_t>& starts, Tensor& acc, bool first) {
  const int64_t rows = static_cast<int64_t>(starts.size());
  if (m_ctx <= 0 || rows <= 0 || rows > m_batch) throw Error("internal: eval of " + std::to_string(rows) + " windows");
  // The training batch shape (the model's buffers are reused); windows past `rows` repeat the
  // first one and are left out of the statistics.
  std::vector<int32_t> idx(static_cast<size_t>(m_batch * m_ctx));
  for (int64_t b = 0; b < m_batch; ++b)
    for (int64_t t = 0; t < m_ctx; ++t)
      idx[static_cast<size_t>(b * m_ctx + t)] = static_cast<int32_t>(starts[static_cast<size_t>(b < rows ? b : 0)] + t);
  m_be.upload(m_eval_idx, idx.data(), DType::I32);
  const int64_t n = tokens.numel();
  m_be.gather_rows(tokens.reshape({n, 1}), m_eval_idx, m_tok_x);
  Tensor next = tokens.slice_rows(1, n).reshape({n - 1, 1});
  m_be.gather_rows(next, m_eval_idx, m_y);
  Tensor logits = m_pipeline ? m_pipeline->forward_only(m_be, m_tok_x.reshape({m_batch, m_ctx}))
                             : m_model.forward(m_be, m_tok_x.reshape({m_batch, m_ctx}), false);
  if (!logits.defined()) return;  // a pipeline stage before the last: the sums are the last's
  m_model.cross_entropy(m_be, logits.slice_rows(0, rows * m_ctx), m_y.reshape({m_batch * m_ctx}).slice_rows(0, rows * m_ctx), nullptr,
                    1.0f, acc, !first);
}

}  // namespace trainlab
