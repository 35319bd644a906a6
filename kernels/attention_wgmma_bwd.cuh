// kernels/attention_wgmma_bwd.cuh: the sm_90a (Hopper) causal attention backward for bf16 at head
// dim 64 on warpgroup MMA (wgmma.mma_async, fp32 accumulators), built from the forward's pieces in
// attention_wgmma.cuh (descriptors, swizzled cp.async tile loads, the wgmma wrappers, pin / fence
// conventions); device code, included only by attention_wgmma.cu. Two kernels with the arguments
// and semantics of attention_tc.cuh's bwd_dkv_tc<bf16, 64, 64> and bwd_dq_tc<bf16, 64> (the dK/dV
// kernel writes the k and v parts of dqkv, the dQ kernel the q part; dd = rowdot(dy, y) comes from
// the caller) and bit-identical results (tools/wgmma_lab/wgmma_bwd_lab.cu checks them against
// those kernels; tests/gpu/test_cuda_attention against them and the CPU).
//
// Recomputation, as in the mma.sync kernels: P = 2^(s c - lse log2 e) with c = scale log2 e (one
// FFMA and one ex2 per score, lse turned to base 2 as -lse * log2 e), causal mask after the
// exponent (P = 0), dS = P (dP - D); P and dS rounded to bf16 (round to nearest) as the A operand
// of their products; dV = sum P^T dY, dK = scale sum dS^T Q, dQ = scale sum dS K.
//
// Tiles: every shared-memory tile is rows of 64 bf16 = 128 bytes in the 128-byte swizzle (chunk c
// of row r at c ^ r % 8, 1024-aligned), loaded by cp.async (zeros past T). Each tile serves two
// ways: as a K-major operand (descriptor SBO 1024, k16 step +32 bytes = +2 in the descriptor's
// address field) of the score products, and as an N-major B operand (transpose bit, SBO 1024, k16
// step = 16 rows = +2048 bytes = +128) of the gradient products, exactly as V in the forward.
//
// dK/dV (bwd_dkv_wg): block = NWG warpgroups x 64 keys of one (batch, head), grid (B*H, key
// tiles), the most work first (key block 0 sees every query tile). The block's K and V rows stay
// in shared memory; query tiles of 64 (Q, dY, and their lse and D values) stream through a ring
// of STAGES stages from the diagonal tile of the block down to T. Per warpgroup and query tile:
//   S^T  = K Q^T   m64n64k16 x 4, A = K rows (K-major), B = Q tile (K-major)
//   dP^T = V dY^T  m64n64k16 x 4, A = V rows, B = dY tile (K-major)
//   dV  += P^T dY  m64n64k16 x 4, A = P^T from registers, B = dY tile N-major (transpose bit)
//   dK  += dS^T Q  m64n64k16 x 4, A = dS^T from registers, B = Q tile N-major
// The S^T accumulator fragment of a warp (key rows 16 w + g, g + 8; query columns 8 i + 2 t, +1)
// packed to bf16x2 is its A fragment, so P^T and dS^T never touch shared memory; a thread needs
// lse and D of its 16 query columns (float2 shared loads). Warpgroup wg's first query tile is the
// block's tile wg (64 | its first key): it alone is masked (query < key dropped), its earlier tiles
// are skipped (the warpgroup idles through them; the loads are block-wide).
// PIPE (the tuned dK/dV): the tensor core overlaps the exponentials FA3-style: with P_j, dS_j
// (bf16, registers) known, a warpgroup issues S^T_{j+1}, dP^T_{j+1} then dV, dK += ..._j, waits for
// the first group alone, computes P_{j+1}, dS_{j+1} (fp32, in the S / dP registers) while the
// gradient products run, then waits for them and packs. !PIPE: S^T, dP^T, wait, gradients, dV /
// dK, wait, in turn (fewer registers: more warpgroups per SM hide the latency instead).
// Descriptors of a batch are all built before its wgmma.fence (no serialization warning).
//
// dQ (bwd_dq_wg): block = NWG warpgroups x 64 queries, grid (B*H, query tiles), heaviest first;
// its Q and dY rows stay, key tiles of 64 (K and V) stream through a ring of STAGES stages (as
// the forward). Per warpgroup and key tile: S = Q K^T, dP = dY V^T (B operands K-major), dQ += dS
// K (B = K tile N-major); lse and D are per row, in registers. Key tiles right of a warpgroup's
// diagonal are skipped, the diagonal one (its last) is masked. PIPE as in dK/dV (the tuned dQ is
// the serial loop: 124 registers let two 2-warpgroup blocks share an SM).
//
// Deterministic (no atomics): every output element is owned by one thread of one block.
#pragma once
#include "attention_wgmma.cuh"

