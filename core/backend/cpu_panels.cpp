// The CPU backend's format conversions and panel-wise matrix product: see cpu_panels.h.
#include "backend/cpu_panels.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu_numeric.h"
#include "tensor/dtype.h"

namespace trainlab::cpu {

namespace {

// bf16 <-> fp32 in loops the compiler vectorises (the generic converters of tensor/dtype.cpp make
// one call per element); the same bits as dtype.cpp: widening is exact, narrowing rounds to
// nearest even and keeps NaNs quiet NaNs.
TL_VECTOR_CLONES void bf16_to_f32_n(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(s[i]) << 16;
    std::memcpy(d + i, &u, 4);
  }
}

TL_VECTOR_CLONES void f32_to_bf16_n(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, s + i, 4);
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    d[i] = static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

TL_VECTOR_CLONES void round_bf16_n(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const uint32_t rounded = ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) << 16;
    const uint32_t out = nan ? (u | 0x00400000u) & 0xFFFF0000u : rounded;
    std::memcpy(p + i, &out, 4);
  }
}

}  // namespace

void to_f32(DType t, const void* src, float* dst, size_t n) {
  if (t == DType::BF16)
    bf16_to_f32_n(static_cast<const uint16_t*>(src), dst, n);
  else
    convert_to_f32(t, src, dst, n);  // fp16 and fp8 vectorised there
}

void from_f32(const float* src, DType t, void* dst, size_t n) {
  if (t == DType::BF16)
    f32_to_bf16_n(src, static_cast<uint16_t*>(dst), n);
  else
    convert_from_f32(src, t, dst, n);
}

void round_n(DType t, float* p, size_t n) {
  if (t == DType::F32) return;
  if (t == DType::BF16) {
    round_bf16_n(p, n);
    return;
  }
  round_to_n(t, p, n);
}

const char* elem_ptr(const Tensor& t, int64_t elem) {
  return static_cast<const char*>(t.raw()) + dtype_bytes(t.dtype(), static_cast<size_t>(elem));
}
char* elem_ptr(Tensor& t, int64_t elem) { return static_cast<char*>(t.raw()) + dtype_bytes(t.dtype(), static_cast<size_t>(elem)); }

static void round_tf32(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = tf32_round(p[i]);
}

// dst[rows, cols] (dense) = fp32 of the block at (r0, c0) of the row-major matrix t.
void load_block(const Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float* dst, bool tf32,
                const Fp8Cast* cast) {
  const int64_t ld = t.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dst + r * cols;
    to_f32(t.dtype(), elem_ptr(t, (r0 + r) * ld + c0), row, static_cast<size_t>(cols));
    if (tf32) round_tf32(row, static_cast<size_t>(cols));
    if (cast) round_scaled_n(cast->format, cast->scale, row, row, static_cast<size_t>(cols));
  }
}

// The block at (r0, c0) of t = src[rows, cols] (row stride ld_src), rounded to t's format.
void store_block(const float* src, int64_t ld_src, Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  const int64_t ld = t.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    from_f32(src + r * ld_src, t.dtype(), elem_ptr(t, (r0 + r) * ld + c0), static_cast<size_t>(cols));
}

