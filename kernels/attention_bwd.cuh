// kernels/attention_bwd.cuh: the fused tensor-core attention backward (one kernel for dQ, dK and
// dV, FlashAttention-2 style); device code, included only by attention.cu (see attention.cuh and,
// for the tiles and fragment layouts it shares, attention_tc.cuh).
//
// Block = 64 keys of one (batch, head) (16 per warp); it streams the 64-row query tiles at or
// below the diagonal and per tile computes S^T = K Q^T, dP^T = V dY^T, P^T and dS^T in registers,
// accumulates dV += P^T dY and dK += dS^T Q in registers, writes dS (rounded as the products use
// it) to shared memory and forms the tile's dQ partial dS K (16 query rows per warp). Five
// matmul units per tile instead of the seven of separate dQ and dK/dV kernels (which both rebuild
// S and dP).
//
// Deterministic dQ: the partials of query tile q come from key blocks kb = q, q - 1, ..., 0 and
// are summed in exactly that order into an fp32 accumulator [bh][T][HDP] in global memory (L2):
// block kb waits until the tile's counter says q - kb partials are in (acquire), adds its own
// (plain loads and stores, no atomics), and bumps the counter (release). Counters are per warp
// (each warp owns 16 rows of the tile), so the handshake never stalls the whole block. Block q, the diagonal,
// writes the first partial without waiting; block 0 adds the last one and stores dQ (times the
// scale, in the output format) straight into dqkv. Blocks iterate their query tiles upward, so
// block kb reaches tile q one step after block kb + 1 did: the chain never stalls when both run.
// Deadlock freedom: a block only waits on the block with the next-higher kb of the same head,
// which has the lower linear block index (grid x = key blocks in descending order, y = heads),
// and blocks are dispatched in linear index order, so the block waited on is already running or
// done. The counters are zeroed (cudaMemsetAsync) before each launch.
#pragma once
#include "attention_tc.cuh"

