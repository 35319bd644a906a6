// kernels/attention_tiles.cuh: the tensor-core building blocks of the attention kernels
// (attention_tc.cuh): the mma.sync wrappers per input format, the fp32 operand split, ldmatrix and
// cp.async, tile loads into padded shared memory, and the warp-level products A B^T and P B.
// Device code, included only through attention_tc.cuh.
//
// Tiles: a block is kWarps warps. 16-bit products are mma.sync m16n8k16 (fp32 accumulators) with
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
constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = 2^(x log2 e)
constexpr float kLn2 = 0.69314718055994531f;    // ln(2^x) = x ln 2

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

}  // namespace trainlab::kern::attn