// C[m,n] = alpha op(A) op(B) + beta C through cblas_sgemm, converting in panels (slots 1, 2, 3 for
// A, B and C) whatever is not plain fp32; with everything fp32 it is one sgemm on the tensors.
void panel_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta, bool tf32,
                const Scratch& scratch, const BlockEpilogue* epilogue, const Fp8Cast* cast_a, const Fp8Cast* cast_b) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  const bool a_direct = a.dtype() == DType::F32 && !tf32 && !cast_a;
  const bool b_direct = b.dtype() == DType::F32 && !tf32 && !cast_b;
  const bool c_direct = c.dtype() == DType::F32;
  const auto op_a = ta ? CblasTrans : CblasNoTrans, op_b = tb ? CblasTrans : CblasNoTrans;
  if (a_direct && b_direct && c_direct) {
    cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a.data<float>(), static_cast<int>(lda), b.data<float>(), static_cast<int>(ldb), beta, c.data<float>(),
                static_cast<int>(n));
    if (epilogue) (*epilogue)(c.data<float>(), n, 0, m, 0, n);
    return;
  }
  // Blocks of at least kMinBlock rows and columns keep each sgemm call efficient: the inner
  // dimension is split into panels of kPanel / kMinBlock when it is longer (the result block then
  // accumulates the panels' products in fp32).
  constexpr int64_t kMinBlock = 64;
  const int64_t kc = std::clamp<int64_t>(k, 1, kPanel / kMinBlock);
  int64_t mb = a_direct ? m : std::clamp<int64_t>(kPanel / kc, 1, std::max<int64_t>(m, 1));
  int64_t nb = b_direct ? n : std::clamp<int64_t>(kPanel / kc, 1, std::max<int64_t>(n, 1));
  if (!c_direct)
    while (mb * nb > kPanel) (mb >= nb ? mb : nb) = ((mb >= nb ? mb : nb) + 1) / 2;
  mb = std::max<int64_t>(mb, 1);
  nb = std::max<int64_t>(nb, 1);
  float* abuf = a_direct ? nullptr : scratch(1, static_cast<size_t>(kPanel));
  float* bbuf = b_direct ? nullptr : scratch(2, static_cast<size_t>(kPanel));
  float* cbuf = c_direct ? nullptr : scratch(3, static_cast<size_t>(kPanel));
  for (int64_t j0 = 0; j0 < n; j0 += nb) {
    const int64_t jn = std::min(nb, n - j0);
    int64_t b_loaded = -1;  // the inner-dimension panel held in bbuf for this column block
    for (int64_t i0 = 0; i0 < m; i0 += mb) {
      const int64_t in = std::min(mb, m - i0);
      float* pc = c_direct ? c.data<float>() + i0 * n + j0 : cbuf;
      const int64_t ldc = c_direct ? n : jn;
      if (!c_direct && beta != 0.0f) load_block(c, i0, in, j0, jn, cbuf, false);
      int64_t p0 = 0;
      do {
        const int64_t pn = std::min(kc, k - p0);
        const float* pa;
        const float* pb;
        int64_t ld_a, ld_b;
        if (a_direct) {
          pa = a.data<float>() + (ta ? p0 * lda + i0 : i0 * lda + p0);
          ld_a = lda;
        } else if (!ta) {
          load_block(a, i0, in, p0, pn, abuf, tf32, cast_a);
          pa = abuf, ld_a = pn;
        } else {
          load_block(a, p0, pn, i0, in, abuf, tf32, cast_a);
          pa = abuf, ld_a = in;
        }
        if (b_direct) {
          pb = b.data<float>() + (tb ? j0 * ldb + p0 : p0 * ldb + j0);
          ld_b = ldb;
        } else {
          if (b_loaded != p0) {
            if (!tb)
              load_block(b, p0, pn, j0, jn, bbuf, tf32, cast_b);
            else
              load_block(b, j0, jn, p0, pn, bbuf, tf32, cast_b);
            b_loaded = p0;
          }
          pb = bbuf, ld_b = tb ? pn : jn;
        }
        cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(in), static_cast<int>(jn), static_cast<int>(pn), alpha,
                    pa, static_cast<int>(std::max<int64_t>(ld_a, 1)), pb, static_cast<int>(std::max<int64_t>(ld_b, 1)),
                    p0 == 0 ? beta : 1.0f, pc, static_cast<int>(ldc));
        p0 += kc;
      } while (p0 < k);
      if (epilogue) (*epilogue)(pc, ldc, i0, in, j0, jn);
      if (!c_direct) store_block(cbuf, jn, c, i0, in, j0, jn);
      if (k > kc) b_loaded = -1;  // several inner panels: bbuf holds the last one only
    }
  }
}

}  // namespace trainlab::cpu
