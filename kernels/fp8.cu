// kernels/fp8.cu: see fp8.cuh for the math, layout and precision.
#include <algorithm>

#include "device_common.cuh"
#include "fp8.cuh"

namespace trainlab::kern {

namespace {
constexpr int kTile = kFp8AmaxTile;  // the tiles of the maximum (fp8_scaling.h)

// Both formats saturate (a gradient that outgrows its delayed scale is clipped, not inf): the CPU's
// cast_fp8_saturating (tensor/dtype.h) gives the same codes.
__device__ __forceinline__ __nv_fp8_storage_t cast_sat(float v, int fdt) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, fdt == kE4M3 ? __NV_E4M3 : __NV_E5M2);
}

__global__ void __launch_bounds__(kTile * 8) cast_fp8_kernel(const void* x, int xdt, const void* mask, int64_t rows,
                                                            int64_t cols, void* out, void* out_t, int fdt,
                                                            float* hist, float* inv_scale_out, const DevScalars* sc) {
  __shared__ float tile[kTile][kTile + 1];
  __shared__ float s_max[8];
  const int slot = fp8_history_slot(sc->step);
  const int next = (slot + 1) % kFp8History;
  const float scale = fp8_delayed_scale(hist, sc->step, fp8_format_max(fdt == kE4M3));
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    *inv_scale_out = 1.0f / scale;
    hist[next] = 0.0f;
  }
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  float local = 0.0f;
  for (int i = threadIdx.y; i < kTile; i += 8) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    float v = 0.0f;
    if (r < rows && c < cols) {
      v = ld(x, r * cols + c, xdt);
      if (mask && !(ld(mask, r * cols + c, xdt) > 0.0f)) v = 0.0f;
      local = fmaxf(local, fabsf(v));
      static_cast<__nv_fp8_storage_t*>(out)[r * cols + c] = cast_sat(v * scale, fdt);
    }
    tile[i][threadIdx.x] = v;
  }
  if (out_t) {
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += 8) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;  // out_t[c, r] = x[r, c]
      if (r < rows && c < cols) static_cast<__nv_fp8_storage_t*>(out_t)[c * rows + r] = cast_sat(tile[threadIdx.x][i] * scale, fdt);
    }
  }
  for (int o = 16; o > 0; o >>= 1) local = fmaxf(local, __shfl_xor_sync(0xffffffffu, local, o));
  if (threadIdx.x == 0) s_max[threadIdx.y] = local;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    float m = 0.0f;
    for (int w = 0; w < 8; ++w) m = fmaxf(m, s_max[w]);
    if (fp8_amax_recordable(m)) atomicMax(reinterpret_cast<int*>(hist + slot), __float_as_int(m));
  }
}

__global__ void dequant_fp8_kernel(const void* q, int fdt, int64_t n, const float* f0, const float* f1, float* out) {
  const float f = (f0 ? *f0 : 1.0f) * (f1 ? *f1 : 1.0f);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = ld(q, i, fdt) * f;
}
}  // namespace

void launch_dequant_fp8(const void* q, int fp8_dt, int64_t n, const float* f0, const float* f1, float* out,
                        cudaStream_t s) {
  if (n <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
  dequant_fp8_kernel<<<blocks, 256, 0, s>>>(q, fp8_dt, n, f0, f1, out);
  TL_LAUNCH_CHECK("dequant_fp8");
}

void launch_cast_fp8(const void* x, int x_dt, const void* relu_mask, int64_t rows, int64_t cols, void* out,
                     void* out_t, int fp8_dt, float* history, float* inv_scale_out, const DevScalars* sc,
                     cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  cast_fp8_kernel<<<grid, dim3(kTile, 8), 0, s>>>(x, x_dt, relu_mask, rows, cols, out, out_t, fp8_dt, history,
                                                  inv_scale_out, sc);
  TL_LAUNCH_CHECK("cast_fp8");
}

}  // namespace trainlab::kern
