#include "backend/cpu_backend.h"
#include "backend/host_timing.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "backend/backend_checks.h"

#include "backend/cpu_numeric.h"
#include "backend/cpu_panels.h"
#include "util/error.h"

extern "C" {
// OpenBLAS extensions (declared in OpenBLAS's cblas.h; repeated here for other CBLAS headers).
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace trainlab {

using namespace cpu;  // conversions, panel_gemm, tf32_round (cpu_panels.h, cpu_numeric.h)

namespace {

void* aligned_bytes(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

// The floats a workspace slot holds now (panel_gemm may use them without growing it).
size_t held_floats(const Tensor& slot) { return slot.defined() ? static_cast<size_t>(slot.numel()) : 0; }

inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
inline float gelu_grad(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
  return cdf + x * pdf;
}

TL_VECTOR_CLONES void bias_relu_rows(float* y, const float* b, int64_t m, int64_t n, bool relu) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = y + i * n;
    if (b)
      for (int64_t j = 0; j < n; ++j) row[j] += b[j];
    if (relu)
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
  }
}

TL_VECTOR_CLONES void relu_mask(float* g, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) g[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

TL_VECTOR_CLONES void column_sums(const float* g, int64_t m, int64_t n, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    const float* row = g + i * n;
    for (int64_t j = 0; j < n; ++j) out[j] += row[j];
  }
}

TL_VECTOR_CLONES void adamw_kernel(float* __restrict w, const float* __restrict g, float* __restrict m, float* __restrict v,
                                   const float* __restrict mask, size_t n, float unscale, float decay, float b1, float b2,
                                   float step_size, float inv_bc2_sqrt, float eps) {
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * unscale;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float wi = w[i] * decay;
    wi -= step_size * mi / (std::sqrt(vi) * inv_bc2_sqrt + eps);
    w[i] = mask ? wi * mask[i] : wi;
  }
}

}  // namespace

CpuBackend::CpuBackend(int threads) : m_threads(threads) {
  if (threads > 0) openblas_set_num_threads(threads);
  m_capture = false;
}

DeviceInfo CpuBackend::info() const {
  DeviceInfo d;
  d.kind = DeviceKind::Cpu;
  d.name = "CPU (" + std::to_string(openblas_get_num_threads()) + " OpenBLAS threads, " +
           std::to_string(std::thread::hardware_concurrency()) + " cores)";
  d.formats = {DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2};
  d.software = openblas_get_config();
  return d;
}

bool CpuBackend::supports(DType t) const { return true; }

bool CpuBackend::supports(Op op, DType t) const {
  switch (op) {
    case Op::GatherRows: return true;           // a copy of rows in any format
    case Op::GemmI8: return t == DType::I8;     // int8 operands, int32 result
    case Op::Decode: return false;              // CharGptGenerator decodes on the CPU (make_decoder)
    default: return dtype_is_float(t);          // fp32, 16-bit and fp8 tensors, converted to fp32
  }
}

Tensor CpuBackend::empty(const Shape& shape, DType dtype, MemCategory category) {
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  void* p = aligned_bytes(bytes);
  auto storage = std::make_shared<Storage>(p, bytes, category, DeviceKind::Cpu, &m_ledger,
                                           [](void* q, size_t) { std::free(q); });
  return Tensor(std::move(storage), shape, dtype);
}

int CpuBackend::worker_threads() const { return std::max(1, m_threads > 0 ? m_threads : openblas_get_num_threads()); }

float* CpuBackend::slot_buffer(int slot, size_t n) {
  Tensor& w = m_workspace[slot];
  if (!w.defined() || static_cast<size_t>(w.numel()) < n) {
    w = Tensor();  // release first so the ledger's peak does not count both
    w = empty({static_cast<int64_t>(n)}, DType::F32, MemCategory::Workspace);
  }
  return w.data<float>();
}

const float* CpuBackend::read_f32(const Tensor& t, int slot, bool tf32_round_inputs) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype() == DType::F32 && !tf32_round_inputs) return t.data<float>();
  float* buf = slot_buffer(slot, n);
  to_f32(t.dtype(), t.raw(), buf, n);
  if (tf32_round_inputs)
    for (size_t i = 0; i < n; ++i) buf[i] = tf32_round(buf[i]);
  return buf;
}

