// kernels/quant.cu: see quant.cuh for the math, layout and precision.
#include <algorithm>

#include "device_common.cuh"
#include "quant.cuh"

namespace trainlab::kern {

namespace {

// --- block reductions (blockDim.x a multiple of 32, at most 1024) -----------------------------
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* shared /* [32] */) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;  // every thread holds the result
}
struct MaxU { __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; } };
struct MaxF { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct SumF { __device__ float operator()(float a, float b) const { return a + b; } };
struct SumD { __device__ double operator()(double a, double b) const { return a + b; } };

// --- fake quantization ---------------------------------------------------------------------
// Block (g, s) reduces part s of group g; |w| of a finite float orders like its bit pattern.
__global__ void group_absmax_kernel(const void* w, int dt, int64_t n, int64_t group, int64_t span,
                                   uint32_t* group_max) {
  __shared__ uint32_t red[32];
  const int64_t g0 = static_cast<int64_t>(blockIdx.x) * group;
  const int64_t g1 = min(n, g0 + group);
  const int64_t p0 = g0 + static_cast<int64_t>(blockIdx.y) * span;
  const int64_t p1 = min(g1, p0 + span);
  uint32_t mx = 0;
  for (int64_t i = p0 + threadIdx.x; i < p1; i += blockDim.x) mx = max(mx, __float_as_uint(fabsf(ld(w, i, dt))));
  mx = block_reduce(mx, MaxU{}, 0u, red);
  if (threadIdx.x == 0) atomicMax(group_max + blockIdx.x, mx);
}

__global__ void fake_quantize_apply_kernel(const void* w, int wdt, void* out, int odt, int64_t n, float qmax,
                                           int64_t group, const uint32_t* group_max) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float mx = __uint_as_float(group_max[i / group]);
    float s = __half2float(__float2half_rn(__fdiv_rn(mx, qmax)));  // the stored fp16 scale
    if (!isfinite(s)) s = 65504.0f;
    const float q = s > 0.0f ? rintf(__fdiv_rn(ld(w, i, wdt), s)) : 0.0f;
    st(out, i, odt, __fmul_rn(s, fminf(fmaxf(q, -qmax), qmax)));
  }
}

__global__ void quantize_i8_kernel(const void* x, int dt, float inv, int8_t* q, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    q[i] = static_cast<int8_t>(fminf(fmaxf(rintf(__fmul_rn(ld(x, i, dt), inv)), -127.0f), 127.0f));
}

// --- int8 x int8 -> int32 ------------------------------------------------------------------
constexpr int kTile = 64;  // rows and columns of the output tile, and bytes of K per step

struct I8Epilogue {
  bool on = false;       // false: store the int32 accumulators
  float x_scale = 1.0f;
  const float* w_scales = nullptr;
  int64_t n_scales = 1;
  const float* bias = nullptr;
  int act = 0;
  void* y = nullptr;
  int y_dt = 0;
};

// Loads rows r0.. of a 64 x 64-byte tile of `src` [rows, k] into words (4 int8 each), zero
// outside the matrix. Thread t fills row t/4, bytes (t%4)*16 .. +16.
__device__ __forceinline__ void load_i8_tile(const int8_t* src, int64_t rows, int64_t k, int64_t r0, int64_t k0,
                                             bool vec_ok, int32_t (*tile)[kTile / 4 + 1]) {
  const int lr = threadIdx.x >> 2, lc = (threadIdx.x & 3) * 16;
  const int64_t r = r0 + lr, kk = k0 + lc;
  int32_t words[4] = {0, 0, 0, 0};
  if (r < rows) {
    const int8_t* p = src + r * k + kk;
    if (vec_ok && kk + 16 <= k) {
      const int4 v = *reinterpret_cast<const int4*>(p);
      words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
    } else {
      for (int q = 0; q < 4; ++q) {
        uint32_t w = 0;
        for (int byte = 0; byte < 4; ++byte) {
          const int64_t c = kk + q * 4 + byte;
          const uint32_t v = c < k ? static_cast<uint8_t>(p[q * 4 + byte]) : 0u;
          w |= v << (8 * byte);
        }
        words[q] = static_cast<int32_t>(w);
      }
    }
  }
  for (int q = 0; q < 4; ++q) tile[lr][lc / 4 + q] = words[q];
}

