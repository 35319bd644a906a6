// kernels/gemm.cu: see gemm.cuh for the math, layout and accumulation.
#include "device_common.cuh"
#include "gemm.cuh"

namespace trainlab::kern {

namespace {
// How one operand's slab (TILE rows of A's m or B's n, by KC of k) travels from device memory to
// shared memory; chosen per problem at launch from the strides and the pointers' alignment.
//   kScalarK / kScalarMN: one element per load, consecutive threads along k (stride 1 on k) or
//     along m/n; every element bounds-checked (any strides: the general path).
//   kVecK / kVecMN: 16-byte loads of V = 16 / sizeof(T) elements consecutive along k (k-fast) or
//     along m/n; needs stride 1 on that dimension, the other stride a multiple of V and 16-byte
//     aligned pointers (the a_mask too). A vector that is not wholly inside the matrix (edges,
//     B's ones column) falls back to bounds-checked elements.
enum : int { kScalarK = 0, kScalarMN = 1, kVecK = 2, kVecMN = 3 };

struct GemmBatch {
  GemmProblem p[kMaxGemmProblems];
  int first[kMaxGemmProblems + 1];  // first block of each problem
  int tn[kMaxGemmProblems];         // tile columns per problem
  int amode[kMaxGemmProblems];      // staging mode of A, of B (enum above)
  int bmode[kMaxGemmProblems];
};

template <class T>
__device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return __half2float(v);
}
// Exact for the only values used (0 and 1).
template <class T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return __float2half_rn(v);
}
template <class T>
struct alignas(16) Vec16 {
  T v[16 / sizeof(T)];
};

// Tile shapes: TILE x TILE outputs per block of 256 threads, K staged in chunks of KC with
// TILE * KC = 4096 elements of each operand (16 per thread), four K groups of 64 threads, each
// thread of a group holding a TM x TM block of outputs.
template <int TILE>
struct Cfg {
  static constexpr int KC = 4096 / TILE, PER = 16, PAD = 4, TM = TILE / 8, LD = TILE + PAD;
  static_assert(TILE * KC == 256 * PER && TM * 8 == TILE, "tile shape");
};

// Where slot s (0..15) of a thread's staging registers sits in the slab: row (m or n inside the
// tile) and k (inside the chunk). Vector modes: slots r*V .. r*V+V-1 are one 16-byte vector.
template <int TILE, int V>
__device__ __forceinline__ void slot_pos(int mode, int tid, int s, int& row, int& k) {
  constexpr int KC = Cfg<TILE>::KC;
  const int r = s / V, j = s % V;
  if (mode == kScalarK) {
    const int e = tid + 256 * s;
    row = e / KC, k = e % KC;
  } else if (mode == kScalarMN) {
    const int e = tid + 256 * s;
    k = e / TILE, row = e % TILE;
  } else if (mode == kVecK) {  // a warp covers 32 (or 16 x 2) rows, one vector each
    const int v = tid + 256 * r;
    row = v % TILE, k = (v / TILE) * V + j;
  } else {  // kVecMN: vectors along the row, consecutive threads along it then along k
    constexpr int NV = TILE / V;
    const int v = tid + 256 * r;
    row = (v % NV) * V + j, k = v / NV;
  }
}

// One operand of one problem, as a block sees it: element (row, k) at base[row * srow + k * sk]
// for row < rows and k < kdim; with ones, row == rows reads 1 (B's ones column).
template <class T>
struct Operand {
  const T* base;
  const T* mask;  // A only (same layout), or null
  int64_t srow, sk;
  int rows, kdim;
  bool ones;
};

template <class T>
__device__ __forceinline__ void load_elem(const Operand<T>& o, int row, int k, T& v, T& m) {
  v = from_f<T>(0.0f), m = from_f<T>(0.0f);
  if (k < o.kdim) {
    if (row < o.rows) {
      const int64_t idx = row * o.srow + k * o.sk;
      v = o.base[idx];
      if (o.mask) m = o.mask[idx];
    } else if (o.ones && row == o.rows) {
      v = from_f<T>(1.0f);
    }
  }
}

