// kernels/attention_tc.cuh: the tensor-core attention kernels (bf16 / fp16; fp32 inputs as tf32 in
// tf32 mode, as 3xTF32 otherwise); device code, included only by attention.cu (see attention.cuh;
// the mma, ldmatrix, cp.async and tile pieces they are built from are in attention_tiles.cuh).
//
// A block is 4 warps; a warp owns 16 rows (query rows in the dQ kernel, key rows in the dK/dV
// kernel; in the forward 32 query rows up to hd 64), so a block covers 64 (forward: 128) rows.
// The other operand streams through shared memory in tiles (64 keys, or NQ queries), two stages
// deep with cp.async so the next tile loads while this one is multiplied. The softmax work per
// score is one FFMA and one ex2; causal masks apply only in the tiles on the diagonal.
#pragma once
#include "attention_tiles.cuh"

namespace trainlab::kern::attn {

constexpr int kRows = 16 * kWarps;  // rows a backward block owns (16 per warp)
constexpr int kKeys = 64;           // keys per streamed tile (forward, dQ)
// Resident blocks per multiprocessor the compiler budgets registers for (launch bounds): three
// for the 16-bit kernels up to hd 64 (168 registers: 12 warps per SM hide the mma and ex2 latency
// better than 8 warps of 184-226 registers; H200, char-gpt2 shape: forward 0.27 -> 0.17 ms,
// backward 0.84 -> 0.50 ms with the lean softmax loops below), one elsewhere (the fp32 splits and
// hd 128 need their registers).
template <typename E, int HDP>
constexpr int min_blocks() {
  return sizeof(E) == 2 && HDP <= 64 ? 3 : 1;
}

// Forward rows per warp: 32 (two m16 tiles sharing each K / V fragment) up to hd 64; 16 at hd 128,
// where two tiles' accumulators would not fit in registers.
template <int HDP>
constexpr int fwd_mt() {
  return HDP >= 128 ? 1 : 2;
}
template <int HDP>
constexpr int fwd_rows() {
  return kWarps * 16 * fwd_mt<HDP>();
}

// Forward: block = fwd_rows query rows of one (batch, head); grid (B*H, query tiles), heaviest
// first. The scores stay unscaled until the exponent: the row max is taken over raw scores (the
// scale is positive), and p = 2^(s * scale log2 e - max * scale log2 e) is one FFMA and one ex2.
template <typename E, int HDP>
__global__ void __launch_bounds__(kThreads, min_blocks<E, HDP>()) fwd_tc(const E* __restrict__ qkv, void* y, int ydt, float* __restrict__ lse,
                                                   int T, int H, int hd, float scale_log2, bool vec) {
  constexpr int kLds = HDP + kPad<E>, MT = fwd_mt<HDP>(), kBlockRows = fwd_rows<HDP>();
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);
  E* ks = qs + kBlockRows * kLds;  // 2 stages
  E* vs = ks + 2 * kKeys * kLds;   // 2 stages
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int D = H * hd;
  const int64_t ld = 3LL * D;
  const E* base = qkv + int64_t(b) * T * ld + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ntiles = (min(q0 + kBlockRows, T) + kKeys - 1) / kKeys;

  load_tile<E, HDP, kBlockRows>(qs, base + q0 * ld, ld, T - q0, hd, vec);
  load_tile<E, HDP, kKeys>(ks, base + D, ld, T, hd, vec);
  load_tile<E, HDP, kKeys>(vs, base + 2 * D, ld, T, hd, vec);
  cp_async_commit();