namespace trainlab::kern::attn_wg {

using attn::kLog2e;
constexpr int kTileBytes = 64 * 128;  // a 64-row tile (queries or keys) of 64 bf16

// 4 bytes global -> shared by cp.async, zeros when !full (lse and D of a query tile).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(full ? 4 : 0));
}

// An accumulator tile (64 x 64 fp32, accumulator layout) as bf16 A fragments (4 k16 steps x 4
// registers): k16 step kk holds (row g, cols 16kk + 2t, +1), (g + 8, same), (g, +8), (g + 8, +8).
__device__ __forceinline__ void pack_a(uint32_t (&a)[16], const float (&x)[32]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    a[(i / 2) * 4 + (i % 2) * 2 + 0] = pack_bf16(x[4 * i + 0], x[4 * i + 1]);
    a[(i / 2) * 4 + (i % 2) * 2 + 1] = pack_bf16(x[4 * i + 2], x[4 * i + 3]);
  }
}

// d = A B^T over hd 64 (4 k16 steps), A and B K-major descriptors.
__device__ __forceinline__ void mma_abt(float (&d)[32], const uint64_t (&a)[4], const uint64_t (&b)[4]) {
  MmaSS<64>::first(d, a[0], b[0]);
#pragma unroll
  for (int kk = 1; kk < 4; ++kk) MmaSS<64>::acc(d, a[kk], b[kk]);
}
// d += A B over 64 rows of B (4 k16 steps), A bf16 fragments, B N-major descriptors.
__device__ __forceinline__ void mma_pb(float (&d)[32], const uint32_t (&a)[16], const uint64_t (&b)[4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) mma_rs_t(d, reinterpret_cast<const uint32_t(&)[4]>(a[4 * kk]), b[kk]);
}

// ------------------------------------------------------------------------------------------------
// dK / dV.
// Dynamic shared memory: K and V rows of the block, STAGES x (Q tile, dY tile), STAGES x (64 lse,
// 64 D), 1 KB to align the base to the swizzle atom.
constexpr int dkv_smem_bytes(int nwg, int stages) {
  return 2 * nwg * 64 * 128 + stages * (2 * kTileBytes + 2 * 64 * 4) + 1024;
}

