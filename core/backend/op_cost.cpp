#include "backend/op_cost.h"

namespace trainlab {

namespace {
double bytes_of(DType t, int64_t n) { return static_cast<double>(dtype_bytes(t, static_cast<size_t>(n))); }
}  // namespace

OpCost matmul_cost(int64_t m, int64_t n, int64_t k, DType a, DType b, DType c, bool reads_c) {
  OpCost r;
  r.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  r.bytes = bytes_of(a, m * k) + bytes_of(b, k * n) + bytes_of(c, m * n) * (reads_c ? 2.0 : 1.0);
  return r;
}

OpCost stream_cost(std::initializer_list<const Tensor*> read, std::initializer_list<const Tensor*> written,
                   double flops_per_element) {
  OpCost r;
  const Tensor* first = nullptr;
  for (const Tensor* t : written)
    if (t) {
      r.bytes += static_cast<double>(t->bytes());
      if (!first) first = t;
    }
  for (const Tensor* t : read)
    if (t) {
      r.bytes += static_cast<double>(t->bytes());
      if (!first) first = t;
    }
  if (first) r.flops = flops_per_element * static_cast<double>(first->numel());
  return r;
}

OpCost gemm_cost(const Tensor& a, bool trans_a, const Tensor& b, const Tensor& c, float beta) {
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  return matmul_cost(c.dim(0), c.dim(1), k, a.dtype(), b.dtype(), c.dtype(), beta != 0.0f);
}

OpCost linear_forward_cost(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                           const Tensor* residual) {
  OpCost r = matmul_cost(x.dim(0), w.dim(0), x.dim(1), x.dtype(), w.dtype(), y.dtype());
  r += stream_cost({bias, residual}, {});
  return r;
}

OpCost linear_backward_cost(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dw, const Tensor* dbias,
                            const Tensor* dx, bool accumulate) {
  const int64_t m = x.dim(0), n = w.dim(0), k = x.dim(1);
  // dw[n, k] = dy^T[n, m] x[m, k]: reads dy and x, writes dw.
  OpCost r = matmul_cost(n, k, m, dy.dtype(), x.dtype(), dw.dtype(), accumulate);
  // dx[m, k] = dy[m, n] w[n, k]: dy is read again (it does not stay in cache at these sizes).
  if (dx) r += matmul_cost(m, k, n, dy.dtype(), w.dtype(), dx->dtype());
  if (dbias) r += stream_cost({}, {dbias});
  return r;
}

OpCost attention_cost(const Tensor& qkv, int64_t B, int64_t T, int64_t H, bool backward) {
  const double C = static_cast<double>(qkv.dim(-1)) / 3.0;
  const double forward = 2.0 * static_cast<double>(B) * static_cast<double>(T) * static_cast<double>(T) * C;
  const double y = static_cast<double>(qkv.bytes()) / 3.0;  // y has the shape and format of q
  const double lse = 4.0 * static_cast<double>(B * H * T);
  OpCost r;
  r.flops = backward ? 2.5 * forward : forward;
  r.bytes = static_cast<double>(qkv.bytes()) + y + lse;
  if (backward) r.bytes += y + static_cast<double>(qkv.bytes());  // dy read, dqkv written
  return r;
}

OpCost optimizer_cost(std::span<const ParamSlot> params, int state_tensors, double flops_per_element) {
  OpCost r;
  for (const ParamSlot& p : params) {
    if (!p.master) continue;
    const double n = static_cast<double>(p.master->numel());
    r.bytes += n * 4.0 * (2.0 + 2.0 * state_tensors);  // master read + written, moments read + written
    if (p.grad) r.bytes += static_cast<double>(p.grad->bytes());
    if (p.value && p.value->raw() != p.master->raw()) r.bytes += static_cast<double>(p.value->bytes());
    if (p.mask) r.bytes += static_cast<double>(p.mask->bytes());
    r.flops += flops_per_element * n;
  }
  return r;
}

}  // namespace trainlab
