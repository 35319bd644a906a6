// kernels/attention_tc.cuh: the tensor-core attention kernels (bf16 / fp16; fp32 inputs as tf32 in
// tf32 mode, as 3xTF32 otherwise); device code, included only by attention.cu (see attention.cuh).
//
// Tiles: a block is 4 warps; a warp owns 16 rows (query rows in the dQ kernel, key rows in the
// dK/dV kernel; in the forward 32 query rows up to hd 64), so a block covers 64 (forward: 128)
// rows. The other operand streams through shared
// memory in tiles (64 keys, or NQ queries), two stages deep with cp.async so the next tile loads
// while this one is multiplied. 16-bit products are mma.sync m16n8k16 (fp32 accumulators) with
// operands from shared memory by ldmatrix (.trans for the row-major B operands of P V, dS K, P^T dO
// and dS^T Q); the probabilities go from accumulator registers straight to A fragments. tf32
// products are m16n8k8 with operands read from shared memory one word per register; in tf32 mode
// each tile is rounded to tf32 (to nearest even, as the CPU) in shared memory once it has landed,
// in fp32 mode it stays fp32 and each operand is split into two tf32 parts (F32x3). For P and dS
// the k index t of an 8-key slice stands for key 2t and t + 4 for key 2t + 1, so a thread's two
// accumulator columns are exactly its A fragment (the B rows are read in the same order).
// Head dims pad to HDP (16, 32, 64 or 128) with zeros in shared memory, which changes no product.
// Shared-memory rows are HDP + 8 (16-bit) or HDP + 4 (fp32) elements long, so that ldmatrix's
// eight 16-byte rows, and the tf32 fragments' 8 rows x 4 words, hit distinct banks.
#pragma once
#include <type_traits>

#include "device_common.cuh"

namespace trainlab::kern::attn {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // rows a backward block owns (16 per warp)
constexpr int kKeys = 64;           // keys per streamed tile (forward, dQ)
constexpr float kLog2e = 1.4426950408889634f;
// Resident blocks per multiprocessor the compiler budgets registers for (launch bounds): three
// for the 16-bit kernels up to hd 64 (168 registers: 12 warps per SM hide the mma and ex2 latency
// better than 8 warps of 184-226 registers; H200, char-gpt2 shape: forward 0.27 -> 0.17 ms,
// backward 0.84 -> 0.50 ms with the lean softmax loops below), one elsewhere (the fp32 splits and
// hd 128 need their registers).
template <typename E, int HDP>
constexpr int min_blocks() {
  return sizeof(E) == 2 && HDP <= 64 ? 3 : 1;
}
constexpr float kLn2 = 0.69314718055994531f;

template <typename E>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};
template <>
struct Mma<float> {  // tf32 inputs, m16n8k8
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
// fp32 inputs in fp32 mode ("3xTF32"): tiles stay fp32 in shared memory and every operand x is
// split into hi = tf32(x) and lo = tf32(x - hi); a b = a_hi b_hi + a_hi b_lo + a_lo b_hi leaves
// out a_lo b_lo (about 2^-22 relative), so the products are as good as fp32 FMAs.
struct F32x3 {
  float v;
};
template <>
struct Mma<F32x3> : Mma<float> {};

// The fp32 value of a shared-memory element (fp32 paths only).
__device__ __forceinline__ float value(float x) { return x; }
__device__ __forceinline__ float value(F32x3 x) { return x.v; }
// x rounded to tf32 by the hardware conversion (to nearest, ties away from zero): one instruction
// where tf32_round takes about seven. Ties decide nothing in a split (lo keeps the exact rest).
__device__ __forceinline__ uint32_t tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
// hi / lo tf32 parts (lo = 0 unless X3; hi is x itself when the tile is already rounded).
template <bool X3>
__device__ __forceinline__ void split(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (X3) {
    hi = tf32_rna(x);
    lo = tf32_rna(x - __uint_as_float(hi));  // exact difference, then rounded
  } else {
    hi = __float_as_uint(x);
    lo = 0u;
  }
}

// Shared-memory row padding (elements) and elements per 16-byte chunk.
template <typename E>
constexpr int kPad = sizeof(E) == 2 ? 8 : 4;
template <typename E>
constexpr int kVec = 16 / static_cast<int>(sizeof(E));

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x by the special-function unit alone (ex2.approx.ftz: ~2 ulp, subnormal results flush to 0,
// 2^-inf = 0), one instruction where exp2f adds a subnormal range fix-up around it.
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}
// 16 bytes when `full`, else 16 zero bytes (nothing read from src).
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(full ? 16 : 0));
}
// 4 bytes when `full`, else 4 zero bytes.
__device__ __forceinline__ void cp_async4_zfill(void* dst, const void* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(full ? 4 : 0));
}