template <int NWG, int STAGES, int MINB, bool PIPE = true>
__global__ void __launch_bounds__(NWG * 128, MINB)
    bwd_dkv_wg(const __nv_bfloat16* __restrict__ qkv, const __nv_bfloat16* __restrict__ dy,
               const float* __restrict__ lse, const float* __restrict__ dd, void* dqkv, int dqdt, int T, int H,
               int hd, float scale, bool vec) {
  static_assert(STAGES >= 3, "tile j+1 lands while tile j is multiplied, tile j-1's stage refills");
  constexpr int NT = NWG * 128, kBlockKeys = NWG * 64;
  (void)hd, (void)vec;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t s0 = smem_addr(smem), ks = (s0 + 1023u) & ~1023u;
  const uint32_t vs = ks + kBlockKeys * 128, qs = vs + kBlockKeys * 128, ys = qs + STAGES * kTileBytes;
  const uint32_t ls = ys + STAGES * kTileBytes;  // stage st: lse at ls + 512 st, D 256 bytes further
  const float* lsp = reinterpret_cast<const float*>(smem + (ls - s0));
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int k0 = int(blockIdx.y) * kBlockKeys;  // key block 0 first: it sees every query tile
  const int D = H * kHd;
  const int64_t ld = 3LL * D;
  const __nv_bfloat16* base = qkv + int64_t(b) * T * ld + int64_t(h) * kHd;
  const __nv_bfloat16* dbase = dy + int64_t(b) * T * D + int64_t(h) * kHd;
  // Warp-uniform indices through a shuffle (wgmma on a path ptxas thinks divergent is serialized).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  const int warp = __shfl_sync(0xffffffffu, int(threadIdx.x) / 32, 0) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int first = k0 / 64, ntiles = (T + 63) / 64 - first;  // query tiles first .. first+ntiles-1
  const int wk0 = k0 + wg * 64;                                // this warpgroup's first key
  const bool active = wk0 < T;                                 // its tiles: j = wg .. ntiles-1
  const float scale_log2 = scale * kLog2e;

  // Query tile j (relative to first) into stage j % STAGES, with its lse and D (zeros past T: the
  // Q and dY rows are zeros there too, so those queries add nothing: P = 1, dY = 0, dP - D = 0).
  // One commit group per tile, empty past the last, so that the wait depth stays uniform.
  const TileLoader<64, NT> ql(base, ld), yl(dbase, D);
  auto load_q = [&](int j) {
    if (j < ntiles) {
      const int q0 = (first + j) * 64, st = j % STAGES;
      ql.load(qs + st * kTileBytes, int64_t(q0) * ld, T - q0);
      yl.load(ys + st * kTileBytes, int64_t(q0) * D, T - q0);
      if (threadIdx.x < 128) {
        const int i = threadIdx.x % 64, q = q0 + i;
        const float* src = (threadIdx.x < 64 ? lse : dd) + int64_t(bh) * T + min(q, T - 1);
        cp_async4(ls + st * 512 + (threadIdx.x / 64) * 256 + i * 4, src, q < T);
      }
    }
    cp_async_commit();
  };
  load_tile<kBlockKeys, NT>(ks, base + int64_t(k0) * ld + D, ld, T - k0);  // join tile 0's group
  load_tile<kBlockKeys, NT>(vs, base + int64_t(k0) * ld + 2 * D, ld, T - k0);
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) load_q(t);

  // Descriptors (address field; desc_of adds the constant high word): K and V rows of this
  // warpgroup (A, K-major), Q and dY stages (B, K-major: +2 per k16; N-major: +128 per k16).
  const uint32_t dK = desc_lo(ks + wg * 64 * 128), dV = desc_lo(vs + wg * 64 * 128);
  const uint32_t dQ = desc_lo(qs), dY = desc_lo(ys);
  struct SDesc {
    uint64_t k[4], q[4], v[4], y[4];
  };
  struct GDesc {
    uint64_t y[4], q[4];
  };
  auto s_desc = [&](int j) {
    SDesc d;
    const uint32_t st = (j % STAGES) * (kTileBytes >> 4);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      d.k[kk] = desc_of(dK + 2 * kk), d.q[kk] = desc_of(dQ + st + 2 * kk);
      d.v[kk] = desc_of(dV + 2 * kk), d.y[kk] = desc_of(dY + st + 2 * kk);
    }
    return d;
  };
  auto g_desc = [&](int j) {
    GDesc d;
    const uint32_t st = (j % STAGES) * (kTileBytes >> 4);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) d.y[kk] = desc_of(dY + st + 128 * kk), d.q[kk] = desc_of(dQ + st + 128 * kk);
    return d;
  };

  float dk[32], dv[32], s[32], dp[32];
  uint32_t pa[16], da[16];  // P^T and dS^T of the tile in the gradient products (bf16 A fragments)
