// kernels/gemm.cu: see gemm.cuh for the math, layout and accumulation.
#include "device_common.cuh"
#include "gemm.cuh"

namespace trainlab::kern {

namespace {
constexpr int BM = 32, BN = 32, BK = 32;

struct GemmBatch {
  GemmProblem p[kMaxGemmProblems];
  int first[kMaxGemmProblems + 1];  // first block of each problem
  int tn[kMaxGemmProblems];         // tile columns per problem
};

template <class T>
__device__ __forceinline__ float ldt(const void* p, int64_t i) {
  if constexpr (sizeof(T) == 4) return static_cast<const float*>(p)[i];
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  else return __half2float(static_cast<const __half*>(p)[i]);
}

template <class T, int InDt>
__device__ __forceinline__ float load_a(const GemmProblem& p, int gm, int gk, bool tf32) {
  float v = 0.0f;
  if (gm < p.m && gk < p.k) {
    const int64_t idx = gm * p.sam + gk * p.sak;
    v = ldt<T>(p.a, idx);
    if (p.a_mask_act == 1) {
      if (!(ldt<T>(p.a_mask, idx) > 0.0f)) v = 0.0f;
    } else if (p.a_mask_act == 2) {
      v = round_fmt(v * gelu_grad_f(ldt<T>(p.a_mask, idx)), InDt);
    }
    if (tf32) v = tf32_round(v);
  }
  return v;
}

template <class T>
__device__ __forceinline__ float load_b(const GemmProblem& p, int gk, int gn, bool tf32) {
  float v = 0.0f;
  if (gk < p.k) {
    if (gn < p.n) {
      v = ldt<T>(p.b, gk * p.sbk + gn * p.sbn);
      if (tf32) v = tf32_round(v);
    } else if (gn == p.n && p.ones_col) {
      v = 1.0f;
    }
  }
  return v;
}

// 256 threads per 32 x 32 output tile. K is staged in chunks of KC = 128: each thread loads 16
// elements of A and 16 of B per chunk, all issued before any is stored (one memory latency per
// chunk), and the next chunk's loads are in flight while the current one is multiplied. Inside a
// chunk the four 64-thread groups split K (group g takes k = g, g+4, ...), each thread holding a
// 4 x 4 block of outputs; the four partial tiles are summed through shared memory at the end.
// This keeps the serial chain short for the launch-bound sizes of small MLPs.
constexpr int KC = 128, PAD = 4, PER = (BM * KC) / 256;
static_assert(BM == 32 && BN == 32 && PER == 16, "tile shape");

template <class T, int InDt>
__global__ void __launch_bounds__(256) gemm_kernel(GemmBatch batch) {
  __shared__ __align__(16) float As[KC][BM + PAD];  // As[k][m]
  __shared__ __align__(16) float Bs[KC][BN + PAD];  // Bs[k][n]
  const int which = blockIdx.x >= batch.first[1] ? (blockIdx.x >= batch.first[2] ? 2 : 1) : 0;
  const int tile = blockIdx.x - batch.first[which];
  const GemmProblem p = batch.p[which];
  const bool tf32 = p.tf32;
  const int tn = batch.tn[which];
  const int m0 = (tile / tn) * BM, n0 = (tile % tn) * BN;
  const int ncols = p.n + (p.ones_col ? 1 : 0);
  const bool a_k_fast = p.sak == 1;
  const bool b_n_fast = p.sbn == 1;
  const int tid = threadIdx.x, g = tid / 64, lt = tid % 64, ty = lt / 8, tx = lt % 8;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  float ra[PER], rb[PER];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int r = 0; r < PER; ++r) {
      const int e = tid + 256 * r;
      int m, k;
      if (a_k_fast) m = e / KC, k = e % KC;
      else k = e / BM, m = e % BM;
      ra[r] = load_a<T, InDt>(p, m0 + m, k0 + k, tf32);
      int kb, n;
      if (b_n_fast) kb = e / BN, n = e % BN;
      else n = e / KC, kb = e % KC;
      rb[r] = load_b<T>(p, k0 + kb, n0 + n, tf32);
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < p.k; k0 += KC) {
#pragma unroll
    for (int r = 0; r < PER; ++r) {
      const int e = tid + 256 * r;
      int m, k;
      if (a_k_fast) m = e / KC, k = e % KC;
      else k = e / BM, m = e % BM;
      As[k][m] = ra[r];
      int kb, n;
      if (b_n_fast) kb = e / BN, n = e % BN;
      else n = e / KC, kb = e % KC;
      Bs[kb][n] = rb[r];
    }
    __syncthreads();
    if (k0 + KC < p.k) fetch(k0 + KC);
    const int kc = min(KC, p.k - k0);
#pragma unroll 4
    for (int kk = g; kk < kc; kk += 4) {
      const float4 a = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Sum the four groups' partial tiles (As reused: 4 x 32 x 33 floats fit in it).
  float* red = &As[0][0];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) red[(g * BM + ty * 4 + i) * (BN + 1) + tx * 4 + j] = acc[i][j];
  __syncthreads();
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int o = tid + 256 * q, mi = o / BN, ni = o % BN;
    const float sum = red[(0 * BM + mi) * (BN + 1) + ni] + red[(1 * BM + mi) * (BN + 1) + ni] +
                      red[(2 * BM + mi) * (BN + 1) + ni] + red[(3 * BM + mi) * (BN + 1) + ni];
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

int tiles_of(const GemmProblem& p, int* tn) {
  const int ncols = p.n + (p.ones_col ? 1 : 0);
  *tn = (ncols + BN - 1) / BN;
  return ((p.m + BM - 1) / BM) * *tn;
}
}  // namespace

void launch_gemm(int in_dt, const GemmProblem* problems, int count, cudaStream_t s) {
  GemmBatch b;
  int total = 0;
  for (int i = 0; i < kMaxGemmProblems; ++i) {
    b.first[i] = total;
    b.tn[i] = 1;
    if (i < count) {
      b.p[i] = problems[i];
      total += tiles_of(problems[i], &b.tn[i]);
    }
  }
  b.first[kMaxGemmProblems] = total;
  if (total == 0) return;
  switch (in_dt) {
    case kF32: gemm_kernel<float, kF32><<<total, 256, 0, s>>>(b); break;
    case kBF16: gemm_kernel<__nv_bfloat16, kBF16><<<total, 256, 0, s>>>(b); break;
    case kF16: gemm_kernel<__half, kF16><<<total, 256, 0, s>>>(b); break;
    default: throw_cuda_error(cudaErrorInvalidValue, "launch_gemm: unsupported input format", __FILE__, __LINE__);
  }
  TL_LAUNCH_CHECK("gemm");
}

}  // namespace trainlab::kern
