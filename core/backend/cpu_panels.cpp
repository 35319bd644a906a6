// The CPU backend's format conversions and panel-wise matrix product: see cpu_panels.h.
#include "backend/cpu_panels.h"

#include <cblas.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "backend/cpu_numeric.h"
#include "tensor/dtype.h"
#include "tensor/fp8_cast.h"
#include "util/error.h"
#include "util/parallel.h"

namespace trainlab::cpu {

// The bulk conversions of tensor/dtype.h (vectorised there).
void to_f32(DType t, const void* src, float* dst, size_t n) { convert_to_f32(t, src, dst, n); }
void from_f32(const float* src, DType t, void* dst, size_t n) { convert_from_f32(src, t, dst, n); }
void round_n(DType t, float* p, size_t n) {
  if (t != DType::F32) round_to_n(t, p, n);
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
  uint32_t amax = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dst + r * cols;
    const char* src = elem_ptr(t, (r0 + r) * ld + c0);
    if (cast) {  // converted, scaled and cast in one pass (with the maximum |x|)
      amax = std::max(amax, convert_round_scaled(t.dtype(), src, cast->format, cast->scale, row, static_cast<size_t>(cols)));
      continue;
    }
    to_f32(t.dtype(), src, row, static_cast<size_t>(cols));
    if (tf32) round_tf32(row, static_cast<size_t>(cols));
  }
  if (cast && cast->amax_bits) *cast->amax_bits = std::max(*cast->amax_bits, amax);
}

// The block at (r0, c0) of t = src[rows, cols] (row stride ld_src), rounded to t's format.
void store_block(const float* src, int64_t ld_src, Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  const int64_t ld = t.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    from_f32(src + r * ld_src, t.dtype(), elem_ptr(t, (r0 + r) * ld + c0), static_cast<size_t>(cols));
}

namespace {

// The sgemm calls of a product that is not all fp32: one per block of mb x nb of C and panel of
// kc of the inner dimension. These sizes fix the result's bits (OpenBLAS's kernels round a value
// differently with its place in the call: tests/unit/test_cpu_panels.cpp), so they stay what
// they were when each call converted its own operands: kc = min(k, 64), blocks of 64 x 64 (wider
// along an fp32 operand), within 4,096 values where C is converted.
struct CallBlocks {
  int64_t kc = 1, mb = 1, nb = 1;
};
CallBlocks call_blocks(int64_t m, int64_t n, int64_t k, bool a_direct, bool b_direct, bool c_direct) {
  constexpr int64_t kCallPanel = 4096, kMinBlock = 64;
  CallBlocks g;
  g.kc = std::clamp<int64_t>(k, 1, kCallPanel / kMinBlock);
  g.mb = a_direct ? m : std::clamp<int64_t>(kCallPanel / g.kc, 1, std::max<int64_t>(m, 1));
  g.nb = b_direct ? n : std::clamp<int64_t>(kCallPanel / g.kc, 1, std::max<int64_t>(n, 1));
  if (!c_direct)
    while (g.mb * g.nb > kCallPanel) (g.mb >= g.nb ? g.mb : g.nb) = ((g.mb >= g.nb ? g.mb : g.nb) + 1) / 2;
  g.mb = std::max<int64_t>(g.mb, 1);
  g.nb = std::max<int64_t>(g.nb, 1);
  return g;
}

// The conversion blocks: MB x KB of A, KB x NB of B and MB x NB of C, multiples of the calls'
// blocks within kGemmWork floats each, chosen (over NB = all of n, half, ...) for the fewest
// values converted: A once per column block, B once per row block unless one inner block
// holds all of k (then once), and a little for each block's setup.
struct SuperBlocks {
  int64_t mb = 1, nb = 1, kb = 1;
};
SuperBlocks super_blocks(int64_t m, int64_t n, int64_t k, const CallBlocks& g, bool a_direct, bool b_direct,
                         bool c_direct) {
  const auto up = [](int64_t x, int64_t q) { return std::max(q, (x + q - 1) / q * q); };
  const auto fit = [](int64_t limit, int64_t q) { return std::max(q, limit / q * q); };
  const auto ceil_div = [](int64_t x, int64_t y) { return (std::max<int64_t>(x, 1) + y - 1) / y; };
  SuperBlocks best;
  int64_t best_cost = -1;
  for (int64_t nb = up(n, g.nb);; nb = fit(nb / 2, g.nb)) {
    SuperBlocks s;
    s.nb = nb;
    s.mb = up(m, g.mb);
    if (!a_direct) s.mb = std::min(s.mb, fit(kGemmWork / g.kc, g.mb));
    if (!c_direct) s.mb = std::min(s.mb, fit(kGemmWork / nb, g.mb));
    s.kb = up(k, g.kc);
    if (!a_direct) s.kb = std::min(s.kb, fit(kGemmWork / s.mb, g.kc));
    if (!b_direct) s.kb = std::min(s.kb, fit(kGemmWork / nb, g.kc));
    const bool fits = (c_direct || s.mb * nb <= kGemmWork || nb == g.nb) && (b_direct || s.kb * nb <= kGemmWork || nb == g.nb);
    const int64_t ib = ceil_div(m, s.mb), jb = ceil_div(n, nb), kb = ceil_div(k, s.kb);
    const int64_t cost = (a_direct ? 0 : m * k * jb) + (b_direct ? 0 : kb == 1 ? k * n : k * n * ib) + ib * jb * kb * 4096;
    if (fits && (best_cost < 0 || cost < best_cost)) best = s, best_cost = cost;
    if (nb <= g.nb) break;
  }
  return best;
}

}  // namespace