#pragma unroll
  for (int i = 0; i < 32; ++i) dk[i] = dv[i] = 0.0f;
  // P^T and dS^T of query tile j from S^T (s) and dP^T (dp), in place. MASK (the diagonal tile,
  // first query = first key): query column 8i + 2t + (e&1) < key row 16w + g + 8(e>>1) dropped.
  const int lim = 16 * warp + g - 2 * t4;
  auto grads = [&](auto mask, int j) {
    const float* lt = lsp + (j % STAGES) * 128 + 2 * t4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float2 lv = *reinterpret_cast<const float2*>(lt + 8 * i);
      const float2 dv2 = *reinterpret_cast<const float2*>(lt + 64 + 8 * i);
      const float nl[2] = {-lv.x * kLog2e, -lv.y * kLog2e};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = ex2(fmaf(s[4 * i + e], scale_log2, nl[e & 1]));
        if constexpr (decltype(mask)::value)
          if (i * 8 + (e & 1) < lim + 8 * (e >> 1)) p = 0.0f;
        s[4 * i + e] = p;
        dp[4 * i + e] = p * (dp[4 * i + e] - ((e & 1) ? dv2.y : dv2.x));
      }
    }
  };
  auto issue_sdp = [&](const SDesc& d) {
    mma_abt(s, d.k, d.q);
    mma_abt(dp, d.v, d.y);
    wg_commit();
  };
  auto issue_grad = [&](const GDesc& d) {
    mma_pb(dv, pa, d.y);
    mma_pb(dk, da, d.q);
    wg_commit();
  };

  for (int j = 0; j < ntiles; ++j) {
    // Tile j + 1 landed (its group is the newest but STAGES - 3), every warpgroup done with j - 1.
    attn::cp_async_wait<STAGES - 3>();
    fence_async_smem();
    __syncthreads();
    load_q(j + STAGES - 1);  // into tile j-1's stage
    if (!active || j < wg) continue;  // warpgroup-uniform
    if (!PIPE) {  // no overlap inside the warpgroup: S^T, dP^T, gradients, dV / dK, in turn
      const SDesc d = s_desc(j);
      pin(dk);
      pin(dv);
      wg_fence();
      issue_sdp(d);
      wg_wait<0>();
      pin(s);
      pin(dp);
      if (j == wg)
        grads(std::true_type{}, j);
      else
        grads(std::false_type{}, j);
      pack_a(pa, s);
      pack_a(da, dp);
      const GDesc dg = g_desc(j);
      wg_fence();
      issue_grad(dg);
      wg_wait<0>();
      pin(dk);
      pin(dv);
      pin(pa);
      pin(da);
      continue;
    }
    if (j == wg) {  // the diagonal tile: S^T, dP^T and its (masked) gradients alone
      const SDesc d0 = s_desc(j);
      wg_fence();
      issue_sdp(d0);
      wg_wait<0>();
      pin(s);
      pin(dp);
      grads(std::true_type{}, j);
    }
    pack_a(pa, s);
    pack_a(da, dp);
    const GDesc dg = g_desc(j);
    if (j + 1 < ntiles) {
      // S^T_{j+1}, dP^T_{j+1} and dV, dK += ..._j in flight; the exponentials of j + 1 run under
      // the gradient products.
      const SDesc dn = s_desc(j + 1);
      pin(dk);
      pin(dv);
      pin(pa);
      pin(da);
      wg_fence();
      issue_sdp(dn);
      issue_grad(dg);
      wg_wait<1>();
      pin(s);
      pin(dp);
      grads(std::false_type{}, j + 1);
      wg_wait<0>();
      pin(dk);
      pin(dv);
      pin(pa);
      pin(da);
    } else {
      pin(dk);
      pin(dv);
      pin(pa);
      pin(da);
      wg_fence();
      issue_grad(dg);
      wg_wait<0>();
      pin(dk);
      pin(dv);
      pin(pa);
      pin(da);
    }
  }
  if (!active) return;
  const int64_t rowbase = int64_t(b) * T;
  const int key0 = wk0 + 16 * warp + g;
  store_rows(dqkv, dqdt, dk, {scale, scale}, rowbase, key0, T, ld, int64_t(h) * kHd + D, t4);
  store_rows(dqkv, dqdt, dv, {1.0f, 1.0f}, rowbase, key0, T, ld, int64_t(h) * kHd + 2 * D, t4);
}