float* CpuBackend::write_f32(Tensor& t, int slot, bool load) {
  if (t.dtype() == DType::F32) return t.data<float>();
  float* buf = slot_buffer(slot, static_cast<size_t>(t.numel()));
  if (load) to_f32(t.dtype(), t.raw(), buf, static_cast<size_t>(t.numel()));
  return buf;
}

void CpuBackend::finish_write(Tensor& t, const float* computed) {
  if (t.dtype() != DType::F32) from_f32(computed, t.dtype(), t.raw(), static_cast<size_t>(t.numel()));
}

void CpuBackend::upload(Tensor& dst, const void* src, DType src_type) {
  const size_t n = static_cast<size_t>(dst.numel());
  if (src_type == dst.dtype()) {
    std::memcpy(dst.raw(), src, dst.bytes());
    return;
  }
  float* buf = slot_buffer(0, std::min<size_t>(n, kPanel));
  for (size_t off = 0; off < n; off += kPanel) {
    const size_t len = std::min<size_t>(kPanel, n - off);
    to_f32(src_type, static_cast<const char*>(src) + dtype_bytes(src_type, off), buf, len);
    from_f32(buf, dst.dtype(), elem_ptr(dst, static_cast<int64_t>(off)), len);
  }
}

void CpuBackend::download(const Tensor& src, void* dst, DType dst_type) {
  const size_t n = static_cast<size_t>(src.numel());
  if (dst_type == src.dtype()) {
    std::memcpy(dst, src.raw(), src.bytes());
    return;
  }
  if (dst_type == DType::F32) {
    to_f32(src.dtype(), src.raw(), static_cast<float*>(dst), n);
    return;
  }
  float* buf = slot_buffer(0, std::min<size_t>(n, kPanel));
  for (size_t off = 0; off < n; off += kPanel) {
    const size_t len = std::min<size_t>(kPanel, n - off);
    to_f32(src.dtype(), elem_ptr(src, static_cast<int64_t>(off)), buf, len);
    from_f32(buf, dst_type, static_cast<char*>(dst) + dtype_bytes(dst_type, off), len);
  }
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  TL_HOST_TIMED("copy", stream_cost({&src}, {&dst}));
  if (src.numel() != dst.numel())
    throw Error("copy between tensors of different sizes: " + shape_str(src.shape()) + " -> " + shape_str(dst.shape()));
  if (src.dtype() == dst.dtype()) {
    std::memmove(dst.raw(), src.raw(), src.bytes());
    return;
  }
  const size_t n = static_cast<size_t>(src.numel());
  if (src.dtype() == DType::F32) {
    from_f32(src.data<float>(), dst.dtype(), dst.raw(), n);
    return;
  }
  if (dst.dtype() == DType::F32) {
    to_f32(src.dtype(), src.raw(), dst.data<float>(), n);
    return;
  }
  float* buf = slot_buffer(0, std::min<size_t>(n, kPanel));
  for (size_t off = 0; off < n; off += kPanel) {
    const size_t len = std::min<size_t>(kPanel, n - off);
    to_f32(src.dtype(), elem_ptr(src, static_cast<int64_t>(off)), buf, len);
    from_f32(buf, dst.dtype(), elem_ptr(dst, static_cast<int64_t>(off)), len);
  }
}

void CpuBackend::fill(Tensor& t, float value) {
  TL_HOST_TIMED("fill", stream_cost({}, {&t}));
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype() == DType::F32) {
    std::fill_n(t.data<float>(), n, value);
    return;
  }
  if (t.dtype() == DType::I32) {
    std::fill_n(t.data<int32_t>(), n, static_cast<int32_t>(value));
    return;
  }
  const size_t len0 = std::min<size_t>(n, kPanel);
  float* buf = slot_buffer(0, len0);
  std::fill_n(buf, len0, value);
  for (size_t off = 0; off < n; off += kPanel)
    from_f32(buf, t.dtype(), elem_ptr(t, static_cast<int64_t>(off)), std::min<size_t>(kPanel, n - off));
}

