#include "backend/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/error.h"

extern "C" {
// OpenBLAS extensions (declared in OpenBLAS's cblas.h; repeated here for other CBLAS headers).
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace trainlab {

namespace {

void* aligned_bytes(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

inline float tf32_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) != 0x7F800000u) {  // finite: round the low 13 bits away, ties to even
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
  }
  std::memcpy(&f, &u, 4);
  return f;
}

inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
inline float gelu_grad(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * std::exp(-0.5f * x * x);
  return cdf + x * pdf;
}

// Hot elementwise loops, written so the compiler vectorises them; on x86-64 each also gets an
// AVX2/FMA clone chosen at load time (results are deterministic on a given machine).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TL_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TL_VECTOR_CLONES
#endif

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

void check_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2) throw Error(std::string(what) + " must be a matrix, got shape " + shape_str(t.shape()));
}

}  // namespace

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::ReLU: return "relu";
    case Activation::GELU: return "gelu";
  }
  return "?";
}

std::string DeviceInfo::id() const { return kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

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
  return d;
}

bool CpuBackend::supports(DType t) const { return true; }

Tensor CpuBackend::empty(const Shape& shape, DType dtype, MemCategory category) {
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(shape_numel(shape)));
  void* p = aligned_bytes(bytes);
  auto storage = std::make_shared<Storage>(p, bytes, category, DeviceKind::Cpu, &m_ledger,
                                           [](void* q, size_t) { std::free(q); });
  return Tensor(std::move(storage), shape, dtype);
}

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
  convert_to_f32(t.dtype(), t.raw(), buf, n);
  if (tf32_round_inputs)
    for (size_t i = 0; i < n; ++i) buf[i] = tf32_round(buf[i]);
  return buf;
}

float* CpuBackend::write_f32(Tensor& t, int slot, bool load) {
  if (t.dtype() == DType::F32) return t.data<float>();
  float* buf = slot_buffer(slot, static_cast<size_t>(t.numel()));
  if (load) convert_to_f32(t.dtype(), t.raw(), buf, static_cast<size_t>(t.numel()));
  return buf;
}

void CpuBackend::finish_write(Tensor& t, const float* computed) {
  if (t.dtype() != DType::F32) convert_from_f32(computed, t.dtype(), t.raw(), static_cast<size_t>(t.numel()));
}

void CpuBackend::upload(Tensor& dst, const void* src, DType src_type) {
  const size_t n = static_cast<size_t>(dst.numel());
  if (src_type == dst.dtype()) {
    std::memcpy(dst.raw(), src, dst.bytes());
    return;
  }
  float* buf = slot_buffer(0, n);
  convert_to_f32(src_type, src, buf, n);
  convert_from_f32(buf, dst.dtype(), dst.raw(), n);
}

void CpuBackend::download(const Tensor& src, void* dst, DType dst_type) {
  const size_t n = static_cast<size_t>(src.numel());
  if (dst_type == src.dtype()) {
    std::memcpy(dst, src.raw(), src.bytes());
    return;
  }
  if (dst_type == DType::F32) {
    convert_to_f32(src.dtype(), src.raw(), static_cast<float*>(dst), n);
    return;
  }
  float* buf = slot_buffer(0, n);
  convert_to_f32(src.dtype(), src.raw(), buf, n);
  convert_from_f32(buf, dst_type, dst, n);
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.numel() != dst.numel())
    throw Error("copy between tensors of different sizes: " + shape_str(src.shape()) + " -> " + shape_str(dst.shape()));
  if (src.dtype() == dst.dtype()) {
    std::memmove(dst.raw(), src.raw(), src.bytes());
    return;
  }
  const float* s = read_f32(src, 0);
  finish_write(dst, s);
  if (dst.dtype() == DType::F32) std::memcpy(dst.raw(), s, dst.bytes());
}

