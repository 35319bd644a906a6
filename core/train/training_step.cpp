#include "train/training_step.h"

#include "util/error.h"

namespace trainlab {

TrainingStep::TrainingStep(Backend& be, Model& model, Optimizer& opt, Tensor data_x, Tensor data_y, int64_t batch,
                           int accumulate)
    : m_be(be), m_model(model), m_opt(opt), m_data_x(std::move(data_x)), m_data_y(std::move(data_y)), m_batch(batch),
      m_k(accumulate) {
  m_params = m_model.parameters();
  m_stats = m_be.empty({2}, DType::F32, MemCategory::Workspace);
  m_be.fill(m_stats, 0.0f);
  ensure_buffers();
}

void TrainingStep::ensure_buffers() {
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
  if (static_cast<int64_t>(idx.size()) != m_batch * m_k)
    throw Error("internal: expected " + std::to_string(m_batch * m_k) + " batch indices, got " + std::to_string(idx.size()));
  m_be.upload(m_idx, idx.data(), DType::I32);
}

void TrainingStep::micro_batch(const Tensor& x_src, const Tensor& y_src, const Tensor& idx, bool first, bool train) {
  m_be.gather_rows(x_src, idx, m_x32);
  if (!m_x.same_storage(m_x32)) m_be.copy(m_x32, m_x);
  m_be.gather_rows(y_src, idx, m_y);
  Tensor logits = m_model.forward(m_be, m_x, train);
  if (train) {
    if (!m_dlogits.defined() || m_dlogits.shape() != logits.shape() || m_dlogits.dtype() != logits.dtype()) {
      m_dlogits = Tensor();
      m_dlogits = m_be.empty(logits.shape(), logits.dtype(), MemCategory::Activations);
    }
    const float mult = 1.0f / static_cast<float>(m_batch * m_k);
    m_be.softmax_xent(logits, m_y, &m_dlogits, mult, m_stats, !first);
    m_model.backward(m_be, m_dlogits, !first);
  }
}

void TrainingStep::forward_backward() {
  for (int j = 0; j < m_k; ++j) {
    Tensor idx = m_idx.slice_rows(j * m_batch, (j + 1) * m_batch);
    micro_batch(m_data_x, m_data_y, idx, j == 0, true);
  }
}

void TrainingStep::full_step() {
  forward_backward();
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
  m_be.softmax_xent(logits.slice_rows(0, rows), m_y.slice_rows(0, rows), nullptr, 1.0f, acc, !first);
}

}  // namespace trainlab