// Tf32 rounds the operands as they are loaded into the panels (a no-op on 16-bit operands). Fp8
// is the linear layers' (cpu_fp8.cpp); a plain gemm computes it as Native, as the CUDA backend does.
void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
                      float beta, MatmulMode mode) {
  TL_HOST_TIMED("gemm", gemm_cost(a, trans_a, b, c, beta));
  gemm_dims(a, trans_a, b, trans_b, c);  // the checks; panel_gemm derives the sizes itself
  const Scratch scratch = [this](int slot, size_t n) { return slot_buffer(slot, n); };
  panel_gemm(a, trans_a, b, trans_b, c, alpha, beta, mode == MatmulMode::Tf32, scratch, nullptr, nullptr, nullptr,
             worker_threads(), held_floats(m_workspace[1]));
}

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                                Tensor* pre, MatmulMode mode) {
  TL_HOST_TIMED("linear_forward", linear_forward_cost(x, w, bias, y));
  linear_forward_impl(x, w, bias, act, y, pre, nullptr, mode);
}

void CpuBackend::linear_forward_residual(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& residual,
                                         Tensor& y, MatmulMode mode) {
  TL_HOST_TIMED("linear_forward", linear_forward_cost(x, w, bias, y, &residual));
  if (residual.numel() != y.numel())
    throw Error("linear_forward_residual: residual " + shape_str(residual.shape()) + " does not match y " +
                shape_str(y.shape()));
  if (residual.raw() == y.raw()) {  // fp32 outputs are computed in place: keep the residual apart
    Tensor kept = empty(residual.shape(), residual.dtype(), MemCategory::Workspace);
    copy(residual, kept);
    linear_forward_impl(x, w, bias, Activation::None, y, nullptr, &kept, mode);
    return;
  }
  linear_forward_impl(x, w, bias, Activation::None, y, nullptr, &residual, mode);
}

void CpuBackend::linear_forward_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                                     Tensor* pre, const Tensor* residual, MatmulMode mode) {
  const auto [m, n, k] = linear_dims(x, w, y);
  const int64_t ldy = n;  // the epilogue's copy: clang before 16 cannot capture a structured binding
  if (pre && (pre->numel() != m * n))
    throw Error("linear pre-activation " + shape_str(pre->shape()) + " does not match y " + shape_str(y.shape()));
  // Fp8: the operands' casts (before the bias is read: both scan tensors).
  const Fp8Product f8 = mode == MatmulMode::Fp8 ? fp8_forward_product(x, w, bias, act, y, pre) : Fp8Product{};
  const float* pb = bias ? read_f32(*bias, 4) : nullptr;  // n values: a vector, not a matrix
  // The pre-activation is rounded to y's format, as a device that stores it would; the epilogue
  // runs on each fp32 block of the product before it is rounded into y. A residual is added in
  // fp32 after the bias (never y itself: linear_forward_residual copies an aliasing one first);
  // after fp8 products the sum is rounded to y's format first, as the CUDA backend adds the
  // residual to the product's stored output.
  const DType store = y.dtype();
  // n = n: clang 14 (the fuzz build) cannot capture a structured binding by reference.
  const BlockEpilogue epilogue = [&, n = n](float* blk, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
    const float* bj = pb ? pb + j0 : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = blk + r * ld;
      if (residual) {
        bias_relu_rows(row, bj, 1, cols, false);
        if (f8.active) round_n(store, row, static_cast<size_t>(cols));
        float part[256];
        for (int64_t c = 0; c < cols; c += 256) {
          const int64_t len = std::min<int64_t>(256, cols - c);
          to_f32(residual->dtype(), elem_ptr(*residual, (i0 + r) * ldy + j0 + c), part, static_cast<size_t>(len));
          for (int64_t j = 0; j < len; ++j) row[c + j] += part[j];
        }
        round_n(store, row, static_cast<size_t>(cols));
        continue;
      }
      if (act != Activation::GELU && store == DType::F32 && !pre) {
        bias_relu_rows(row, bj, 1, cols, act == Activation::ReLU);
        continue;
      }
      bias_relu_rows(row, bj, 1, cols, false);
      round_n(store, row, static_cast<size_t>(cols));
      if (pre) from_f32(row, pre->dtype(), elem_ptr(*pre, (i0 + r) * ldy + j0), static_cast<size_t>(cols));
      if (act == Activation::ReLU)
        bias_relu_rows(row, nullptr, 1, cols, true);
      else if (act == Activation::GELU)
        for (int64_t j = 0; j < cols; ++j) row[j] = gelu(row[j]);
    }
  };
  const Scratch scratch = [this](int slot, size_t len) { return slot_buffer(slot, len); };
  panel_gemm(x, false, w, true, y, f8.alpha, 0.0f, mode == MatmulMode::Tf32, scratch, &epilogue,
             f8.active ? &f8.a : nullptr, f8.active ? &f8.b : nullptr, worker_threads(), held_floats(m_workspace[1]));
  fp8_record(f8, x, w);
}