// rows x HDP tile into shared memory (row stride HDP + kPad): row r from g + r * g_ld, zeros for
// r >= valid or columns >= hd. vec: hd % kVec == 0 and 16-byte aligned rows (cp.async).
template <typename E, int HDP>
__device__ __forceinline__ void load_rows(E* sm, const E* g, int64_t g_ld, int rows, int valid, int hd, bool vec) {
  constexpr int kLds = HDP + kPad<E>, kV = kVec<E>;
  if (vec) {
    constexpr int kChunks = HDP / kV;
    for (int idx = threadIdx.x; idx < rows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, ch = idx % kChunks;
      E* dst = sm + r * kLds + ch * kV;
      if (r < valid && ch * kV < hd)
        cp_async16(dst, g + r * g_ld + ch * kV);
      else
        *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  } else {
    using Bits = std::conditional_t<sizeof(E) == 2, uint16_t, uint32_t>;
    Bits* sb = reinterpret_cast<Bits*>(sm);
    const Bits* gb = reinterpret_cast<const Bits*>(g);
    for (int idx = threadIdx.x; idx < rows * HDP; idx += kThreads) {
      const int r = idx / HDP, c = idx % HDP;
      sb[r * kLds + c] = (r < valid && c < hd) ? gb[r * g_ld + c] : Bits(0);
    }
  }
}

// load_rows for a tile of ROWS (compile time) rows: where every row is whole 16-byte chunks
// (vec) and the head fills the padded width (hd == HDP), each thread copies fixed chunks of every
// (kThreads / chunks per row)-th row with no index arithmetic in the loop and zero-fills the rows
// past `valid`; the same element partition as load_rows' vec path (round_rows relies on it).
template <typename E, int HDP, int ROWS>
__device__ __forceinline__ void load_tile(E* sm, const E* g, int64_t g_ld, int valid, int hd, bool vec) {
  constexpr int kLds = HDP + kPad<E>, kV = kVec<E>, kChunks = HDP / kV, kStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0, "a thread's chunk column must be fixed");
  if (!vec || hd != HDP) return load_rows<E, HDP>(sm, g, g_ld, ROWS, valid, hd, vec);
  const int r0 = threadIdx.x / kChunks, ch = threadIdx.x % kChunks;
  const E* src = g + r0 * g_ld + ch * kV;
  E* dst = sm + r0 * kLds + ch * kV;
#pragma unroll
  for (int i = 0; i < (ROWS + kStep - 1) / kStep; ++i) {
    const int r = r0 + i * kStep;
    if (ROWS % kStep == 0 || r < ROWS) {
      const bool in = r < valid;
      cp_async16_zfill(dst + i * kStep * kLds, in ? src + i * kStep * g_ld : g, in);
    }
  }
}

// fp32 tiles: rounds to tf32 the elements this thread loaded by load_rows (the same partition, so
// after cp.async.wait_group they are visible to it), before the barrier that publishes them.
// 16-bit tiles: nothing to do.
template <typename E, int HDP>
__device__ __forceinline__ void round_rows(E* sm, int rows, bool vec) {
  if constexpr (std::is_same_v<E, float>) {
    constexpr int kLds = HDP + kPad<E>, kV = kVec<E>;
    const int step = vec ? kV : 1, per_row = HDP / step;
    for (int idx = threadIdx.x; idx < rows * per_row; idx += kThreads) {
      float* p = sm + (idx / per_row) * kLds + (idx % per_row) * step;
      for (int e = 0; e < step; ++e) p[e] = tf32_round(p[e]);
    }
  }
}