  float o[MT][HDP / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < HDP / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
  // Running max (scaled, base 2) and sum of this thread's rows: row (mt, r) is r0 + 16 mt + 8 r.
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
  const int wrow = q0 + warp * 16 * MT, r0 = wrow + lane / 4;
  for (int j = 0; j < ntiles; ++j) {
    if (j + 1 < ntiles) {
      const int stage = (j + 1) & 1, k0 = (j + 1) * kKeys;
      load_tile<E, HDP, kKeys>(ks + stage * kKeys * kLds, base + k0 * ld + D, ld, T - k0, hd, vec);
      load_tile<E, HDP, kKeys>(vs + stage * kKeys * kLds, base + k0 * ld + 2 * D, ld, T - k0, hd, vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (j == 0) round_rows<E, HDP>(qs, kBlockRows, vec);
    round_rows<E, HDP>(ks + (j & 1) * kKeys * kLds, kKeys, vec);
    round_rows<E, HDP>(vs + (j & 1) * kKeys * kLds, kKeys, vec);
    __syncthreads();
    const E* kt = ks + (j & 1) * kKeys * kLds;
    const E* vt = vs + (j & 1) * kKeys * kLds;
    float s[MT][kKeys / 8][4];
    warp_abt<E, HDP, kKeys, MT>(qs + warp * 16 * MT * kLds, kt, s, lane);
    // Causal mask, only in tiles that reach past this warp's first row (a warp-uniform branch):
    // key j*kKeys + 8n + 2(lane%4) + (e&1) > row r0 + 16mt + 8(e>>1). Keys past T sit right of
    // every row below T, so the causal test drops them too (rows past T are never stored).
    if ((j + 1) * kKeys > wrow + 1) {
      const int lim = r0 - j * kKeys - 2 * (lane % 4);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (n * 8 + (e & 1) > lim + 16 * mt + 8 * (e >> 1)) s[mt][n][e] = -INFINITY;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][n][e]);
      float nb[2], alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mnew = fmaxf(m[mt][r], mx[r] * scale_log2);
        const float base2 = mnew == -INFINITY ? 0.0f : mnew;
        alpha[r] = ex2(m[mt][r] - base2);
        m[mt][r] = mnew;
        l[mt][r] *= alpha[r];
        nb[r] = -base2;
      }
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = ex2(fmaf(s[mt][n][e], scale_log2, nb[e >> 1]));
          s[mt][n][e] = p;
          l[mt][e >> 1] += p;
        }
#pragma unroll
      for (int n = 0; n < HDP / 8; ++n) {
        o[mt][n][0] *= alpha[0], o[mt][n][1] *= alpha[0];
        o[mt][n][2] *= alpha[1], o[mt][n][3] *= alpha[1];
      }
    }
    warp_pb<E, HDP, kKeys, MT>(s, vt, o, lane);
    __syncthreads();  // stage j & 1 is refilled at the next iteration's prefetch
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int q = r0 + 16 * mt + 8 * r;
      if (q >= T) continue;
      const float inv = 1.0f / sum;
      const int64_t yrow = (int64_t(b) * T + q) * D + int64_t(h) * hd;
#pragma unroll
      for (int n = 0; n < HDP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = n * 8 + 2 * (lane % 4) + e;
          if (c < hd) st(y, yrow + c, ydt, o[mt][n][2 * r + e] * inv);
        }
      if (lane % 4 == 0) lse[int64_t(bh) * T + q] = (m[mt][r] + log2f(sum)) * kLn2;
    }
}

// Backward, dQ: block = 64 query rows; streams the key tiles at or left of the diagonal,
// recomputing P = exp(s - lse) and dS = P (dy v^T - D), and accumulates dQ = dS K.
template <typename E, int HDP>
__global__ void __launch_bounds__(kThreads, min_blocks<E, HDP>()) bwd_dq_tc(const E* __restrict__ qkv, const E* __restrict__ dy,
                                                                          const float* __restrict__ lse,
                                                                          const float* __restrict__ dd, void* dqkv,
                                                                          int dqdt, int T, int H, int hd, float scale,
                                                                          bool vec) {
  constexpr int kLds = HDP + kPad<E>;
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);
  E* dos = qs + kRows * kLds;
  E* ks = dos + kRows * kLds;     // 2 stages
  E* vs = ks + 2 * kKeys * kLds;  // 2 stages
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kRows;
  const int D = H * hd;
  const int64_t ld = 3LL * D;
  const E* base = qkv + int64_t(b) * T * ld + int64_t(h) * hd;
  const E* dbase = dy + int64_t(b) * T * D + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ntiles = (min(q0 + kRows, T) + kKeys - 1) / kKeys;
  const float scale_log2 = scale * kLog2e;

  load_tile<E, HDP, kRows>(qs, base + q0 * ld, ld, T - q0, hd, vec);
  load_tile<E, HDP, kRows>(dos, dbase + int64_t(q0) * D, D, T - q0, hd, vec);
  load_tile<E, HDP, kKeys>(ks, base + D, ld, T, hd, vec);
  load_tile<E, HDP, kKeys>(vs, base + 2 * D, ld, T, hd, vec);
  cp_async_commit();

  const int wrow = q0 + warp * 16, r0 = wrow + lane / 4;
  float nl2[2], drow[2];  // -lse log2 e (-inf past T: P = 0 there) and D of rows r0, r0 + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = r0 + 8 * r;
    nl2[r] = q < T ? -lse[int64_t(bh) * T + q] * kLog2e : -INFINITY;
    drow[r] = q < T ? dd[int64_t(bh) * T + q] : 0.0f;
  }
  float dq[HDP / 8][4];