void CpuBackend::linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved,
                                 Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate, MatmulMode mode) {
  TL_HOST_TIMED("linear_backward", linear_backward_cost(x, w, dy, dw, dbias, dx, accumulate));
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (dy.dim(0) != m || dy.dim(1) != n || dw.dim(0) != n || dw.dim(1) != k)
    throw Error("linear backward shape mismatch: dy " + shape_str(dy.shape()) + ", dw " + shape_str(dw.shape()));
  const size_t mn = static_cast<size_t>(m * n);
  // d(pre) = dy * act'(saved), rounded to dy's format, written over dy (the interface lets the
  // backend use dy as scratch); the products below read it from there like any operand.
  if (act != Activation::None) {
    if (!saved) throw Error("linear backward with an activation needs the saved tensor");
    if (static_cast<size_t>(saved->numel()) != mn)
      throw Error("linear backward: saved tensor " + shape_str(saved->shape()) + " does not match dy " + shape_str(dy.shape()));
    const bool dy32 = dy.dtype() == DType::F32, s32 = saved->dtype() == DType::F32;
    float* gbuf = dy32 ? nullptr : slot_buffer(0, std::min<size_t>(mn, kPanel));
    float* sbuf = s32 ? nullptr : slot_buffer(1, std::min<size_t>(mn, kPanel));
    for (size_t off = 0; off < mn; off += kPanel) {
      const size_t len = std::min<size_t>(kPanel, mn - off);
      float* g = dy32 ? dy.data<float>() + off : gbuf;
      if (!dy32) to_f32(dy.dtype(), elem_ptr(dy, static_cast<int64_t>(off)), g, len);
      const float* s = s32 ? saved->data<float>() + off : sbuf;
      if (!s32) to_f32(saved->dtype(), elem_ptr(*saved, static_cast<int64_t>(off)), sbuf, len);
      if (act == Activation::ReLU) {
        relu_mask(g, s, len);
      } else {
        for (size_t i = 0; i < len; ++i) g[i] *= gelu_grad(s[i]);
      }
      if (!dy32) from_f32(g, dy.dtype(), elem_ptr(dy, static_cast<int64_t>(off)), len);
    }
  }
  const Scratch scratch = [this](int slot, size_t len) { return slot_buffer(slot, len); };
  const bool tf32 = mode == MatmulMode::Tf32;
  const auto [f8w, f8x] = mode == MatmulMode::Fp8 ? fp8_backward_products(x, w, dy, act, dw, dx)
                                                  : std::pair<Fp8Product, Fp8Product>{};
  // dw (=|+=) d(pre)^T x
  panel_gemm(dy, true, x, false, dw, f8w.alpha, accumulate ? 1.0f : 0.0f, tf32, scratch, nullptr,
             f8w.active ? &f8w.a : nullptr, f8w.active ? &f8w.b : nullptr, worker_threads(), held_floats(m_workspace[1]));
  if (dbias) bias_grad_sums(dy, *dbias, accumulate);
  // dx = d(pre) w
  if (dx)
    panel_gemm(dy, false, w, false, *dx, f8x.alpha, 0.0f, tf32, scratch, nullptr, f8x.active ? &f8x.a : nullptr,
               f8x.active ? &f8x.b : nullptr, worker_threads(), held_floats(m_workspace[1]));
  fp8_record(f8w, dy, x);
}