// ------------------------------------------------------------------------------------------------
// dQ.
// Dynamic shared memory: Q and dY rows of the block, STAGES x (K tile, V tile), 1 KB alignment.
constexpr int dq_smem_bytes(int nwg, int stages) { return 2 * nwg * 64 * 128 + stages * 2 * kTileBytes + 1024; }

template <int NWG, int STAGES, int MINB, bool PIPE = true>
__global__ void __launch_bounds__(NWG * 128, MINB)
    bwd_dq_wg(const __nv_bfloat16* __restrict__ qkv, const __nv_bfloat16* __restrict__ dy,
              const float* __restrict__ lse, const float* __restrict__ dd, void* dqkv, int dqdt, int T, int H, int hd,
              float scale, bool vec) {
  static_assert(STAGES >= 3, "tile j+1 lands while tile j is multiplied, tile j-1's stage refills");
  constexpr int NT = NWG * 128, kBlockRows = NWG * 64;
  (void)hd, (void)vec;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t qs = (smem_addr(smem) + 1023u) & ~1023u;
  const uint32_t ys = qs + kBlockRows * 128, ks = ys + kBlockRows * 128, vs = ks + STAGES * kTileBytes;
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kBlockRows;  // heaviest first
  const int D = H * kHd;
  const int64_t ld = 3LL * D;
  const __nv_bfloat16* base = qkv + int64_t(b) * T * ld + int64_t(h) * kHd;
  const __nv_bfloat16* dbase = dy + int64_t(b) * T * D + int64_t(h) * kHd;
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  const int warp = __shfl_sync(0xffffffffu, int(threadIdx.x) / 32, 0) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int ntiles = (min(q0 + kBlockRows, T) + 63) / 64;  // key tiles of the block
  const int wr0 = q0 + wg * 64;                            // this warpgroup's first query
  // Its key tiles 0 .. nw-1; the last, wr0 / 64, is the diagonal one (the only one masked; keys
  // past T in it are right of every row below T, so masked too).
  const int nw = wr0 < T ? wr0 / 64 + 1 : 0;
  const float scale_log2 = scale * kLog2e;

  const TileLoader<64, NT> kl(base + D, ld);
  auto load_kv = [&](int t) {
    if (t < ntiles) {
      const int k0 = t * 64, st = t % STAGES;
      const int64_t off = int64_t(k0) * ld;
      kl.load(ks + st * kTileBytes, off, T - k0);
      kl.load(vs + st * kTileBytes, off + D, T - k0);
    }
    cp_async_commit();
  };
  load_tile<kBlockRows, NT>(qs, base + int64_t(q0) * ld, ld, T - q0);  // join tile 0's group
  load_tile<kBlockRows, NT>(ys, dbase + int64_t(q0) * D, D, T - q0);
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) load_kv(t);

  // -lse log2 e (-inf past T: P = 0 there) and D of this thread's rows wr0 + 16w + g (+8).
  float nl2[2], drow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = wr0 + 16 * warp + g + 8 * r;
    nl2[r] = q < T ? -lse[int64_t(bh) * T + q] * kLog2e : -INFINITY;
    drow[r] = q < T ? dd[int64_t(bh) * T + q] : 0.0f;
  }

  const uint32_t dQ = desc_lo(qs + wg * 64 * 128), dY = desc_lo(ys + wg * 64 * 128);
  const uint32_t dK = desc_lo(ks), dV = desc_lo(vs);
  struct SDesc {
    uint64_t q[4], k[4], y[4], v[4];
  };
  struct GDesc {
    uint64_t k[4];
  };
  auto s_desc = [&](int j) {
    SDesc d;
    const uint32_t st = (j % STAGES) * (kTileBytes >> 4);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      d.q[kk] = desc_of(dQ + 2 * kk), d.k[kk] = desc_of(dK + st + 2 * kk);
      d.y[kk] = desc_of(dY + 2 * kk), d.v[kk] = desc_of(dV + st + 2 * kk);
    }
    return d;
  };
  auto g_desc = [&](int j) {
    GDesc d;
    const uint32_t st = (j % STAGES) * (kTileBytes >> 4);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) d.k[kk] = desc_of(dK + st + 128 * kk);
    return d;
  };

  float dq[32], s[32], dp[32];
  uint32_t da[16];
