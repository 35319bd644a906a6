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

// dst[rows, cols] (dense) = fp32 of the block at (r0, c0) of the row-major matrix t, in one call
// (a block of whole rows as one run of memory, other rows found by their stride; the values are
// converted one by one, so the bits are the same).
void load_block(const Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float* dst, bool tf32,
                const Fp8Cast* cast) {
  const int64_t ld = t.dim(1);
  const size_t stride = dtype_bytes(t.dtype(), static_cast<size_t>(ld));
  const char* src = elem_ptr(t, r0 * ld + c0);
  if (cols == ld) cols *= rows, rows = 1;
  if (cast) {  // converted, scaled and cast in one pass (with the maximum |x|), all rows in one call
    const uint32_t amax = convert_round_scaled_rows(t.dtype(), src, stride, static_cast<size_t>(rows),
                                                    static_cast<size_t>(cols), cast->format, cast->scale, dst);
    if (cast->amax_bits) *cast->amax_bits = std::max(*cast->amax_bits, amax);
    return;
  }
  convert_to_f32_rows(t.dtype(), src, stride, static_cast<size_t>(rows), static_cast<size_t>(cols), dst);
  if (tf32) round_tf32(dst, static_cast<size_t>(rows * cols));
}

// The block at (r0, c0) of t = src[rows, cols] (row stride ld_src), rounded to t's format.
void store_block(const float* src, int64_t ld_src, Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  const int64_t ld = t.dim(1);
  const size_t stride = dtype_bytes(t.dtype(), static_cast<size_t>(ld));
  char* dst = elem_ptr(t, r0 * ld + c0);
  if (cols == ld && ld_src == cols) cols *= rows, rows = 1;
  convert_from_f32_rows(src, static_cast<size_t>(ld_src), t.dtype(), dst, stride, static_cast<size_t>(rows),
                        static_cast<size_t>(cols));
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
// blocks (each dimension the call's block times a power of 2, or all of it) holding at most
// `budget` floats together, chosen for the fewest values converted: A once per column block,
// B once per row block unless one inner block holds all of k (then once), and a little for
// each block's setup. The calls' own blocks are always allowed (3 x kGemmWork floats at most).
// `total` floats are shared by `threads` threads, each with its own blocks, or (shared_b) all of
// B is converted once for every thread and each has its own A and C blocks.
struct SuperBlocks {
  int64_t mb = 1, nb = 1, kb = 1;
  bool shared_b = false;
};
SuperBlocks super_blocks(int64_t m, int64_t n, int64_t k, const CallBlocks& g, bool a_direct, bool b_direct,
                         bool c_direct, int64_t total, int threads) {
  const int64_t budget = std::max(3 * kGemmWork, total / threads);  // a thread's floats
  const auto ceil_div = [](int64_t x, int64_t y) { return (std::max<int64_t>(x, 1) + y - 1) / y; };
  const auto sizes = [&](int64_t q, int64_t dim) {  // q, 2q, 4q, ... and the multiple of q covering dim
    std::vector<int64_t> v;
    const int64_t full = ceil_div(dim, q) * q;
    for (int64_t x = q; x < full; x *= 2) v.push_back(x);
    v.push_back(full);
    return v;
  };
  const std::vector<int64_t> ms = sizes(g.mb, m), ns = sizes(g.nb, n), ks = sizes(g.kc, k);
  SuperBlocks best{g.mb, g.nb, g.kc};
  int64_t best_cost = -1;
  for (int64_t mb : ms)
    for (int64_t nb : ns)
      for (int64_t kb : ks) {
        const int64_t M = std::min(mb, std::max<int64_t>(m, 1)), N = std::min(nb, std::max<int64_t>(n, 1));
        const int64_t K = std::min(kb, std::max<int64_t>(k, 1));
        const int64_t floats = (a_direct ? 0 : M * K) + (b_direct ? 0 : K * N) + (c_direct ? 0 : M * N);
        if (floats > budget && !(mb == g.mb && nb == g.nb && kb == g.kc)) continue;
        const int64_t ib = ceil_div(m, mb), jb = ceil_div(n, nb), kn = ceil_div(k, kb);
        const int64_t cost = (a_direct ? 0 : m * k * jb) + (b_direct ? 0 : kn == 1 ? k * n : k * n * ib) + ib * jb * kn * 4096;
        if (best_cost < 0 || cost < best_cost) best = {mb, nb, kb}, best_cost = cost;
      }
  const int64_t M0 = std::max<int64_t>(m, 1), N = std::max<int64_t>(n, 1), K = std::max<int64_t>(k, 1);
  if (threads > 1 && !b_direct)
    for (int64_t mb : ms) {  // all of B shared: A and B converted once
      const int64_t M = std::min(mb, M0), ib = ceil_div(m, mb);
      const int64_t floats = K * N + threads * ((a_direct ? 0 : M * K) + (c_direct ? 0 : M * N));
      const int64_t cost = (a_direct ? 0 : m * k) + k * n + ib * 4096;
      if (floats <= total && ib >= threads && cost < best_cost) best = {mb, ns.back(), ks.back(), true}, best_cost = cost;
    }
  return best;
}

// The floats a product may hold converted, all threads together: 3 x kGemmWork, or more for a
// larger product, but never more than what storing its two smaller tensors in 16 bits saves (half
// a float an element). Two of a linear layer's three tensors are activations held in 16 bits (x
// and y, dy and dx, or x and dy; the third is a weight or its gradient, whose savings the fp32
// master takes back), and the two smaller tensors hold no more elements than those two, so the
// workspace stays below what the 16-bit run saves on its activations.
int64_t conversion_budget(const Tensor& a, const Tensor& b, const Tensor& c) {
  const Tensor* t[3] = {&a, &b, &c};
  std::sort(t, t + 3, [](const Tensor* x, const Tensor* y) { return x->numel() < y->numel(); });
  int64_t saved = 0;
  for (int i = 0; i < 2; ++i)
    if (dtype_bytes(t[i]->dtype(), 2) < 8) saved += t[i]->numel() / 2;
  return std::max<int64_t>(3 * kGemmWork, saved);
}

// One block to convert: load_block's arguments.
struct BlockLoad {
  const Tensor* t = nullptr;
  int64_t r0 = 0, rows = 0, c0 = 0, cols = 0;
  float* dst = nullptr;
  bool tf32 = false;
  const Fp8Cast* cast = nullptr;
};

// Converts n blocks, their rows split over `threads` parts (each value is converted on its own,
// so the bits do not depend on the split); each part gathers its own fp8 maxima, merged after.
void load_blocks(const BlockLoad* loads, int n, int threads) {
  if (n == 0) return;
  int64_t rows = 0;
  for (int i = 0; i < n; ++i) rows = std::max(rows, loads[i].rows);
  threads = static_cast<int>(std::clamp<int64_t>(rows, 1, threads));
  if (threads == 1) {
    for (int i = 0; i < n; ++i) {
      const BlockLoad& l = loads[i];
      load_block(*l.t, l.r0, l.rows, l.c0, l.cols, l.dst, l.tf32, l.cast);
    }
    return;
  }
  std::vector<uint32_t> amax(static_cast<size_t>(threads * n), 0u);
  parallel_for(threads, threads, [&](int w, int64_t, int64_t) {
    for (int i = 0; i < n; ++i) {
      const BlockLoad& l = loads[i];
      const int64_t r = l.rows * w / threads, re = l.rows * (w + 1) / threads;
      if (r == re) continue;
      Fp8Cast cast = l.cast ? *l.cast : Fp8Cast{};
      cast.amax_bits = &amax[static_cast<size_t>(w * n + i)];
      load_block(*l.t, l.r0 + r, re - r, l.c0, l.cols, l.dst + r * l.cols, l.tf32, l.cast ? &cast : nullptr);
    }
  });
  for (int i = 0; i < n; ++i)
    if (loads[i].cast && loads[i].cast->amax_bits)
      for (int w = 0; w < threads; ++w)
        *loads[i].cast->amax_bits = std::max(*loads[i].cast->amax_bits, amax[static_cast<size_t>(w * n + i)]);
}

// One thread's conversion buffers (null where the operand is read in place).
struct Buffers {
  float *a = nullptr, *b = nullptr, *c = nullptr;
};

// A product that is not all fp32, as panel_gemm computes it: its operands, call and conversion
// blocks. run_block computes one MB x NB block of C (all of k) with one thread's buffers.
struct BlockedGemm {
  const Tensor &a, &b;
  Tensor& c;
  bool ta, tb, tf32;
  float alpha, beta;
  const BlockEpilogue* epilogue;
  int64_t m, n, k;
  bool a_direct, b_direct, c_direct;
  CallBlocks g;
  SuperBlocks s;

  // B's block (J0, all of k) is already in buf.b when b_held says so; sets it when kept.
  void run_block(int64_t I0, int64_t J0, const Buffers& buf, const Fp8Cast* cast_a, const Fp8Cast* cast_b,
                 bool& b_held, int inner_threads) const;
};

void BlockedGemm::run_block(int64_t I0, int64_t J0, const Buffers& buf, const Fp8Cast* cast_a, const Fp8Cast* cast_b,
                            bool& b_held, int inner_threads) const {
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  const auto op_a = ta ? CblasTrans : CblasNoTrans, op_b = tb ? CblasTrans : CblasNoTrans;
  const int64_t MB = std::min(s.mb, m - I0), NB = std::min(s.nb, n - J0);
  float* cblk = c_direct ? c.data<float>() + I0 * n + J0 : buf.c;
  const int64_t ldc = c_direct ? n : NB;
  int64_t P0 = 0;
  do {  // inner blocks in order; each call adds its panel to its block of C
    const int64_t KB = std::min(s.kb, k - P0);
    BlockLoad loads[3];
    int n_loads = 0;
    if (P0 == 0 && !c_direct && beta != 0.0f) loads[n_loads++] = {&c, I0, MB, J0, NB, buf.c, false, nullptr};
    if (!a_direct)
      loads[n_loads++] = ta ? BlockLoad{&a, P0, KB, I0, MB, buf.a, tf32, cast_a} : BlockLoad{&a, I0, MB, P0, KB, buf.a, tf32, cast_a};
    if (!b_direct && !b_held) {
      loads[n_loads++] = tb ? BlockLoad{&b, J0, NB, P0, KB, buf.b, tf32, cast_b} : BlockLoad{&b, P0, KB, J0, NB, buf.b, tf32, cast_b};
      b_held = KB == k;
    }
    load_blocks(loads, n_loads, inner_threads);
    const bool last = P0 + KB >= k;
    const int64_t jblocks = (NB + g.nb - 1) / g.nb;
    const auto run = [&](int, int64_t first, int64_t end) {
      for (int64_t blk = first; blk < end; ++blk) {
        const int64_t i0 = I0 + blk / jblocks * g.mb, j0 = J0 + blk % jblocks * g.nb;
        const int64_t in = std::min(g.mb, I0 + MB - i0), jn = std::min(g.nb, J0 + NB - j0);
        float* pc = cblk + (i0 - I0) * ldc + (j0 - J0);
        int64_t p0 = P0;
        do {
          const int64_t pn = std::min(g.kc, k - p0);
          const float* pa = a_direct ? a.data<float>() + (ta ? p0 * lda + i0 : i0 * lda + p0)
                                     : buf.a + (ta ? (p0 - P0) * MB + (i0 - I0) : (i0 - I0) * KB + (p0 - P0));
          const float* pb = b_direct ? b.data<float>() + (tb ? j0 * ldb + p0 : p0 * ldb + j0)
                                     : buf.b + (tb ? (j0 - J0) * KB + (p0 - P0) : (p0 - P0) * NB + (j0 - J0));
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
    const int64_t calls = (MB + g.mb - 1) / g.mb * jblocks;
    if (inner_threads > 1)
      parallel_for(calls, inner_threads, run);
    else
      run(0, 0, calls);  // no thread to start: called directly (a digits step makes ~100 of these)
    P0 += s.kb;
  } while (P0 < k);
}

}  // namespace

// C[m,n] = alpha op(A) op(B) + beta C: see cpu_panels.h.
void panel_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta, bool tf32,
                const Scratch& scratch, const BlockEpilogue* epilogue, const Fp8Cast* cast_a, const Fp8Cast* cast_b,
                int threads, size_t held) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  if (tf32 && (cast_a || cast_b)) throw Error("panel_gemm: tf32 rounding and fp8 casts exclude each other");
  const bool a_direct = a.dtype() == DType::F32 && !tf32 && !cast_a;
  const bool b_direct = b.dtype() == DType::F32 && !tf32 && !cast_b;
  const bool c_direct = c.dtype() == DType::F32;
  if (a_direct && b_direct && c_direct) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), alpha, a.data<float>(), static_cast<int>(a.dim(1)),
                b.data<float>(), static_cast<int>(b.dim(1)), beta, c.data<float>(), static_cast<int>(n));
    if (epilogue) (*epilogue)(c.data<float>(), n, 0, m, 0, n);
    return;
  }
  const CallBlocks g = call_blocks(m, n, k, a_direct, b_direct, c_direct);
  // OpenBLAS computes a call of at most 65,536 x 4 multiply-adds on the calling thread alone
  // (interface/gemm.c: its default GEMM_MULTITHREAD_THRESHOLD), so such calls can run side by
  // side on the backend's threads with the same bits. A thread for each 2^20 multiply-adds at
  // least (about 10 us of work): handing a part to parallel_for's waiting worker costs a few us
  // (2^18 and 2^20 measured alike on the digits MLP; threads started per product needed 2^23).
  // Each thread has buffers of its own of at least the calls' blocks (3 x kGemmWork floats), so
  // no more threads than the budget holds: a small product keeps one thread's workspace (sharing
  // one thread's buffers instead, each block's conversions split by rows, was 2x slower there:
  // its blocks are too small to split), unless slot 1 already holds more (`held`: digits' first
  // layer then takes the second core, as the larger products of its step left room for it).
  const bool side_by_side = g.mb * g.nb * g.kc <= 65536 * 4 && threads > 1;
  const int64_t budget = std::max(conversion_budget(a, b, c), static_cast<int64_t>(held));
  const int64_t worth = std::min((m * n * std::max<int64_t>(k, 1)) >> 20, budget / (3 * kGemmWork));
  const int want = side_by_side ? static_cast<int>(std::clamp<int64_t>(worth, 1, threads)) : 1;
  const BlockedGemm p{a, b, c, ta, tb, tf32, alpha, beta, epilogue, m, n, k, a_direct, b_direct, c_direct, g,
                      super_blocks(m, n, k, g, a_direct, b_direct, c_direct, budget, want)};
  const auto cap = [](int64_t blk, int64_t dim) { return std::min(blk, std::max<int64_t>(dim, 1)); };
  const int64_t asz = a_direct ? 0 : cap(p.s.mb, m) * cap(p.s.kb, k), bsz = b_direct ? 0 : cap(p.s.kb, k) * cap(p.s.nb, n);
  const int64_t shared = p.s.shared_b ? bsz : 0, per_thread = asz + bsz - shared + (c_direct ? 0 : cap(p.s.mb, m) * cap(p.s.nb, n));
  // The blocks of C, column strip by column strip; each thread takes a contiguous run of them (so
  // converts a strip of B once per strip it enters, or reads the shared B) with its own buffers,
  // all in slot 1.
  const int64_t iblocks = (std::max<int64_t>(m, 1) + p.s.mb - 1) / p.s.mb, jblocks = (std::max<int64_t>(n, 1) + p.s.nb - 1) / p.s.nb;
  const int outer = static_cast<int>(std::min<int64_t>(want, iblocks * jblocks));
  float* base = scratch(1, static_cast<size_t>(std::max<int64_t>(shared + outer * per_thread, 1)));
  if (p.s.shared_b) {
    const BlockLoad all_b = tb ? BlockLoad{&b, 0, n, 0, k, base, tf32, cast_b} : BlockLoad{&b, 0, k, 0, n, base, tf32, cast_b};
    load_blocks(&all_b, 1, want);
  }
  std::vector<uint32_t> amax(2 * static_cast<size_t>(outer), 0u);
  parallel_for(iblocks * jblocks, outer, [&](int t, int64_t first, int64_t end) {
    Buffers buf;
    float* mine = base + shared + t * per_thread;
    if (!a_direct) buf.a = mine;
    if (!b_direct) buf.b = p.s.shared_b ? base : mine + asz;
    if (!c_direct) buf.c = mine + asz + bsz - shared;
    Fp8Cast ca = cast_a ? *cast_a : Fp8Cast{}, cb = cast_b ? *cast_b : Fp8Cast{};  // maxima per thread
    ca.amax_bits = &amax[2 * static_cast<size_t>(t)];
    cb.amax_bits = &amax[2 * static_cast<size_t>(t) + 1];
    bool b_held = p.s.shared_b;
    for (int64_t blk = first; blk < end; ++blk) {
      if (!p.s.shared_b && (blk == first || blk % iblocks == 0)) b_held = false;
      p.run_block(blk % iblocks * p.s.mb, blk / iblocks * p.s.nb, buf, cast_a ? &ca : nullptr, cast_b ? &cb : nullptr,
                  b_held, outer == 1 ? want : 1);
    }
  });
  for (int t = 0; t < outer; ++t) {
    if (cast_a && cast_a->amax_bits) *cast_a->amax_bits = std::max(*cast_a->amax_bits, amax[2 * static_cast<size_t>(t)]);
    if (cast_b && cast_b->amax_bits) *cast_b->amax_bits = std::max(*cast_b->amax_bits, amax[2 * static_cast<size_t>(t) + 1]);
  }
}

}  // namespace trainlab::cpu