void CpuBackend::bias_grad_sums(const Tensor& g, Tensor& dbias, bool accumulate) {
  const int64_t n = dbias.numel(), m = n > 0 ? g.numel() / n : 0;
  if (n <= 0 || m * n != g.numel())
    throw Error("bias gradient: " + shape_str(g.shape()) + " is not rows of " + std::to_string(n) + " columns");
  float* pdb = write_f32(dbias, 5, accumulate);  // n values
  if (!accumulate) std::fill_n(pdb, n, 0.0f);
  if (g.dtype() == DType::F32) {
    column_sums(g.data<float>(), m, n, pdb);
  } else {  // row blocks (column blocks for rows wider than a panel), rows in order
    const Tensor g2 = g.reshape({m, n});
    const int64_t cb = std::min<int64_t>(n, kPanel), rb = std::max<int64_t>(1, kPanel / cb);
    float* buf = slot_buffer(0, static_cast<size_t>(std::min<int64_t>(m, rb) * cb));
    for (int64_t c0 = 0; c0 < n; c0 += cb) {
      const int64_t cn = std::min(cb, n - c0);
      for (int64_t r0 = 0; r0 < m; r0 += rb) {
        const int64_t rn = std::min(rb, m - r0);
        load_block(g2, r0, rn, c0, cn, buf, false);
        column_sums(buf, rn, cn, pdb + c0);
      }
    }
  }
  finish_write(dbias, pdb);
}

void CpuBackend::activation_forward(Activation act, const Tensor& x, Tensor& y) {
  TL_HOST_TIMED("activation_forward", stream_cost({&x}, {&y}, act == Activation::GELU ? op_flops::kGelu : op_flops::kRelu));
  const size_t n = static_cast<size_t>(x.numel());
  const bool x32 = x.dtype() == DType::F32, y32 = y.dtype() == DType::F32;
  float* xb = x32 ? nullptr : slot_buffer(1, std::min<size_t>(n, kPanel));
  float* yb = y32 ? nullptr : slot_buffer(2, std::min<size_t>(n, kPanel));
  for (size_t off = 0; off < n; off += kPanel) {
    const size_t len = std::min<size_t>(kPanel, n - off);
    const float* px = x32 ? x.data<float>() + off : xb;
    if (!x32) to_f32(x.dtype(), elem_ptr(x, static_cast<int64_t>(off)), xb, len);
    float* py = y32 ? y.data<float>() + off : yb;
    for (size_t i = 0; i < len; ++i) {
      const float v = px[i];
      py[i] = act == Activation::ReLU ? (v > 0.0f ? v : 0.0f) : act == Activation::GELU ? gelu(v) : v;
    }
    if (!y32) from_f32(yb, y.dtype(), elem_ptr(y, static_cast<int64_t>(off)), len);
  }
}

void CpuBackend::activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                     Tensor& dx) {
  TL_HOST_TIMED("activation_backward", stream_cost({&x, &dy}, {&dx}, act == Activation::GELU ? op_flops::kGeluBackward : op_flops::kRelu));
  const size_t n = static_cast<size_t>(x.numel());
  const bool x32 = x.dtype() == DType::F32, d32 = dy.dtype() == DType::F32, o32 = dx.dtype() == DType::F32;
  float* xb = x32 ? nullptr : slot_buffer(1, std::min<size_t>(n, kPanel));
  float* db = d32 ? nullptr : slot_buffer(2, std::min<size_t>(n, kPanel));
  float* ob = o32 ? nullptr : slot_buffer(3, std::min<size_t>(n, kPanel));
  for (size_t off = 0; off < n; off += kPanel) {
    const size_t len = std::min<size_t>(kPanel, n - off);
    const float* px = x32 ? x.data<float>() + off : xb;
    if (!x32) to_f32(x.dtype(), elem_ptr(x, static_cast<int64_t>(off)), xb, len);
    const float* pd = d32 ? dy.data<float>() + off : db;
    if (!d32) to_f32(dy.dtype(), elem_ptr(dy, static_cast<int64_t>(off)), db, len);
    float* pdx = o32 ? dx.data<float>() + off : ob;
    for (size_t i = 0; i < len; ++i) {
      const float v = px[i];
      const float d = act == Activation::ReLU ? (v > 0.0f ? 1.0f : 0.0f) : act == Activation::GELU ? gelu_grad(v) : 1.0f;
      pdx[i] = pd[i] * d;
    }
    if (!o32) from_f32(ob, dx.dtype(), elem_ptr(dx, static_cast<int64_t>(off)), len);
  }
}