namespace trainlab::kern::attn {

constexpr int kBwdTile = 64;  // keys per block = query rows per streamed tile

// Q / dY tiles in flight: two for 16-bit (the next tile loads during this one), one for fp32
// (the shared memory of a second would leave one block per SM).
template <typename E>
constexpr int bwd_stages() {
  return sizeof(E) == 2 ? 2 : 1;
}
// Row stride (elements) of the dS tile [64 queries][64 keys]: conflict-free ldmatrix rows (16-bit)
// and tf32 fragment reads (fp32).
template <typename E>
constexpr int ds_lds() {
  return kBwdTile + kPad<E>;
}

// dS as the dQ product uses it: rounded to the input format (16-bit), to tf32 (tf32 mode), or
// kept fp32 for 3xTF32 (split into two tf32 parts when read).
template <typename E>
__device__ __forceinline__ E ds_elem(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 ds_elem<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half ds_elem<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ float ds_elem<float>(float x) {
  return tf32_round(x);
}
template <>
__device__ __forceinline__ F32x3 ds_elem<F32x3>(float x) {
  return F32x3{x};
}

// o (16 x HDP) = A (16 rows x NK at a, row stride lda) times B (NK rows x HDP at b, row stride
// HDP + kPad), both in shared memory: A by ldmatrix, B by ldmatrix.trans (16-bit); tf32 fragments
// in the natural k order (fp32).
template <typename E, int HDP, int NK>
__device__ __forceinline__ void warp_ab(const E* a, int lda, const E* b, float (&o)[HDP / 8][4], int lane) {
  constexpr int kLds = HDP + kPad<E>;
#pragma unroll
  for (int n = 0; n < HDP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  if constexpr (sizeof(E) == 4) {
    constexpr bool kX3 = std::is_same_v<E, F32x3>;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < NK / 8; ++kk) {
      uint32_t af[4], al[4];
      const E* ar = a + g * lda + kk * 8 + t;
      split<kX3>(value(ar[0]), af[0], al[0]);
      split<kX3>(value(ar[8 * lda]), af[1], al[1]);
      split<kX3>(value(ar[4]), af[2], al[2]);
      split<kX3>(value(ar[8 * lda + 4]), af[3], al[3]);
#pragma unroll
      for (int n = 0; n < HDP / 8; ++n) {
        const E* br = b + (kk * 8 + t) * kLds + n * 8 + g;
        uint32_t b0, b1, l0, l1;
        split<kX3>(value(br[0]), b0, l0);
        split<kX3>(value(br[4 * kLds]), b1, l1);
        if constexpr (kX3) {
          Mma<E>::run(o[n], al, b0, b1);
          Mma<E>::run(o[n], af, l0, l1);
        }
        Mma<E>::run(o[n], af, b0, b1);
      }
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < NK / 16; ++kk) {
      uint32_t af[4];
      ldsm_x4(af, a + (lane % 16) * lda + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int dp = 0; dp < HDP / 16; ++dp) {
        uint32_t bf[4];
        ldsm_x4_t(bf, b + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kLds + dp * 16 + (lane / 16) * 8);
        Mma<E>::run(o[2 * dp], af, bf[0], bf[1]);
        Mma<E>::run(o[2 * dp + 1], af, bf[2], bf[3]);
      }
    }
  }
}

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Shared-memory bytes of bwd_fused_tc: K, V, the Q and dY stages, the dS tile, lse and D stages.
template <typename E, int HDP>
constexpr size_t bwd_fused_bytes() {
  return size_t(2 + 2 * bwd_stages<E>()) * kBwdTile * (HDP + kPad<E>) * sizeof(E) +
         size_t(kBwdTile) * ds_lds<E>() * sizeof(E) + 2 * bwd_stages<E>() * kBwdTile * sizeof(float);
}

// grid (key blocks, heads of this launch): key block kb = gridDim.x - 1 - blockIdx.x, head
// bh = bh0 + blockIdx.y; acc [gridDim.y][T][HDP] fp32 and sem [gridDim.y][key blocks][kWarps]
// (zeroed) belong to this launch's heads.
template <typename E, int HDP>
__global__ void __launch_bounds__(kThreads) bwd_fused_tc(const E* __restrict__ qkv, const E* __restrict__ dy,
                                                         const float* __restrict__ lse, const float* __restrict__ dd,
                                                         void* dqkv, int dqdt, float* acc, int* sem, int bh0, int T,
                                                         int H, int hd, float scale, bool vec) {
  constexpr int kLds = HDP + kPad<E>, NQ = kBwdTile, kSt = bwd_stages<E>(), kDs = ds_lds<E>();
  extern __shared__ __align__(16) unsigned char smem[];
  E* ks = reinterpret_cast<E*>(smem);
  E* vs = ks + kBwdTile * kLds;
  E* qs = vs + kBwdTile * kLds;   // kSt stages
  E* dos = qs + kSt * NQ * kLds;  // kSt stages
  E* dss = dos + kSt * NQ * kLds;
  float* ls = reinterpret_cast<float*>(dss + NQ * kDs);  // kSt stages of lse * log2 e
  float* ds = ls + kSt * NQ;                              // kSt stages of D
  const int nt = gridDim.x, kb = nt - 1 - blockIdx.x, bhl = blockIdx.y, bh = bh0 + bhl, b = bh / H, h = bh % H;
  const int k0 = kb * kBwdTile;
  const int D = H * hd;
  const int64_t ld = 3LL * D;
  const E* base = qkv + int64_t(b) * T * ld + int64_t(h) * hd;
  const E* dbase = dy + int64_t(b) * T * D + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const float scale_log2 = scale * kLog2e;
  float* acc_bh = acc + int64_t(bhl) * T * HDP;
  int* sem_bh = sem + bhl * nt * kWarps;

  auto load_queries = [&](int it, int sg) {
    const int qa = it * NQ;
    load_rows<E, HDP>(qs + sg * NQ * kLds, base + qa * ld, ld, NQ, T - qa, hd, vec);
    load_rows<E, HDP>(dos + sg * NQ * kLds, dbase + int64_t(qa) * D, D, NQ, T - qa, hd, vec);
    for (int i = threadIdx.x; i < NQ; i += kThreads) {
      const int q = qa + i;
      ls[sg * NQ + i] = q < T ? lse[int64_t(bh) * T + q] * kLog2e : INFINITY;
      ds[sg * NQ + i] = q < T ? dd[int64_t(bh) * T + q] : 0.0f;
    }
  };
  load_rows<E, HDP>(ks, base + k0 * ld + D, ld, kBwdTile, T - k0, hd, vec);
  load_rows<E, HDP>(vs, base + k0 * ld + 2 * D, ld, kBwdTile, T - k0, hd, vec);
  load_queries(kb, 0);
  cp_async_commit();

  float dk[HDP / 8][4], dv[HDP / 8][4];
#pragma unroll
  for (int n = 0; n < HDP / 8; ++n) {
    dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.0f;
    dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
  }
  const int kr = k0 + warp * 16 + g;  // this thread's keys: kr and kr + 8
  for (int it = kb; it < nt; ++it) {
    const int j = it - kb, stg = kSt == 2 ? (j & 1) : 0;
    if (kSt == 2 && it + 1 < nt) {
      load_queries(it + 1, (j + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (it == kb) {
      round_rows<E, HDP>(ks, kBwdTile, vec);
      round_rows<E, HDP>(vs, kBwdTile, vec);
    }
    round_rows<E, HDP>(qs + stg * NQ * kLds, NQ, vec);
    round_rows<E, HDP>(dos + stg * NQ * kLds, NQ, vec);
    __syncthreads();
    const E* qt = qs + stg * NQ * kLds;
    const E* dot = dos + stg * NQ * kLds;
    const float* lt = ls + stg * NQ;
    const float* drow = ds + stg * NQ;
    {
      float s[NQ / 8][4], dp[NQ / 8][4];
      warp_abt<E, HDP, NQ>(ks + warp * 16 * kLds, qt, s, lane);
      warp_abt<E, HDP, NQ>(vs + warp * 16 * kLds, dot, dp, lane);
      // The causal mask (and rows past T) only touch the diagonal tile and the last one.
      const bool masked = it == kb || (it + 1) * NQ > T;
#pragma unroll
      for (int n = 0; n < NQ / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = n * 8 + 2 * t4 + (e & 1), q = it * NQ + ql, key = kr + (e >> 1) * 8;
          const float p = (masked && (q < key || q >= T)) ? 0.0f : exp2f(s[n][e] * scale_log2 - lt[ql]);
          s[n][e] = p;
          dp[n][e] = p * (dp[n][e] - drow[ql]);
          // dS^T (key, query) -> dS tile [query][key]
          dss[ql * kDs + warp * 16 + g + (e >> 1) * 8] = ds_elem<E>(dp[n][e]);
        }
      warp_pb<E, HDP, NQ>(s, dot, dv, lane);
      warp_pb<E, HDP, NQ>(dp, qt, dk, lane);
    }
    __syncthreads();  // dS complete; this stage's Q, dY, lse and D are no longer read
    if (kSt == 1 && it + 1 < nt) {
      load_queries(it + 1, 0);  // lands during the dQ product below
      cp_async_commit();
    }
    float dq[HDP / 8][4];
    warp_ab<E, HDP, kBwdTile>(dss + warp * 16 * kDs, kDs, ks, dq, lane);
    // Ordered accumulation of the tile's dQ (see the top of the file), warp by warp: warp w owns
    // rows 16 w .. 16 w + 15 of the tile and its own counter, so no block barrier waits on it.
    const bool first = it == kb, last = kb == 0;
    int* flag = sem_bh + it * kWarps + warp;
    if (!first) {
      if (lane == 0) {
        // Bounded wait (~2^26 polls, seconds): a broken dispatch-order assumption traps (a launch
        // error the backend reports) instead of hanging the device.
        for (uint32_t polls = 0; ld_acquire(flag) < it - kb; ++polls) {
          if (polls > (1u << 26)) __trap();
          __nanosleep(32);
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = it * NQ + warp * 16 + g + 8 * r;
      if (q >= T) continue;
      float2* arow = reinterpret_cast<float2*>(acc_bh + int64_t(q) * HDP);
      const int64_t orow = (int64_t(b) * T + q) * ld + int64_t(h) * hd;
#pragma unroll
      for (int n = 0; n < HDP / 8; ++n) {
        const int c = n * 8 + 2 * t4;
        float2 v = make_float2(dq[n][2 * r], dq[n][2 * r + 1]);
        if (!first) {
          const float2 prev = __ldcg(arow + c / 2);
          v.x = prev.x + v.x;
          v.y = prev.y + v.y;
        }
        if (!last) {
          __stcg(arow + c / 2, v);
        } else {
          if (c < hd) st(dqkv, orow + c, dqdt, v.x * scale);
          if (c + 1 < hd) st(dqkv, orow + c + 1, dqdt, v.y * scale);
        }
      }
    }
    if (!last) {
      __syncwarp();  // the warp's accumulator rows are stored ...
      if (lane == 0) st_release(flag, it - kb + 1);  // ... before its counter moves (release)
    }
    // No barrier here: the dS tile and this query stage are rewritten only after the next
    // iteration's first barrier, which every warp reaches after its dQ product.
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
        const int c = n * 8 + 2 * t4 + e;
        if (c < hd) {
          st(dqkv, row + D + c, dqdt, dk[n][2 * r + e] * scale);
          st(dqkv, row + 2 * D + c, dqdt, dv[n][2 * r + e]);
        }
      }
  }
}

}  // namespace trainlab::kern::attn