void CpuBackend::fill(Tensor& t, float value) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype() == DType::F32) {
    std::fill_n(t.data<float>(), n, value);
    return;
  }
  if (t.dtype() == DType::I32) {
    std::fill_n(t.data<int32_t>(), n, static_cast<int32_t>(value));
    return;
  }
  float* buf = slot_buffer(0, n);
  std::fill_n(buf, n, value);
  convert_from_f32(buf, t.dtype(), t.raw(), n);
}

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
                      float beta) {
  check_matrix(a, "gemm A");
  check_matrix(b, "gemm B");
  check_matrix(c, "gemm C");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n)
    throw Error("gemm shape mismatch: " + shape_str(a.shape()) + (trans_a ? "^T" : "") + " x " +
                shape_str(b.shape()) + (trans_b ? "^T" : "") + " -> " + shape_str(c.shape()));
  const float* pa = read_f32(a, 1, m_tf32);
  const float* pb = read_f32(b, 2, m_tf32);
  float* pc = write_f32(c, 3, beta != 0.0f);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, pa, static_cast<int>(a.dim(1)), pb,
              static_cast<int>(b.dim(1)), beta, pc, static_cast<int>(n));
  finish_write(c, pc);
}

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act, Tensor& y,
                                Tensor* pre) {
  check_matrix(x, "linear input");
  check_matrix(w, "linear weight");
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (w.dim(1) != k || y.dim(0) != m || y.dim(1) != n)
    throw Error("linear shape mismatch: x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", y " +
                shape_str(y.shape()));
  const float* px = read_f32(x, 1, m_tf32);
  const float* pw = read_f32(w, 2, m_tf32);
  float* py = write_f32(y, 3, false);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, px, static_cast<int>(k), pw, static_cast<int>(k), 0.0f, py, static_cast<int>(n));
  const float* pb = bias ? read_f32(*bias, 4) : nullptr;
  // The pre-activation is rounded to y's format, as a device that stores it would.
  const DType store = y.dtype();
  float* ppre = pre ? write_f32(*pre, 5, false) : nullptr;
  const size_t mn = static_cast<size_t>(m * n);
  if (act != Activation::GELU && store == DType::F32 && !ppre) {
    bias_relu_rows(py, pb, m, n, act == Activation::ReLU);
  } else {
    bias_relu_rows(py, pb, m, n, false);
    if (store != DType::F32)
      for (size_t i = 0; i < mn; ++i) py[i] = round_to(store, py[i]);
    if (ppre) std::memcpy(ppre, py, mn * sizeof(float));
    if (act == Activation::ReLU)
      bias_relu_rows(py, nullptr, m, n, true);
    else if (act == Activation::GELU)
      for (size_t i = 0; i < mn; ++i) py[i] = gelu(py[i]);
  }
  if (pre) finish_write(*pre, ppre);
  finish_write(y, py);
}

void CpuBackend::linear_backward(const Tensor& x, const Tensor& w, Tensor& dy, Activation act, const Tensor* saved,
                                 Tensor& dw, Tensor* dbias, Tensor* dx, bool accumulate) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (dy.dim(0) != m || dy.dim(1) != n || dw.dim(0) != n || dw.dim(1) != k)
    throw Error("linear backward shape mismatch: dy " + shape_str(dy.shape()) + ", dw " + shape_str(dw.shape()));
  // d(pre) in fp32, rounded to dy's format.
  float* g = write_f32(dy, 0, true);
  const size_t mn = static_cast<size_t>(m * n);
  if (act != Activation::None) {
    if (!saved) throw Error("linear backward with an activation needs the saved tensor");
    const float* s = read_f32(*saved, 4);
    if (act == Activation::ReLU) {
      relu_mask(g, s, mn);
    } else {
      for (size_t i = 0; i < mn; ++i) g[i] *= gelu_grad(s[i]);
    }
    if (dy.dtype() != DType::F32)
      for (size_t i = 0; i < mn; ++i) g[i] = round_to(dy.dtype(), g[i]);
  }
  const float* gi = g;
  const float* gr = gi;  // the products' copy of d(pre): tf32-rounded when tf32 is on
  std::vector<float> tf32_g;
  if (m_tf32) {
    tf32_g.assign(gi, gi + mn);
    for (auto& v : tf32_g) v = tf32_round(v);
    gr = tf32_g.data();
  }
  const float* px = read_f32(x, 1, m_tf32);
  float* pdw = write_f32(dw, 3, accumulate);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), static_cast<int>(m),
              1.0f, gr, static_cast<int>(n), px, static_cast<int>(k), accumulate ? 1.0f : 0.0f, pdw, static_cast<int>(k));
  finish_write(dw, pdw);
  if (dbias) {
    float* pdb = write_f32(*dbias, 5, accumulate);
    if (!accumulate) std::fill_n(pdb, n, 0.0f);
    column_sums(gi, m, n, pdb);
    finish_write(*dbias, pdb);
  }
  if (dx) {
    const float* pw = read_f32(w, 2, m_tf32);
    float* pdx = write_f32(*dx, 1, false);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(k),
                static_cast<int>(n), 1.0f, gr, static_cast<int>(n), pw, static_cast<int>(k), 0.0f, pdx,
                static_cast<int>(k));
    finish_write(*dx, pdx);
  }
}

void CpuBackend::activation_forward(Activation act, const Tensor& x, Tensor& y) {
  const size_t n = static_cast<size_t>(x.numel());
  const float* px = read_f32(x, 1);
  float* py = write_f32(y, 2, false);
  for (size_t i = 0; i < n; ++i) {
    const float v = px[i];
    py[i] = act == Activation::ReLU ? (v > 0.0f ? v : 0.0f) : act == Activation::GELU ? gelu(v) : v;
  }
  finish_write(y, py);
}