__global__ void __launch_bounds__(256) gemm_i8_kernel(const int8_t* a, const int8_t* b, int32_t* c, int64_t m,
                                                      int64_t n, int64_t k, bool vec_ok, I8Epilogue ep) {
  __shared__ int32_t as[kTile][kTile / 4 + 1], bs[kTile][kTile / 4 + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  int32_t acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    load_i8_tile(a, m, k, row0, k0, vec_ok, as);
    load_i8_tile(b, n, k, col0, k0, vec_ok, bs);
    __syncthreads();
#pragma unroll
    for (int kw = 0; kw < kTile / 4; ++kw) {
      int32_t ar[4], br[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) ar[i] = as[ty * 4 + i][kw], br[i] = bs[tx * 4 + i][kw];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(ar[i], br[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + ty * 4 + i;
    if (r >= m) continue;
    for (int j = 0; j < 4; ++j) {
      const int64_t col = col0 + tx * 4 + j;
      if (col >= n) continue;
      if (!ep.on) {
        c[r * n + col] = acc[i][j];
        continue;
      }
      // The CPU's order: s = x_scale * w_scale; v = acc * s + bias (each rounded, no fma).
      const float s = __fmul_rn(ep.x_scale, ep.w_scales[ep.n_scales == 1 ? 0 : col]);
      float v = __fadd_rn(__fmul_rn(static_cast<float>(acc[i][j]), s), ep.bias ? ep.bias[col] : 0.0f);
      if (ep.act == 1) v = v > 0.0f ? v : 0.0f;
      else if (ep.act == 2) v = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, 0.70710678118654752f))));
      st(ep.y, r * n + col, ep.y_dt, v);
    }
  }
}

void gemm_i8_any(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k, const I8Epilogue& ep,
                 cudaStream_t s) {
  if (m == 0 || n == 0) return;
  const bool vec_ok = (k % 16) == 0 && (reinterpret_cast<uintptr_t>(a) % 16) == 0 && (reinterpret_cast<uintptr_t>(b) % 16) == 0;
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  gemm_i8_kernel<<<grid, 256, 0, s>>>(a, b, c, m, n, k, vec_ok, ep);
  TL_LAUNCH_CHECK("gemm_i8");
}

// --- distillation ----------------------------------------------------------------------------
__global__ void distill_row_kernel(const void* zs, int sdt, const void* zt, int tdt, int64_t cols, float inv_t,
                                   float temperature, float alpha, float grad_multiplier, const DevScalars* scalars,
                                   void* dl, int dldt, double* row_kl) {
  __shared__ float redf[32];
  __shared__ double redd[32];
  const int64_t row = blockIdx.x, base = row * cols;
  float ms = -INFINITY, mt = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    ms = fmaxf(ms, ld(zs, base + j, sdt) * inv_t);
    mt = fmaxf(mt, ld(zt, base + j, tdt) * inv_t);
  }
  ms = block_reduce(ms, MaxF{}, -INFINITY, redf);
  mt = block_reduce(mt, MaxF{}, -INFINITY, redf);
  float ss = 0.0f, st_ = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    ss += expf(ld(zs, base + j, sdt) * inv_t - ms);
    st_ += expf(ld(zt, base + j, tdt) * inv_t - mt);
  }
  ss = block_reduce(ss, SumF{}, 0.0f, redf);
  st_ = block_reduce(st_, SumF{}, 0.0f, redf);
  const float lss = logf(ss) + ms, lst = logf(st_) + mt;
  const float scale = alpha * temperature * grad_multiplier * scalars->loss_scale;
  double kl = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float s = ld(zs, base + j, sdt) * inv_t, t = ld(zt, base + j, tdt) * inv_t;
    const float ps = expf(s - ms) / ss, pt = expf(t - mt) / st_;
    if (pt > 0.0f) kl += static_cast<double>(pt) * static_cast<double>((t - lst) - (s - lss));
    st(dl, base + j, dldt, (1.0f - alpha) * ld(dl, base + j, dldt) + scale * (ps - pt));
  }
  kl = block_reduce(kl, SumD{}, 0.0, redd);
  if (threadIdx.x == 0) row_kl[row] = kl * static_cast<double>(temperature) * temperature;
}