// Issue the loads of one chunk (raw values, converted later when stored to shared memory, so the
// loads stay in flight while the previous chunk is multiplied).
template <class T, int TILE>
__device__ __forceinline__ void fetch(const Operand<T>& o, int mode, int row0, int k0, int tid, T (&raw)[16],
                                      T (&rawm)[16]) {
  constexpr int V = 16 / sizeof(T), NVEC = 16 / V;
  if (mode >= kVecK) {
#pragma unroll
    for (int r = 0; r < NVEC; ++r) {
      int row, k;
      slot_pos<TILE, V>(mode, tid, r * V, row, k);
      row += row0, k += k0;
      const bool full = mode == kVecK ? (row < o.rows && k + V <= o.kdim) : (row + V <= o.rows && k < o.kdim);
      if (full) {
        const int64_t idx = row * o.srow + k * o.sk;
        const Vec16<T> x = *reinterpret_cast<const Vec16<T>*>(o.base + idx);
#pragma unroll
        for (int j = 0; j < V; ++j) raw[r * V + j] = x.v[j];
        if (o.mask) {
          const Vec16<T> y = *reinterpret_cast<const Vec16<T>*>(o.mask + idx);
#pragma unroll
          for (int j = 0; j < V; ++j) rawm[r * V + j] = y.v[j];
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          load_elem(o, mode == kVecMN ? row + j : row, mode == kVecK ? k + j : k, raw[r * V + j], rawm[r * V + j]);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < 16; ++s) {
      int row, k;
      slot_pos<TILE, V>(mode, tid, s, row, k);
      load_elem(o, row0 + row, k0 + k, raw[s], rawm[s]);
    }
  }
}

// The value an operand element contributes: A gets the activation backward (ReLU' or GELU',
// rounded to the input format) and tf32 rounding, B tf32 rounding only. Zeros (outside the
// matrix) stay zero; the ones column stays one.
template <class T, int InDt>
__device__ __forceinline__ float prep(T raw, T rawm, int mask_act, bool tf32) {
  float v = to_f(raw);
  if (mask_act == 1) {
    if (!(to_f(rawm) > 0.0f)) v = 0.0f;
  } else if (mask_act == 2) {
    v = round_fmt(v * gelu_grad_f(to_f(rawm)), InDt);
  }
  if (tf32) v = tf32_round(v);
  return v;
}

// Convert the staged chunk and store it as S[k][row] (row contiguous, what the product reads).
template <class T, int InDt, int TILE>
__device__ __forceinline__ void stage(float (*S)[Cfg<TILE>::LD], int mode, int tid, const T (&raw)[16],
                                      const T (&rawm)[16], int mask_act, bool tf32) {
  constexpr int V = 16 / sizeof(T), NVEC = 16 / V;
  if (mode == kVecMN) {
#pragma unroll
    for (int r = 0; r < NVEC; ++r) {
      int row, k;
      slot_pos<TILE, V>(mode, tid, r * V, row, k);
      float f[V];
#pragma unroll
      for (int j = 0; j < V; ++j) f[j] = prep<T, InDt>(raw[r * V + j], rawm[r * V + j], mask_act, tf32);
#pragma unroll
      for (int q = 0; q < V / 4; ++q)
        *reinterpret_cast<float4*>(&S[k][row + 4 * q]) = make_float4(f[4 * q], f[4 * q + 1], f[4 * q + 2], f[4 * q + 3]);
    }
  } else {
#pragma unroll
    for (int s = 0; s < 16; ++s) {
      int row, k;
      slot_pos<TILE, V>(mode, tid, s, row, k);
      S[k][row] = prep<T, InDt>(raw[s], rawm[s], mask_act, tf32);
    }
  }
}

template <int TM>
__device__ __forceinline__ void lds_row(const float* p, float (&v)[TM]) {
  if constexpr (TM == 4) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
    static_assert(TM == 2, "micro-tile");
    const float2 x = *reinterpret_cast<const float2*>(p);
    v[0] = x.x, v[1] = x.y;
  }
}

// 256 threads per TILE x TILE output tile. K is staged in chunks of KC: each thread loads 16
// elements of A and 16 of B per chunk (4 or 2 16-byte loads each on the vector paths), all issued
// before any is used, and the next chunk's loads are in flight while the current one is
// multiplied. Inside a chunk the four 64-thread groups split K (group g takes k = g, g+4, ...),
// each thread holding a TM x TM block of outputs; the four partial tiles are summed through shared
// memory at the end. Group g's sum runs over k = g, g+4, ... in ascending order whatever the tile
// and chunk sizes, so both tile shapes give bit-identical results.
template <class T, int InDt, int TILE>
__global__ void __launch_bounds__(256) gemm_kernel(GemmBatch batch) {
  using C = Cfg<TILE>;
  constexpr int KC = C::KC, TM = C::TM, LD = C::LD;
  __shared__ __align__(16) float As[KC][LD];  // As[k][m]
  __shared__ __align__(16) float Bs[KC][LD];  // Bs[k][n]
  const int which = blockIdx.x >= batch.first[1] ? (blockIdx.x >= batch.first[2] ? 2 : 1) : 0;
  const int tile = blockIdx.x - batch.first[which];
  const GemmProblem& p = batch.p[which];
  const int amode = batch.amode[which], bmode = batch.bmode[which];
  const bool tf32 = p.tf32;
  const int mask_act = p.a_mask ? p.a_mask_act : 0;
  const int tn = batch.tn[which];
  const int m0 = (tile / tn) * TILE, n0 = (tile % tn) * TILE;
  const int ncols = p.n + (p.ones_col ? 1 : 0);
  const Operand<T> oa{static_cast<const T*>(p.a), mask_act ? static_cast<const T*>(p.a_mask) : nullptr,
                      p.sam, p.sak, p.m, p.k, false};
  const Operand<T> ob{static_cast<const T*>(p.b), nullptr, p.sbn, p.sbk, p.n, p.k, p.ones_col};
  const int tid = threadIdx.x, g = tid / 64, lt = tid % 64, ty = lt / 8, tx = lt % 8;
  float acc[TM][TM];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TM; ++j) acc[i][j] = 0.0f;
  T ra[16], rm[16], rb[16], rbm[16];
  fetch<T, TILE>(oa, amode, m0, 0, tid, ra, rm);
  fetch<T, TILE>(ob, bmode, n0, 0, tid, rb, rbm);
  for (int k0 = 0; k0 < p.k; k0 += KC) {
    stage<T, InDt, TILE>(As, amode, tid, ra, rm, mask_act, tf32);
    stage<T, InDt, TILE>(Bs, bmode, tid, rb, rbm, 0, tf32);
    __syncthreads();
    if (k0 + KC < p.k) {
      fetch<T, TILE>(oa, amode, m0, k0 + KC, tid, ra, rm);
      fetch<T, TILE>(ob, bmode, n0, k0 + KC, tid, rb, rbm);
    }
    const int kc = min(KC, p.k - k0);
#pragma unroll 4
    for (int kk = g; kk < kc; kk += 4) {
      float av[TM], bv[TM];
      lds_row<TM>(&As[kk][ty * TM], av);
      lds_row<TM>(&Bs[kk][tx * TM], bv);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Sum the four groups' partial tiles (As reused: 4 x TILE x (TILE + 1) floats fit in it).
  static_assert(4 * TILE * (TILE + 1) <= KC * LD, "reduction buffer");
  float* red = &As[0][0];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TM; ++j) red[(g * TILE + ty * TM + i) * (TILE + 1) + tx * TM + j] = acc[i][j];
  __syncthreads();
#pragma unroll
  for (int q = 0; q < TILE * TILE / 256; ++q) {
    const int o = tid + 256 * q, mi = o / TILE, ni = o % TILE;
    const float sum = red[(0 * TILE + mi) * (TILE + 1) + ni] + red[(1 * TILE + mi) * (TILE + 1) + ni] +
                      red[(2 * TILE + mi) * (TILE + 1) + ni] + red[(3 * TILE + mi) * (TILE + 1) + ni];
    const int gm = m0 + mi, gn = n0 + ni;
    if (gm >= p.m || gn >= ncols) continue;
    if (gn == p.n) {  // the ones column: dbias
      float v = p.alpha * sum;
      if (p.beta != 0.0f) v += p.beta * ld(p.bias_grad, gm, p.bias_grad_dt);
      st(p.bias_grad, gm, p.bias_grad_dt, v);
      continue;
    }
    const int64_t ci = gm * p.ldc + gn;
    float v = p.alpha * sum;
    if (p.beta != 0.0f) v += p.beta * ld(p.c, ci, p.c_dt);
    if (p.bias) v += ld(p.bias, gn, p.bias_dt);
    if (p.act || p.pre) v = round_fmt(v, p.c_dt);
    if (p.pre) st(p.pre, ci, p.c_dt, v);
    if (p.act == 1) v = v > 0.0f ? v : 0.0f;
    else if (p.act == 2) v = gelu_f(v);
    st(p.c, ci, p.c_dt, v);
  }
}

int tiles_of(const GemmProblem& p, int tile, int* tn) {
  const int ncols = p.n + (p.ones_col ? 1 : 0);
  *tn = (ncols + tile - 1) / tile;
  return ((p.m + tile - 1) / tile) * *tn;
}

bool aligned16(const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; }

// Staging mode of an operand with strides (srow along m/n, sk along k), V elements per 16 bytes.
int pick_mode(const void* base, const void* mask, int64_t srow, int64_t sk, int v) {
  const bool al = aligned16(base) && (!mask || aligned16(mask));
  if (al && sk == 1 && srow % v == 0) return kVecK;
  if (al && srow == 1 && sk % v == 0) return kVecMN;
  return sk == 1 ? kScalarK : kScalarMN;
}

// Multiprocessors of the current device (cached per device; queried once, legal while a stream
// is being captured).
int sm_count() {
  static int cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (cache[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
    cache[dev] = n;
  }
  return cache[dev];
}

// Tile choice: 16 x 16 when its blocks still fit one per multiprocessor (four times the blocks of
// 32 x 32, a quarter of the serial work each: the launch-bound small products of the MLPs); 32 x 32
// otherwise (more outputs per shared-memory load). A block uses ~200 registers x 256 threads, so
// one block per multiprocessor; results are bit-identical either way (see gemm_kernel).
template <class T, int InDt>
void launch_typed(GemmBatch& b, int count, cudaStream_t s) {
  int total16 = 0;
  for (int i = 0; i < count; ++i) {
    int tn;
    total16 += tiles_of(b.p[i], 16, &tn);
  }
  const int tile = total16 <= sm_count() ? 16 : 32;
  int total = 0;
  for (int i = 0; i < kMaxGemmProblems; ++i) {
    b.first[i] = total;
    if (i < count) total += tiles_of(b.p[i], tile, &b.tn[i]);
  }
  b.first[kMaxGemmProblems] = total;
  if (total == 0) return;
  if (tile == 32) gemm_kernel<T, InDt, 32><<<total, 256, 0, s>>>(b);
  else gemm_kernel<T, InDt, 16><<<total, 256, 0, s>>>(b);
}
}  // namespace

void launch_gemm(int in_dt, const GemmProblem* problems, int count, cudaStream_t s) {
  GemmBatch b{};
  if (count > kMaxGemmProblems) count = kMaxGemmProblems;
  const int v = in_dt == kF32 ? 4 : 8;  // elements per 16 bytes
  for (int i = 0; i < kMaxGemmProblems; ++i) {
    b.tn[i] = 1;
    b.amode[i] = b.bmode[i] = kScalarK;
    if (i < count) {
      const GemmProblem& p = problems[i];
      b.p[i] = p;
      b.amode[i] = pick_mode(p.a, p.a_mask_act ? p.a_mask : nullptr, p.sam, p.sak, v);
      b.bmode[i] = pick_mode(p.b, nullptr, p.sbn, p.sbk, v);
    }
  }
  switch (in_dt) {
    case kF32: launch_typed<float, kF32>(b, count, s); break;
    case kBF16: launch_typed<__nv_bfloat16, kBF16>(b, count, s); break;
    case kF16: launch_typed<__half, kF16>(b, count, s); break;
    default: throw_cuda_error(cudaErrorInvalidValue, "launch_gemm: unsupported input format", __FILE__, __LINE__);
  }
  TL_LAUNCH_CHECK("gemm");
}

}  // namespace trainlab::kern