// c[MT][NB/8] (16*MT x NB) = A (this warp's 16*MT rows at a) times B^T (NB rows at b), both
// HDP wide. Every B fragment loaded feeds MT products, which is what more rows per warp buy.
template <typename E, int HDP, int NB, int MT>
__device__ __forceinline__ void warp_abt(const E* a, const E* b, float (&c)[MT][NB / 8][4], int lane) {
  constexpr int kLds = HDP + kPad<E>;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < NB / 8; ++n) c[mt][n][0] = c[mt][n][1] = c[mt][n][2] = c[mt][n][3] = 0.0f;
  if constexpr (sizeof(E) == 4) {  // tf32 m16n8k8: A (g, t), (g+8, t), (g, t+4), (g+8, t+4); B (k t, n g), (k t+4, n g)
    constexpr bool kX3 = std::is_same_v<E, F32x3>;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < HDP / 8; ++kk) {
      uint32_t af[MT][4], al[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const E* ar = a + (mt * 16 + g) * kLds + kk * 8 + t;
        split<kX3>(value(ar[0]), af[mt][0], al[mt][0]);
        split<kX3>(value(ar[8 * kLds]), af[mt][1], al[mt][1]);
        split<kX3>(value(ar[4]), af[mt][2], al[mt][2]);
        split<kX3>(value(ar[8 * kLds + 4]), af[mt][3], al[mt][3]);
      }
#pragma unroll
      for (int n = 0; n < NB / 8; ++n) {
        const E* br = b + (n * 8 + g) * kLds + kk * 8 + t;
        uint32_t b0, b1, l0, l1;
        split<kX3>(value(br[0]), b0, l0);
        split<kX3>(value(br[4]), b1, l1);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (kX3) {
            Mma<E>::run(c[mt][n], al[mt], b0, b1);
            Mma<E>::run(c[mt][n], af[mt], l0, l1);
          }
          Mma<E>::run(c[mt][n], af[mt], b0, b1);
        }
      }
    }
    return;
  } else {
#pragma unroll
  for (int kk = 0; kk < HDP / 16; ++kk) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ldsm_x4(af[mt], a + (mt * 16 + lane % 16) * kLds + kk * 16 + (lane / 16) * 8);
#pragma unroll
    for (int np = 0; np < NB / 16; ++np) {
      uint32_t bf[4];
      ldsm_x4(bf, b + (np * 16 + (lane % 8) + (lane / 16) * 8) * kLds + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Mma<E>::run(c[mt][2 * np], af[mt], bf[0], bf[1]);
        Mma<E>::run(c[mt][2 * np + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
  }
}
template <typename E, int HDP, int NB>
__device__ __forceinline__ void warp_abt(const E* a, const E* b, float (&c)[NB / 8][4], int lane) {
  warp_abt<E, HDP, NB, 1>(a, b, reinterpret_cast<float(&)[1][NB / 8][4]>(c), lane);
}

// o[MT] (16*MT x HDP) += p[MT] (16*MT x NK, accumulator layout, rounded to E) times B (NK rows x
// HDP at b).
template <typename E, int HDP, int NK, int MT>
__device__ __forceinline__ void warp_pb(const float (&p)[MT][NK / 8][4], const E* b, float (&o)[MT][HDP / 8][4],
                                        int lane) {
  constexpr int kLds = HDP + kPad<E>;
  if constexpr (sizeof(E) == 4) {  // tf32: k index t <-> key 2t, t + 4 <-> key 2t + 1 of each 8-key slice
    constexpr bool kX3 = std::is_same_v<E, F32x3>;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < NK / 8; ++kk) {
      uint32_t af[MT][4], al[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {  // P / dS: hi = tf32 (to nearest); lo only used by 3xTF32
        split<true>(p[mt][kk][0], af[mt][0], al[mt][0]);
        split<true>(p[mt][kk][2], af[mt][1], al[mt][1]);
        split<true>(p[mt][kk][1], af[mt][2], al[mt][2]);
        split<true>(p[mt][kk][3], af[mt][3], al[mt][3]);
      }
#pragma unroll
      for (int n = 0; n < HDP / 8; ++n) {
        const E* br = b + (kk * 8 + 2 * t) * kLds + n * 8 + g;
        uint32_t b0, b1, l0, l1;
        split<kX3>(value(br[0]), b0, l0);
        split<kX3>(value(br[kLds]), b1, l1);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (kX3) {
            Mma<E>::run(o[mt][n], al[mt], b0, b1);
            Mma<E>::run(o[mt][n], af[mt], l0, l1);
          }
          Mma<E>::run(o[mt][n], af[mt], b0, b1);
        }
      }
    }
    return;
  } else {
#pragma unroll
  for (int kk = 0; kk < NK / 16; ++kk) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      af[mt][0] = Mma<E>::pack(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      af[mt][1] = Mma<E>::pack(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      af[mt][2] = Mma<E>::pack(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      af[mt][3] = Mma<E>::pack(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < HDP / 16; ++dp) {
      uint32_t bf[4];
      ldsm_x4_t(bf, b + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kLds + dp * 16 + (lane / 16) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Mma<E>::run(o[mt][2 * dp], af[mt], bf[0], bf[1]);
        Mma<E>::run(o[mt][2 * dp + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
  }
}
template <typename E, int HDP, int NK>
__device__ __forceinline__ void warp_pb(const float (&p)[NK / 8][4], const E* b, float (&o)[HDP / 8][4], int lane) {
  warp_pb<E, HDP, NK, 1>(reinterpret_cast<const float(&)[1][NK / 8][4]>(p), b,
                         reinterpret_cast<float(&)[1][HDP / 8][4]>(o), lane);
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
__device__ __forceinline__ void bwd_dq_body(const E* __restrict__ qkv, const E* __restrict__ dy, const float* __restrict__ lse,
                                            const float* __restrict__ dd, void* dqkv, int dqdt, int T, int H, int hd,
                                            float scale, bool vec, int tile, int ntile) {
  constexpr int kLds = HDP + kPad<E>;
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);
  E* dos = qs + kRows * kLds;
  E* ks = dos + kRows * kLds;     // 2 stages
  E* vs = ks + 2 * kKeys * kLds;  // 2 stages
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int q0 = (ntile - 1 - tile) * kRows;
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
__device__ __forceinline__ void bwd_dkv_body(const E* __restrict__ qkv, const E* __restrict__ dy,
                                             const float* __restrict__ lse, const float* __restrict__ dd, void* dqkv,
                                             int dqdt, int T, int H, int hd, float scale, bool vec, int tile) {
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
  const int k0 = tile * kRows;  // the most query tiles first (key block 0 sees them all)
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

// The dQ and dK/dV kernels: one launch each, dK/dV first. (Both kinds of blocks in one launch,
// odd / even grid rows, measured slower on the H200: bf16 0.526 vs 0.505 ms a layer at the
// char-gpt2 shape, fp32 3.86 vs 2.79 ms.)
template <typename E, int HDP>
__global__ void __launch_bounds__(kThreads, min_blocks<E, HDP>()) bwd_dq_tc(const E* __restrict__ qkv, const E* __restrict__ dy,
                                                                          const float* __restrict__ lse,
                                                                          const float* __restrict__ dd, void* dqkv,
                                                                          int dqdt, int T, int H, int hd, float scale,
                                                                          bool vec) {
  bwd_dq_body<E, HDP>(qkv, dy, lse, dd, dqkv, dqdt, T, H, hd, scale, vec, blockIdx.y, gridDim.y);
}
template <typename E, int HDP, int NQ>
__global__ void __launch_bounds__(kThreads, min_blocks<E, HDP>()) bwd_dkv_tc(const E* __restrict__ qkv, const E* __restrict__ dy,
                                                                           const float* __restrict__ lse,
                                                                           const float* __restrict__ dd, void* dqkv,
                                                                           int dqdt, int T, int H, int hd, float scale,
                                                                           bool vec) {
  bwd_dkv_body<E, HDP, NQ>(qkv, dy, lse, dd, dqkv, dqdt, T, H, hd, scale, vec, blockIdx.y);
}

}  // namespace trainlab::kern::attn