void CpuBackend::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                              Tensor& stats, bool accumulate_stats) {
  TL_HOST_TIMED("softmax_xent", stream_cost({&logits, &labels}, {dlogits}, op_flops::kSoftmaxXent));
  check_matrix(logits, "logits");
  const int64_t b = logits.dim(0), c = logits.dim(1);
  if (labels.dtype() != DType::I32 || labels.numel() != b)
    throw Error("softmax_xent: labels must be int32 of length " + std::to_string(b));
  const int32_t* y = labels.data<int32_t>();
  const float scale = grad_multiplier * m_scalars.loss_scale;
  // Blocks of rows (one row at least) converted to fp32 and back; the loss sums rows in order.
  const bool z32 = logits.dtype() == DType::F32, d32 = !dlogits || dlogits->dtype() == DType::F32;
  const int64_t rb = std::max<int64_t>(1, kPanel / std::max<int64_t>(c, 1));
  const size_t block = static_cast<size_t>(std::min(rb, b) * c);
  float* zbuf = z32 ? nullptr : slot_buffer(1, block);
  float* dbuf = d32 ? nullptr : slot_buffer(2, block);
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t r0 = 0; r0 < b; r0 += rb) {
    const int64_t rn = std::min(rb, b - r0);
    const float* z = z32 ? logits.data<float>() + r0 * c : zbuf;
    if (!z32) load_block(logits, r0, rn, 0, c, zbuf, false);
    float* dz = !dlogits ? nullptr : d32 ? dlogits->data<float>() + r0 * c : dbuf;
    for (int64_t i = 0; i < rn; ++i) {
      const float* row = z + i * c;
      const int32_t label = y[r0 + i];
      if (label < 0 || label >= c)
        throw Error("label " + std::to_string(label) + " at row " + std::to_string(r0 + i) + " is outside 0.." +
                    std::to_string(c - 1));
      float mx = row[0];
      int64_t arg = 0;
      for (int64_t j = 1; j < c; ++j)
        if (row[j] > mx) mx = row[j], arg = j;
      float sum = 0.0f;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - mx);
      const float lse = std::log(sum) + mx;
      loss += static_cast<double>(lse - row[label]);
      correct += (arg == label);
      if (dz) {
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < c; ++j) {
          const float p = std::exp(row[j] - mx) * inv;
          dz[i * c + j] = (p - (j == label ? 1.0f : 0.0f)) * scale;
        }
      }
    }
    if (dlogits && !d32) store_block(dbuf, c, *dlogits, r0, rn, 0, c);
  }
  float out[2] = {static_cast<float>(loss), static_cast<float>(correct)};
  if (stats.dtype() != DType::F32 || stats.numel() < 2) throw Error("softmax_xent: stats must be fp32 [2]");
  float* st = stats.data<float>();
  if (accumulate_stats) {
    st[0] += out[0];
    st[1] += out[1];
  } else {
    st[0] = out[0];
    st[1] = out[1];
  }
}

void CpuBackend::gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) {
  TL_HOST_TIMED("gather_rows", stream_cost({&idx, &dst}, {&dst}));
  const size_t row_bytes = gather_rows_row_bytes(src, idx, dst);
  const int64_t rows = idx.numel();
  const int32_t* ix = idx.data<int32_t>();
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < rows; ++i) {
    if (ix[i] < 0 || ix[i] >= src.shape()[0]) throw Error("gather_rows: index " + std::to_string(ix[i]) + " out of range");
    std::memcpy(d + i * row_bytes, s + static_cast<size_t>(ix[i]) * row_bytes, row_bytes);
  }
}