#pragma unroll
  for (int n = 0; n < HDP / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  for (int j = 0; j < ntiles; ++j) {
    if (j + 1 < ntiles) {
      const int stage = (j + 1) & 1, k0 = (j + 1) * kKeys;
      load_tile<E, HDP, kKeys>(ks + stage * kKeys * kLds, base + k0 * ld + D, ld, T - k0, hd, vec);
      load_tile<E, HDP, kKeys>(vs + stage * kKeys * kLds, base + k0 * ld + 2 * D, ld, T - k0, hd, vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (j == 0) {
      round_rows<E, HDP>(qs, kRows, vec);
      round_rows<E, HDP>(dos, kRows, vec);
    }
    round_rows<E, HDP>(ks + (j & 1) * kKeys * kLds, kKeys, vec);
    round_rows<E, HDP>(vs + (j & 1) * kKeys * kLds, kKeys, vec);
    __syncthreads();
    const E* kt = ks + (j & 1) * kKeys * kLds;
    const E* vt = vs + (j & 1) * kKeys * kLds;
    float s[kKeys / 8][4], dp[kKeys / 8][4];
    warp_abt<E, HDP, kKeys>(qs + warp * 16 * kLds, kt, s, lane);
    warp_abt<E, HDP, kKeys>(dos + warp * 16 * kLds, vt, dp, lane);
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = ex2(fmaf(s[n][e], scale_log2, nl2[e >> 1]));
    // Causal mask in tiles that reach past this warp's first row (warp-uniform): key
    // j*kKeys + 8n + 2(lane%4) + (e&1) > row r0 + 8(e>>1). Keys past T are right of every row
    // below T; rows past T have P = 0 already.
    if ((j + 1) * kKeys > wrow + 1) {
      const int lim = r0 - j * kKeys - 2 * (lane % 4);
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (n * 8 + (e & 1) > lim + 8 * (e >> 1)) s[n][e] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= dp[n][e] - drow[e >> 1];
    warp_pb<E, HDP, kKeys>(s, kt, dq, lane);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = r0 + 8 * r;
    if (q >= T) continue;
    const int64_t row = (int64_t(b) * T + q) * ld + int64_t(h) * hd;
#pragma unroll
    for (int n = 0; n < HDP / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * (lane % 4) + e;
        if (c < hd) st(dqkv, row + c, dqdt, dq[n][2 * r + e] * scale);
      }
  }
}

// Backward, dK and dV: block = 64 keys (16 per warp), grid (B*H, key tiles), heaviest first;
// streams the query tiles (NQ rows) at or below the diagonal: S^T = K Q^T, P^T, dP^T = V dY^T, dS^T; dV += P^T dY, dK += dS^T Q.
// lse and D of each query tile come in by cp.async next to its rows (zeros past T, where the q and
// dy rows are zeros too, so those queries add nothing: dv += P 0, dS = P (0 - 0)).
template <typename E, int HDP, int NQ>
__global__ void __launch_bounds__(kThreads, min_blocks<E, HDP>()) bwd_dkv_tc(const E* __restrict__ qkv, const E* __restrict__ dy,
                                                                           const float* __restrict__ lse,
                                                                           const float* __restrict__ dd, void* dqkv,
                                                                           int dqdt, int T, int H, int hd, float scale,
                                                                           bool vec) {
  constexpr int kLds = HDP + kPad<E>;
  static_assert(2 * NQ <= kThreads, "one thread per lse / D value of a query tile");
  extern __shared__ __align__(16) unsigned char smem[];
  E* ks = reinterpret_cast<E*>(smem);
  E* vs = ks + kRows * kLds;
  E* qs = vs + kRows * kLds;     // 2 stages
  E* dos = qs + 2 * NQ * kLds;   // 2 stages
  float* ls = reinterpret_cast<float*>(dos + 2 * NQ * kLds);  // 2 stages of lse
  float* ds = ls + 2 * NQ;                                     // 2 stages of D
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int k0 = int(blockIdx.y) * kRows;  // the most query tiles first (key block 0 sees them all)
  const int D = H * hd;
  const int64_t ld = 3LL * D;
  const E* base = qkv + int64_t(b) * T * ld + int64_t(h) * hd;
  const E* dbase = dy + int64_t(b) * T * D + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first = k0 / NQ, last = (T + NQ - 1) / NQ;  // query tiles [first, last)
  const float scale_log2 = scale * kLog2e;

  auto load_queries = [&](int it, int st) {
    const int qa = it * NQ;
    load_tile<E, HDP, NQ>(qs + st * NQ * kLds, base + qa * ld, ld, T - qa, hd, vec);
    load_tile<E, HDP, NQ>(dos + st * NQ * kLds, dbase + int64_t(qa) * D, D, T - qa, hd, vec);
    const int i = threadIdx.x % NQ, q = qa + i;
    if (threadIdx.x < 2 * NQ) {
      const float* src = threadIdx.x < NQ ? lse : dd;
      float* dst = threadIdx.x < NQ ? ls : ds;
      cp_async4_zfill(dst + st * NQ + i, src + int64_t(bh) * T + min(q, T - 1), q < T);
    }
  };
  load_tile<E, HDP, kRows>(ks, base + k0 * ld + D, ld, T - k0, hd, vec);
  load_tile<E, HDP, kRows>(vs, base + k0 * ld + 2 * D, ld, T - k0, hd, vec);
  load_queries(first, 0);
  cp_async_commit();

  float dk[HDP / 8][4], dv[HDP / 8][4];
#pragma unroll
  for (int n = 0; n < HDP / 8; ++n) {
    dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.0f;
    dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
  }
  const int wkey = k0 + warp * 16, kr = wkey + lane / 4;  // this thread's keys: kr and kr + 8
  const int qoff = 2 * (lane % 4);                          // its query columns: 8n + qoff + (0, 1)
  for (int it = first; it < last; ++it) {
    const int j = it - first;
    if (it + 1 < last) {
      load_queries(it + 1, (j + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (it == first) {
      round_rows<E, HDP>(ks, kRows, vec);
      round_rows<E, HDP>(vs, kRows, vec);
    }
    round_rows<E, HDP>(qs + (j & 1) * NQ * kLds, NQ, vec);
    round_rows<E, HDP>(dos + (j & 1) * NQ * kLds, NQ, vec);
    __syncthreads();
    const E* qt = qs + (j & 1) * NQ * kLds;
    const E* dot = dos + (j & 1) * NQ * kLds;
    const float* lt = ls + (j & 1) * NQ + qoff;
    const float* dtile = ds + (j & 1) * NQ + qoff;
    float s[NQ / 8][4], dp[NQ / 8][4];
    warp_abt<E, HDP, NQ>(ks + warp * 16 * kLds, qt, s, lane);
    warp_abt<E, HDP, NQ>(vs + warp * 16 * kLds, dot, dp, lane);
#pragma unroll
    for (int n = 0; n < NQ / 8; ++n) {
      const float2 lv = *reinterpret_cast<const float2*>(lt + 8 * n);
      const float nl[2] = {-lv.x * kLog2e, -lv.y * kLog2e};
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = ex2(fmaf(s[n][e], scale_log2, nl[e & 1]));
    }
    // Causal mask in query tiles that start before this warp's last key (warp-uniform): query
    // it*NQ + 8n + qoff + (e&1) < key kr + 8(e>>1).
    if (it * NQ < wkey + 15) {
      const int lim = kr - it * NQ - qoff;
#pragma unroll
      for (int n = 0; n < NQ / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (n * 8 + (e & 1) < lim + 8 * (e >> 1)) s[n][e] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < NQ / 8; ++n) {
      const float2 dv2 = *reinterpret_cast<const float2*>(dtile + 8 * n);
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - ((e & 1) ? dv2.y : dv2.x));
    }
    warp_pb<E, HDP, NQ>(s, dot, dv, lane);
    warp_pb<E, HDP, NQ>(dp, qt, dk, lane);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = kr + 8 * r;
    if (key >= T) continue;
    const int64_t row = (int64_t(b) * T + key) * ld + int64_t(h) * hd;
#pragma unroll
    for (int n = 0; n < HDP / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * (lane % 4) + e;
        if (c < hd) {
          st(dqkv, row + D + c, dqdt, dk[n][2 * r + e] * scale);
          st(dqkv, row + 2 * D + c, dqdt, dv[n][2 * r + e]);
        }
      }
  }
}

}  // namespace trainlab::kern::attn