#pragma unroll
  for (int i = 0; i < 32; ++i) dq[i] = 0.0f;
  // dS of a key tile from S (s) and dP (dp), into dp. MASK (the diagonal tile, first key = first
  // row): key column 8i + 2t + (e&1) > row 16w + g + 8(e>>1) dropped.
  const int lim = 16 * warp + g - 2 * t4;
  auto grads = [&](auto mask) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = ex2(fmaf(s[4 * i + e], scale_log2, nl2[e >> 1]));
        if constexpr (decltype(mask)::value)
          if (i * 8 + (e & 1) > lim + 8 * (e >> 1)) p = 0.0f;
        dp[4 * i + e] = p * (dp[4 * i + e] - drow[e >> 1]);
      }
  };
  auto issue_sdp = [&](const SDesc& d) {
    mma_abt(s, d.q, d.k);
    mma_abt(dp, d.y, d.v);
    wg_commit();
  };
  auto issue_grad = [&](const GDesc& d) {
    mma_pb(dq, da, d.k);
    wg_commit();
  };

  for (int j = 0; j < ntiles; ++j) {
    attn::cp_async_wait<STAGES - 3>();
    fence_async_smem();
    __syncthreads();
    load_kv(j + STAGES - 1);
    if (j >= nw) continue;  // warpgroup-uniform
    if (!PIPE) {  // no overlap inside the warpgroup
      const SDesc d = s_desc(j);
      pin(dq);
      wg_fence();
      issue_sdp(d);
      wg_wait<0>();
      pin(s);
      pin(dp);
      if (j + 1 == nw)
        grads(std::true_type{});
      else
        grads(std::false_type{});
      pack_a(da, dp);
      const GDesc dg = g_desc(j);
      wg_fence();
      issue_grad(dg);
      wg_wait<0>();
      pin(dq);
      pin(da);
      continue;
    }
    if (j == 0) {
      const SDesc d0 = s_desc(0);
      wg_fence();
      issue_sdp(d0);
      wg_wait<0>();
      pin(s);
      pin(dp);
      if (nw == 1)
        grads(std::true_type{});
      else
        grads(std::false_type{});
    }
    pack_a(da, dp);
    const GDesc dg = g_desc(j);
    if (j + 1 < nw) {
      const SDesc dn = s_desc(j + 1);
      pin(dq);
      pin(da);
      wg_fence();
      issue_sdp(dn);
      issue_grad(dg);
      wg_wait<1>();
      pin(s);
      pin(dp);
      if (j + 2 == nw)
        grads(std::true_type{});
      else
        grads(std::false_type{});
      wg_wait<0>();
      pin(dq);
      pin(da);
    } else {
      pin(dq);
      pin(da);
      wg_fence();
      issue_grad(dg);
      wg_wait<0>();
      pin(dq);
      pin(da);
    }
  }
  if (nw == 0) return;
  store_rows(dqkv, dqdt, dq, {scale, scale}, int64_t(b) * T, wr0 + 16 * warp + g, T, ld, int64_t(h) * kHd, t4);
}