void CpuBackend::adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) {
  TL_HOST_TIMED("adamw", optimizer_cost(params, 2, op_flops::kAdamW));
  const float lr = m_scalars.lr, t = m_scalars.step, unscale = m_scalars.grad_unscale;
  const float bc1 = 1.0f - std::pow(h.beta1, t);
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(h.beta2, t));
  const float step_size = lr / bc1;
  for (auto& p : params) {
    const size_t n = static_cast<size_t>(p.master->numel());
    float* w = p.master->data<float>();
    float* m = p.m->data<float>();
    float* v = p.v->data<float>();
    const float* mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    const float decay = p.decay ? 1.0f - lr * h.weight_decay : 1.0f;
    const bool g32 = p.grad->dtype() == DType::F32;
    if (g32) {
      adamw_kernel(w, p.grad->data<float>(), m, v, mask, n, unscale, decay, h.beta1, h.beta2, step_size, 1.0f / bc2_sqrt,
                   h.eps);
    } else {  // a 16-bit gradient, converted a panel at a time
      float* g = slot_buffer(0, std::min<size_t>(n, kPanel));
      for (size_t off = 0; off < n; off += kPanel) {
        const size_t len = std::min<size_t>(kPanel, n - off);
        to_f32(p.grad->dtype(), elem_ptr(*p.grad, static_cast<int64_t>(off)), g, len);
        adamw_kernel(w + off, g, m + off, v + off, mask ? mask + off : nullptr, len, unscale, decay, h.beta1, h.beta2,
                     step_size, 1.0f / bc2_sqrt, h.eps);
      }
    }
    if (p.value && !p.value->same_storage(*p.master)) from_f32(w, p.value->dtype(), p.value->raw(), n);
  }
}

void CpuBackend::sgd_step(std::span<ParamSlot> params, const SgdHyper& h) {
  TL_HOST_TIMED("sgd", optimizer_cost(params, 1, op_flops::kSgd));
  const float lr = m_scalars.lr, unscale = m_scalars.grad_unscale;
  for (auto& p : params) {
    const size_t n = static_cast<size_t>(p.master->numel());
    float* w = p.master->data<float>();
    const bool g32 = p.grad->dtype() == DType::F32;
    float* gbuf = g32 ? nullptr : slot_buffer(0, std::min<size_t>(n, kPanel));
    float* buf = p.m ? p.m->data<float>() : nullptr;
    const float* mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    const float wd = p.decay ? h.weight_decay : 0.0f;
    for (size_t off = 0; off < n; off += kPanel) {  // a 16-bit gradient is converted a panel at a time
      const size_t len = std::min<size_t>(kPanel, n - off);
      const float* g = g32 ? p.grad->data<float>() + off : gbuf;
      if (!g32) to_f32(p.grad->dtype(), elem_ptr(*p.grad, static_cast<int64_t>(off)), gbuf, len);
      for (size_t j = 0; j < len; ++j) {
        const size_t i = off + j;
        float gi = g[j] * unscale + wd * w[i];
        if (buf && h.momentum != 0.0f) {
          buf[i] = h.momentum * buf[i] + gi;
          gi = h.nesterov ? gi + h.momentum * buf[i] : buf[i];
        }
        float wi = w[i] - lr * gi;
        if (mask) wi *= mask[i];
        w[i] = wi;
      }
    }
    if (p.value && !p.value->same_storage(*p.master)) from_f32(w, p.value->dtype(), p.value->raw(), n);
  }
}

bool CpuBackend::all_finite(std::span<const Tensor* const> tensors) {
  for (const Tensor* t : tensors) {
    const size_t n = static_cast<size_t>(t->numel());
    if (t->dtype() == DType::F32) {
      const float* p = t->data<float>();
      for (size_t i = 0; i < n; ++i)
        if (!std::isfinite(p[i])) return false;
      continue;
    }
    float* buf = slot_buffer(0, std::min<size_t>(n, kPanel));
    for (size_t off = 0; off < n; off += kPanel) {
      const size_t len = std::min<size_t>(kPanel, n - off);
      to_f32(t->dtype(), elem_ptr(*t, static_cast<int64_t>(off)), buf, len);
      for (size_t i = 0; i < len; ++i)
        if (!std::isfinite(buf[i])) return false;
    }
  }
  return true;
}

}  // namespace trainlab