void CpuBackend::activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                     Tensor& dx) {
  const size_t n = static_cast<size_t>(x.numel());
  const float* px = read_f32(x, 1);
  const float* pd = read_f32(dy, 2);
  float* pdx = write_f32(dx, 3, false);
  for (size_t i = 0; i < n; ++i) {
    const float v = px[i];
    const float d = act == Activation::ReLU ? (v > 0.0f ? 1.0f : 0.0f) : act == Activation::GELU ? gelu_grad(v) : 1.0f;
    pdx[i] = pd[i] * d;
  }
  finish_write(dx, pdx);
}

void CpuBackend::softmax_xent(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_multiplier,
                              Tensor& stats, bool accumulate_stats) {
  check_matrix(logits, "logits");
  const int64_t b = logits.dim(0), c = logits.dim(1);
  if (labels.dtype() != DType::I32 || labels.numel() != b)
    throw Error("softmax_xent: labels must be int32 of length " + std::to_string(b));
  const float* z = read_f32(logits, 1);
  const int32_t* y = labels.data<int32_t>();
  float* dz = dlogits ? write_f32(*dlogits, 2, false) : nullptr;
  const float scale = grad_multiplier * m_scalars.loss_scale;
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < b; ++i) {
    const float* row = z + i * c;
    const int32_t label = y[i];
    if (label < 0 || label >= c)
      throw Error("label " + std::to_string(label) + " at row " + std::to_string(i) + " is outside 0.." +
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
  if (dz) finish_write(*dlogits, dz);
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
  if (idx.dtype() != DType::I32) throw Error("gather_rows: indices must be int32");
  if (src.dtype() != dst.dtype()) throw Error("gather_rows: source and destination formats differ");
  const int64_t rows = idx.numel();
  const size_t row_bytes = src.shape()[0] ? src.bytes() / static_cast<size_t>(src.shape()[0]) : 0;
  if (dst.shape()[0] != rows || dst.bytes() != row_bytes * static_cast<size_t>(rows))
    throw Error("gather_rows: destination " + shape_str(dst.shape()) + " does not fit " + std::to_string(rows) +
                " rows of " + shape_str(src.shape()));
  const int32_t* ix = idx.data<int32_t>();
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < rows; ++i) {
    if (ix[i] < 0 || ix[i] >= src.shape()[0]) throw Error("gather_rows: index " + std::to_string(ix[i]) + " out of range");
    std::memcpy(d + i * row_bytes, s + static_cast<size_t>(ix[i]) * row_bytes, row_bytes);
  }
}

void CpuBackend::adamw_step(std::span<ParamSlot> params, const AdamWHyper& h) {
  const float lr = m_scalars.lr, t = m_scalars.step, unscale = m_scalars.grad_unscale;
  const float bc1 = 1.0f - std::pow(h.beta1, t);
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(h.beta2, t));
  const float step_size = lr / bc1;
  for (auto& p : params) {
    const size_t n = static_cast<size_t>(p.master->numel());
    float* w = p.master->data<float>();
    const float* g = read_f32(*p.grad, 0);
    float* m = p.m->data<float>();
    float* v = p.v->data<float>();
    const float* mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    const float decay = p.decay ? 1.0f - lr * h.weight_decay : 1.0f;
    adamw_kernel(w, g, m, v, mask, n, unscale, decay, h.beta1, h.beta2, step_size, 1.0f / bc2_sqrt, h.eps);
    if (p.value && !p.value->same_storage(*p.master)) convert_from_f32(w, p.value->dtype(), p.value->raw(), n);
  }
}

void CpuBackend::sgd_step(std::span<ParamSlot> params, const SgdHyper& h) {
  const float lr = m_scalars.lr, unscale = m_scalars.grad_unscale;
  for (auto& p : params) {
    const size_t n = static_cast<size_t>(p.master->numel());
    float* w = p.master->data<float>();
    const float* g = read_f32(*p.grad, 0);
    float* buf = p.m ? p.m->data<float>() : nullptr;
    const float* mask = p.mask && p.mask->defined() ? p.mask->data<float>() : nullptr;
    const float wd = p.decay ? h.weight_decay : 0.0f;
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i] * unscale + wd * w[i];
      if (buf && h.momentum != 0.0f) {
        buf[i] = h.momentum * buf[i] + gi;
        gi = h.nesterov ? gi + h.momentum * buf[i] : buf[i];
      }
      float wi = w[i] - lr * gi;
      if (mask) wi *= mask[i];
      w[i] = wi;
    }
    if (p.value && !p.value->same_storage(*p.master)) convert_from_f32(w, p.value->dtype(), p.value->raw(), n);
  }
}

bool CpuBackend::all_finite(std::span<const Tensor* const> tensors) {
  for (const Tensor* t : tensors) {
    const size_t n = static_cast<size_t>(t->numel());
    const float* p = read_f32(*t, 0);
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return false;
  }
  return true;
}

}  // namespace trainlab
