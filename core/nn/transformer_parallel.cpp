// CharGpt's tensor-parallel pieces (nn/transformer.h, "Tensor parallelism"): the row-parallel
// product with its reduction, the gathers and scatters of sequence parallelism, the
// vocabulary-parallel embedding and loss, the LayerNorm gradients' reduction. With one rank each
// is the one-rank operation or nothing.
#include <algorithm>

#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

void CharGpt::branch_dropout(Backend& be, const Tensor& x, uint64_t seed, Tensor& y) {
  // Rows [r R, (r + 1) R) of the unsplit [N, d] tensor: their elements start at r R d.
  const uint64_t first = seq_split() ? static_cast<uint64_t>(m_tp.rank() * stream_rows() * m_cfg.dim) : 0;
  be.dropout(x, static_cast<float>(m_cfg.dropout), seed, y, first);
}

const Tensor& CharGpt::gathered_input(Backend& be, const Tensor& local) {
  if (!seq_split()) return local;
  Tensor& whole = buf(be, m_gather, {m_B * m_T, m_cfg.dim}, local.dtype());
  m_tp.group->all_gather_rows(local, whole);
  return whole;
}

Tensor& CharGpt::gathered_grad(Backend& be, Tensor& local) {
  if (!seq_split()) return local;
  Tensor& whole = buf(be, m_gather_grad, {m_B * m_T, m_cfg.dim}, local.dtype());
  m_tp.group->all_gather_rows(local, whole);
  return whole;
}

void CharGpt::row_parallel_forward(Backend& be, int64_t l, int site, const Tensor& x, const Parameter& w,
                                   const Parameter& b, const Tensor& residual, Tensor& y) {
  const int64_t N = m_B * m_T, R = stream_rows(), D = m_cfg.dim;
  const DType dt = parameter_storage_dtype(m_dtype);
  const MatmulMode mm = m_matmul_mode;
  if (!m_tp.active()) {
    // Without dropout the residual add is the projection's epilogue (one rounding, no add pass).
    // A frozen model's adapter term (ProductHook) joins the product after it.
    if (!m_drop) {
      be.linear_forward_residual(x, m_hook ? m_hook->weight(be, w) : w.value, &b.value, residual, y, mm);
      if (m_hook) m_hook->adapter_forward(be, w, x, y);
      return;
    }
    Tensor& tmp = buf(be, m_tmp, {N, D}, dt);
    product_forward(be, x, w, &b, tmp);
    be.dropout(tmp, static_cast<float>(m_cfg.dropout), drop_seed(l, site), tmp);
    be.add(residual, tmp, y);
    return;
  }
  // Each rank's product is a partial sum over its input columns; the bias (whole) rides on rank
  // 0's part, so the group's sum holds it once.
  const Tensor* bias = m_tp.rank() == 0 ? &b.value : nullptr;
  if (!m_tp.sequence_parallel && !m_drop) {
    if (bias)
      be.linear_forward_residual(x, w.value, bias, residual, y, mm);  // rank 0 adds the residual too
    else
      be.linear_forward(x, w.value, nullptr, Activation::None, y, nullptr, mm);
    m_tp.group->all_reduce(y);
    return;
  }
  Tensor& tmp = buf(be, m_tmp, {R, D}, dt);
  if (m_tp.sequence_parallel) {
    Tensor& part = buf(be, m_partial, {N, D}, dt);
    be.linear_forward(x, w.value, bias, Activation::None, part, nullptr, mm);
    m_tp.group->reduce_scatter_rows(part, tmp);
  } else {
    be.linear_forward(x, w.value, bias, Activation::None, tmp, nullptr, mm);
    m_tp.group->all_reduce(tmp);
  }
  if (m_drop) branch_dropout(be, tmp, drop_seed(l, site), tmp);
  be.add(residual, tmp, y);
}

Tensor& CharGpt::input_grad_buffer(Backend& be, Tensor& dh) {
  if (!seq_split()) return dh;
  return buf(be, m_partial, {m_B * m_T, m_cfg.dim}, dh.dtype());
}

void CharGpt::reduce_input_grad(Tensor& dh) {
  if (!m_tp.active()) return;
  if (m_tp.sequence_parallel)
    m_tp.group->reduce_scatter_rows(m_partial, dh);
  else
    m_tp.group->all_reduce(dh);
}