__global__ void distill_sum_kernel(const double* row_kl, int64_t rows, float* kl_sum, bool accumulate) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double total = 0.0;
  for (int64_t i = 0; i < rows; ++i) total += row_kl[i];  // row order, as the CPU
  kl_sum[0] = (accumulate ? kl_sum[0] : 0.0f) + static_cast<float>(total);
}

}  // namespace

void launch_fake_quantize(const void* w, int w_dt, void* out, int out_dt, int64_t n, int bits, int64_t group,
                          uint32_t* group_max, cudaStream_t s) {
  if (n == 0) return;
  const int64_t groups = (n + group - 1) / group;
  TL_CUDA_CHECK(cudaMemsetAsync(group_max, 0, static_cast<size_t>(groups) * sizeof(uint32_t), s));
  const int threads = group >= 256 ? 256 : group > 64 ? 128 : group > 32 ? 64 : 32;
  // Long groups (per tensor) are split over up to 1024 blocks of ~16 elements a thread each.
  const int64_t parts = std::min<int64_t>(1024, std::max<int64_t>(1, group / (threads * 16)));
  const int64_t span = (group + parts - 1) / parts;
  group_absmax_kernel<<<dim3(static_cast<unsigned>(groups), static_cast<unsigned>(parts)), threads, 0, s>>>(
      w, w_dt, n, group, span, group_max);
  TL_LAUNCH_CHECK("fake_quantize absmax");
  const float qmax = static_cast<float>((1 << (bits - 1)) - 1);
  fake_quantize_apply_kernel<<<blocks_for(n, 256), 256, 0, s>>>(w, w_dt, out, out_dt, n, qmax, group, group_max);
  TL_LAUNCH_CHECK("fake_quantize");
}

void launch_quantize_i8(const void* x, int x_dt, float inv_scale, int8_t* q, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  quantize_i8_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, x_dt, inv_scale, q, n);
  TL_LAUNCH_CHECK("quantize_i8");
}

void launch_gemm_i8(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t n, int64_t k, cudaStream_t s) {
  gemm_i8_any(a, b, c, m, n, k, I8Epilogue{}, s);
}

void launch_int8_linear(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, float x_scale,
                        const float* w_scales, int64_t n_scales, const float* bias, int act, void* y, int y_dt,
                        cudaStream_t s) {
  I8Epilogue ep;
  ep.on = true;
  ep.x_scale = x_scale;
  ep.w_scales = w_scales;
  ep.n_scales = n_scales;
  ep.bias = bias;
  ep.act = act;
  ep.y = y;
  ep.y_dt = y_dt;
  gemm_i8_any(xq, wq, nullptr, m, n, k, ep, s);
}

void launch_distill_backward(const void* zs, int zs_dt, const void* zt, int zt_dt, int64_t rows, int64_t cols,
                             float temperature, float alpha, float grad_multiplier, const DevScalars* scalars,
                             void* dlogits, int dl_dt, double* row_kl, float* kl_sum, bool accumulate,
                             cudaStream_t s) {
  if (rows == 0) return;
  const int threads = cols >= 256 ? 256 : cols > 64 ? 128 : cols > 32 ? 64 : 32;
  distill_row_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(zs, zs_dt, zt, zt_dt, cols, 1.0f / temperature,
                                                                    temperature, alpha, grad_multiplier, scalars,
                                                                    dlogits, dl_dt, row_kl);
  TL_LAUNCH_CHECK("distill_backward");
  if (kl_sum) {
    distill_sum_kernel<<<1, 32, 0, s>>>(row_kl, rows, kl_sum, accumulate);
    TL_LAUNCH_CHECK("distill_backward kl sum");
  }
}

}  // namespace trainlab::kern