// ------------------------------------------------------------------------------------------------
// Configurations and launchers (same arguments as bwd_dkv_tc / bwd_dq_tc less hd and vec, plus B:
// hd must be 64, rows 16-byte aligned, sm_90a; the caller keeps the mma.sync kernels otherwise).
// Both are bit-identical to the mma.sync kernels on the lab's shapes (T 1, 77, 200, 256, 1024).
// Tuned on an H200 (wgmma_bwd_lab, medians of 21; char-gpt2 B16 T1024 H12 / B64 T256 H6):
//   dK/dV: 1 warpgroup (64 keys) x 2 blocks per SM, 4 stages (99 KB smem, 214 registers), the
//     overlapped loop (PIPE): 0.163-0.165 / 0.048-0.050 ms against bwd_dkv_tc's 0.311 / 0.102.
//     Measured and slower: 3 stages 0.170-0.172 / 0.050; 2 warpgroups x 1 block (212 registers)
//     0.182 / 0.054; serial loop (!PIPE) 1 wg x 2 blocks (181 registers) 0.167 / 0.051; serial
//     3 wg x 1 block (168 registers, 12 warps) 0.175 / 0.058. Overlapped 3 wg x 1 block does not
//     fit 168 registers (spills, wgmma serialized).
//   dQ: 2 warpgroups (128 queries) x 2 blocks per SM, 3 stages (81 KB, 124 registers), the serial
//     loop: 0.104-0.106 / 0.032-0.033 ms against bwd_dq_tc's 0.195 / 0.059. Measured: overlapped
//     1 wg x 3 blocks (145 registers) 0.115 / 0.033; overlapped 2 wg x 1 block 0.138-0.140 /
//     0.042; serial 2 wg x 2 blocks 4 stages 0.105 / 0.033; serial 1 wg x 3 blocks 0.116 / 0.033;
//     serial 4 wg x 1 block 0.124 / 0.042. Overlapped 2 wg x 2 blocks needs > 128 registers.
// Together 0.27 ms against 0.51 (mma.sync) and cuDNN's ~0.23 at the char-gpt2 shape.
constexpr int kDkvWarpgroups = 1, kDkvStages = 4, kDkvMinBlocks = 2;
constexpr bool kDkvPipe = true;
constexpr int kDqWarpgroups = 2, kDqStages = 3, kDqMinBlocks = 2;
constexpr bool kDqPipe = false;
inline auto dkv_kernel() { return bwd_dkv_wg<kDkvWarpgroups, kDkvStages, kDkvMinBlocks, kDkvPipe>; }
inline auto dq_kernel() { return bwd_dq_wg<kDqWarpgroups, kDqStages, kDqMinBlocks, kDqPipe>; }
constexpr int kDkvSmem = dkv_smem_bytes(kDkvWarpgroups, kDkvStages);
constexpr int kDqSmem = dq_smem_bytes(kDqWarpgroups, kDqStages);

// Grids of dkv_kernel() (key tiles) and dq_kernel() (query tiles), heaviest first inside the kernels.
inline dim3 dkv_grid(int B, int H, int T) {
  return dim3(unsigned(B * H), unsigned((T + kDkvWarpgroups * 64 - 1) / (kDkvWarpgroups * 64)));
}
inline dim3 dq_grid(int B, int H, int T) {
  return dim3(unsigned(B * H), unsigned((T + kDqWarpgroups * 64 - 1) / (kDqWarpgroups * 64)));
}

// The dev harnesses' launcher (tools/wgmma_lab; the current device only): the lab launches through
// attention_wgmma.cu, which checks the GPU and sets the shared-memory opt-in per device.
inline cudaError_t launch_bwd_dkv(const __nv_bfloat16* qkv, const __nv_bfloat16* dy, const float* lse,
                                  const float* dd, void* dqkv, int dqdt, int B, int T, int H, float scale,
                                  cudaStream_t stream = 0) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(dkv_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, kDkvSmem);
  if (attr != cudaSuccess) return attr;
  dkv_kernel()<<<dkv_grid(B, H, T), kDkvWarpgroups * 128, kDkvSmem, stream>>>(qkv, dy, lse, dd, dqkv, dqdt, T, H, 64, scale, true);
  return cudaGetLastError();
}
inline cudaError_t launch_bwd_dq(const __nv_bfloat16* qkv, const __nv_bfloat16* dy, const float* lse,
                                 const float* dd, void* dqkv, int dqdt, int B, int T, int H, float scale,
                                 cudaStream_t stream = 0) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(dq_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, kDqSmem);
  if (attr != cudaSuccess) return attr;
  dq_kernel()<<<dq_grid(B, H, T), kDqWarpgroups * 128, kDqSmem, stream>>>(qkv, dy, lse, dd, dqkv, dqdt, T, H, 64, scale, true);
  return cudaGetLastError();
}

}  // namespace trainlab::kern::attn_wg