void CharGpt::parallel_embedding_forward(Backend& be, Tensor& out) {
  const int64_t N = m_B * m_T, D = m_cfg.dim, Vl = m_tok.shape[0];
  const DType dt = parameter_storage_dtype(m_dtype);
  // This rank's ids: its own tokens' rows, row Vl (zero) for the other ranks' tokens.
  std::vector<int32_t> ids(static_cast<size_t>(N));
  be.download(m_idx, ids.data(), DType::I32);
  for (int32_t& v : ids) v = v >= m_vocab_first && v < m_vocab_first + Vl ? static_cast<int32_t>(v - m_vocab_first) : static_cast<int32_t>(Vl);
  be.upload(buf(be, m_idx_local, {N}, DType::I32), ids.data(), DType::I32);
  Tensor& ext = buf(be, m_tok_ext, {Vl + 1, D}, dt);
  Tensor mine = ext.slice_rows(0, Vl), zero = ext.slice_rows(Vl, Vl + 1);
  be.copy(m_tok.value, mine);
  be.fill(zero, 0.0f);
  // The position table is added once, by rank 0's part (the group's sum holds it once); the other
  // ranks add zeros from the position gradient's buffer, which backward overwrites.
  const Tensor* pos = &m_pos.value;
  if (m_tp.rank() != 0) {
    Tensor& pz = buf(be, m_dpos, m_pos.shape, dt);
    be.fill(pz, 0.0f);
    pos = &pz;
  }
  if (m_tp.sequence_parallel) {
    Tensor& whole = buf(be, m_partial, {N, D}, dt);
    be.embedding_forward(ext, *pos, m_idx_local, m_T, whole);
    m_tp.group->reduce_scatter_rows(whole, out);
  } else {
    be.embedding_forward(ext, *pos, m_idx_local, m_T, out);
    m_tp.group->all_reduce(out);  // exact: one rank's row and zeros
  }
}

void CharGpt::parallel_embedding_backward(Backend& be, const Tensor& dx, bool acc) {
  const int64_t D = m_cfg.dim, Vl = m_tok.shape[0];
  const DType dt = parameter_storage_dtype(m_dtype);
  // dx holds every row on every rank: pos's gradient comes out whole and equal on each.
  Tensor& dext = buf(be, m_dtok_ext, {Vl + 1, D}, dt);
  Tensor& dpos = buf(be, m_dpos, m_pos.shape, dt);
  be.embedding_backward(dx, m_idx_local, m_T, dext, dpos, false);
  Tensor mine = dext.slice_rows(0, Vl);
  if (acc) {
    be.add(m_tok.grad, mine, m_tok.grad);
    be.add(m_pos.grad, dpos, m_pos.grad);
  } else {
    be.copy(mine, m_tok.grad);
    be.copy(dpos, m_pos.grad);
  }
}

Tensor& CharGpt::ln_grad_scratch(Backend& be, int64_t n) {
  return buf(be, m_ln_scratch, {n}, parameter_storage_dtype(m_dtype));
}

void CharGpt::reduce_ln_grads(Backend& be, std::initializer_list<Parameter*> params, bool acc) {
  const int64_t D = m_cfg.dim;
  Tensor used = m_ln_scratch.slice_rows(0, static_cast<int64_t>(params.size()) * D);
  m_tp.group->all_reduce(used);
  int64_t i = 0;
  for (Parameter* p : params) {
    Tensor part = m_ln_scratch.slice_rows(i * D, (i + 1) * D);
    if (acc)
      be.add(p->grad, part, p->grad);
    else
      be.copy(part, p->grad);
    ++i;
  }
}

void CharGpt::cross_entropy(Backend& be, const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                            float grad_multiplier, Tensor& stats, bool accumulate_stats) {
  if (!m_tp.active()) {
    Model::cross_entropy(be, logits, labels, dlogits, grad_multiplier, stats, accumulate_stats);
    return;
  }
  vocab_parallel_xent(be, *m_tp.group, logits, m_vocab_first, labels, dlogits, grad_multiplier, stats,
                      accumulate_stats);
}

}  // namespace trainlab