// C[m,n] = alpha op(A) op(B) + beta C: see cpu_panels.h.
void panel_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta, bool tf32,
                const Scratch& scratch, const BlockEpilogue* epilogue, const Fp8Cast* cast_a, const Fp8Cast* cast_b,
                int threads) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  if (tf32 && (cast_a || cast_b)) throw Error("panel_gemm: tf32 rounding and fp8 casts exclude each other");
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
  const CallBlocks g = call_blocks(m, n, k, a_direct, b_direct, c_direct);
  const SuperBlocks s = super_blocks(m, n, k, g, a_direct, b_direct, c_direct);
  const auto slot = [&](int i, int64_t floats) { return scratch(i, static_cast<size_t>(std::max<int64_t>(floats, 1))); };
  const int64_t mcap = std::min(s.mb, std::max<int64_t>(m, 1)), ncap = std::min(s.nb, std::max<int64_t>(n, 1));
  const int64_t kcap = std::min(s.kb, std::max<int64_t>(k, 1));
  float* abuf = a_direct ? nullptr : slot(1, mcap * kcap);
  float* bbuf = b_direct ? nullptr : slot(2, kcap * ncap);
  float* cbuf = c_direct ? nullptr : slot(3, mcap * ncap);
  // OpenBLAS computes a call of at most 65,536 x 4 multiply-adds on the calling thread alone
  // (interface/gemm.c: its default GEMM_MULTITHREAD_THRESHOLD), so such calls can run side by
  // side on the backend's threads with the same bits: a large enough block is split that way.
  const bool side_by_side = g.mb * g.nb * g.kc <= 65536 * 4 && threads > 1;
  for (int64_t J0 = 0; J0 < n; J0 += s.nb) {
    const int64_t NB = std::min(s.nb, n - J0);
    bool b_held = false;  // B's block for all of k, kept for every row block
    for (int64_t I0 = 0; I0 < m; I0 += s.mb) {
      const int64_t MB = std::min(s.mb, m - I0);
      float* cblk = c_direct ? c.data<float>() + I0 * n + J0 : cbuf;
      const int64_t ldc = c_direct ? n : NB;
      if (!c_direct && beta != 0.0f) load_block(c, I0, MB, J0, NB, cbuf, false);
      int64_t P0 = 0;
      do {  // inner blocks in order; each call adds its panel to its block of C
        const int64_t KB = std::min(s.kb, k - P0);
        if (!a_direct) {
          if (!ta)
            load_block(a, I0, MB, P0, KB, abuf, tf32, cast_a);
          else
            load_block(a, P0, KB, I0, MB, abuf, tf32, cast_a);
        }
        if (!b_direct && !b_held) {
          if (!tb)
            load_block(b, P0, KB, J0, NB, bbuf, tf32, cast_b);
          else
            load_block(b, J0, NB, P0, KB, bbuf, tf32, cast_b);
          b_held = KB == k;
        }
        const bool last = P0 + KB >= k;
        const int64_t iblocks = (MB + g.mb - 1) / g.mb, jblocks = (NB + g.nb - 1) / g.nb;
        const auto run = [&](int, int64_t first, int64_t end) {
          for (int64_t blk = first; blk < end; ++blk) {
            const int64_t i0 = I0 + blk / jblocks * g.mb, j0 = J0 + blk % jblocks * g.nb;
            const int64_t in = std::min(g.mb, I0 + MB - i0), jn = std::min(g.nb, J0 + NB - j0);
            float* pc = cblk + (i0 - I0) * ldc + (j0 - J0);
            int64_t p0 = P0;
            do {
              const int64_t pn = std::min(g.kc, k - p0);
              const float* pa = a_direct ? a.data<float>() + (ta ? p0 * lda + i0 : i0 * lda + p0)
                                         : abuf + (ta ? (p0 - P0) * MB + (i0 - I0) : (i0 - I0) * KB + (p0 - P0));
              const float* pb = b_direct ? b.data<float>() + (tb ? j0 * ldb + p0 : p0 * ldb + j0)
                                         : bbuf + (tb ? (j0 - J0) * KB + (p0 - P0) : (p0 - P0) * NB + (j0 - J0));
              const int64_t ld_a = a_direct ? lda : ta ? MB : KB, ld_b = b_direct ? ldb : tb ? KB : NB;
              cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<int>(in), static_cast<int>(jn), static_cast<int>(pn),
                          alpha, pa, static_cast<int>(std::max<int64_t>(ld_a, 1)), pb,
                          static_cast<int>(std::max<int64_t>(ld_b, 1)), p0 == 0 ? beta : 1.0f, pc, static_cast<int>(ldc));
              p0 += g.kc;
            } while (p0 < std::min(P0 + KB, k));
            if (!last) continue;
            if (epilogue) (*epilogue)(pc, ldc, i0, in, j0, jn);
            if (!c_direct) store_block(pc, ldc, c, i0, in, j0, jn);
          }
        };
        // a thread for each 2^23 multiply-adds at least: with less, starting it costs more than it
        // saves on a loaded machine (the digits MLP's products took 2x longer split in two)
        const int64_t work = MB * NB * std::max<int64_t>(KB, 1) >> 23;
        parallel_for(iblocks * jblocks, side_by_side ? static_cast<int>(std::clamp<int64_t>(work, 1, threads)) : 1, run);
        P0 += s.kb;
      } while (P0 < k);
    }
  }
}

}  // namespace trainlab::cpu
