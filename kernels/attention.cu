// kernels/attention.cu: see attention.cuh for the math, layout and precision. The tensor-core
// kernels (bf16 / fp16 / tf32 / 3xTF32 for fp32) are in attention_tc.cuh; this file has the SIMT
// fp32 kernels (whatever the tensor-core path does not take: hd > 128, mixed formats), the
// backward's row dot D = dy . y, and the launchers that pick a path.
//
// SIMT tiles: a block of 256 threads (8 warps) owns 32 rows (query rows in the forward and dQ
// kernels, keys in the dK/dV kernel) and streams 32-row tiles of the other side through shared
// memory, all in fp32. Score tiles: warp w computes rows w, w + 8, w + 16, w + 24 and lane j the
// column j, so a row's max and sum are warp reductions. Output tiles: warp w the same rows, lane c
// the columns c, c + 32, ...; a thread's four rows share each load of its column (1.25 shared-memory
// loads per FMA, not 2). Accumulators live in shared memory, so any head dim works up to
// what shared memory holds. Tiles of q, k, v, dy are stored with an odd row stride (conflict-free
// column reads).
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "attention.cuh"
#include "attention_tc.cuh"
#include "device_common.cuh"
#include "util/error.h"

namespace trainlab::kern {

namespace {
constexpr int kS = 32;  // SIMT tile rows
constexpr int kSimtThreads = 256;
constexpr int kPs = kS + 1;  // row stride of the P / dS tiles

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__host__ __device__ inline int simt_lds(int hd) { return hd + 1 + (hd & 1); }  // odd

// 32 rows x hd of one head into sm (stride lds), fp32 (tf32-rounded if asked), zeros past T:
// row r starts at element off + (r0 + r) * stride of g.
__device__ void simt_load(float* sm, int lds, const void* g, int dt, int64_t off, int64_t stride, int r0, int T,
                          int hd, bool tf32) {
  for (int idx = threadIdx.x; idx < kS * hd; idx += kSimtThreads) {
    const int r = idx / hd, c = idx % hd;
    float v = 0.0f;
    if (r0 + r < T) {
      v = ld(g, off + int64_t(r0 + r) * stride + c, dt);
      if (tf32) v = tf32_round(v);
    }
    sm[r * lds + c] = v;
  }
}

// out[u] = a-row (w + 8u) . b-row (each summed in column order): the b row is loaded once for the
// warp's four rows (a-rows are broadcast reads).
__device__ __forceinline__ void dot4(const float* a, int w, const float* brow, int hd, int lds, float (&out)[4]) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
  for (int c = 0; c < hd; ++c) {
    const float bv = brow[c];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc[u] = fmaf(a[(w + 8 * u) * lds + c], bv, acc[u]);
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) out[u] = acc[u];
}

__global__ void __launch_bounds__(kSimtThreads) fwd_simt(const void* qkv, int dt, void* y, int ydt, float* lse, int T,
                                                         int H, int hd, float scale, bool tf32) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lds = simt_lds(hd);
  float* qs = reinterpret_cast<float*>(smem);
  float* ks = qs + kS * lds;
  float* vs = ks + kS * lds;
  float* os = vs + kS * lds;  // [32][hd] accumulators
  float* ps = os + kS * hd;   // [32][33] probabilities of this tile
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * kS;
  const int D = H * hd;
  const int64_t ld3 = 3LL * D, off = int64_t(b) * T * ld3 + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  simt_load(qs, lds, qkv, dt, off, ld3, q0, T, hd, tf32);
  for (int i = threadIdx.x; i < kS * hd; i += kSimtThreads) os[i] = 0.0f;
  float m[4], l[4], alpha[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) m[u] = -INFINITY, l[u] = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kS;
    simt_load(ks, lds, qkv, dt, off + D, ld3, k0, T, hd, tf32);
    simt_load(vs, lds, qkv, dt, off + 2 * D, ld3, k0, T, hd, tf32);
    __syncthreads();
    float sc[4];
    dot4(qs, warp, ks + lane * lds, hd, lds, sc);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = warp + 8 * u, q = q0 + i, key = k0 + lane;
      const float x = (key > q || q >= T) ? -INFINITY : sc[u] * scale;
      const float mx = fmaxf(m[u], warp_max(x));
      const float base = mx == -INFINITY ? 0.0f : mx;
      const float p = expf(x - base);
      alpha[u] = expf(m[u] - base);
      l[u] = l[u] * alpha[u] + warp_sum(p);
      m[u] = mx;
      ps[i * kPs + lane] = p;
    }
    __syncwarp();  // the warp's own rows of ps, read below by the same warp
    for (int c = lane; c < hd; c += 32) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
      for (int j = 0; j < kS; ++j) {
        const float v = vs[j * lds + c];
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[u] = fmaf(ps[(warp + 8 * u) * kPs + j], v, acc[u]);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) os[(warp + 8 * u) * hd + c] = os[(warp + 8 * u) * hd + c] * alpha[u] + acc[u];
    }
    __syncthreads();
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int i = warp + 8 * u, q = q0 + i;
    if (q >= T) continue;
    const float inv = 1.0f / l[u];
    const int64_t yrow = (int64_t(b) * T + q) * D + int64_t(h) * hd;
    for (int c = lane; c < hd; c += 32) st(y, yrow + c, ydt, os[i * hd + c] * inv);
    if (lane == 0) lse[int64_t(bh) * T + q] = m[u] + logf(l[u]);
  }
}

// P and dS (without the 1/sqrt(hd)) of one 32 x 32 tile: queries q0.., keys k0...
__device__ void simt_p_ds(const float* qs, const float* dos, const float* ks, const float* vs, const float* ls,
                          const float* ds, float* ps, float* dss, int q0, int k0, int T, int hd, int lds, float scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float sc[4], dp[4];
  dot4(qs, warp, ks + lane * lds, hd, lds, sc);
  dot4(dos, warp, vs + lane * lds, hd, lds, dp);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int i = warp + 8 * u, q = q0 + i, key = k0 + lane;
    float p = 0.0f, g = 0.0f;
    if (key <= q && q < T) {
      p = expf(sc[u] * scale - ls[i]);
      g = p * (dp[u] - ds[i]);
    }
    ps[i * kPs + lane] = p;
    dss[i * kPs + lane] = g;
  }
}

// lse and D of the 32 query rows from q0 (zeros past T).
__device__ void simt_load_stats(float* ls, float* ds, const float* lse, const float* dd, int64_t bhT, int q0, int T) {
  if (threadIdx.x < kS) {
    const int q = q0 + threadIdx.x;
    ls[threadIdx.x] = q < T ? lse[bhT + q] : 0.0f;
    ds[threadIdx.x] = q < T ? dd[bhT + q] : 0.0f;
  }
}

// Shared-memory layout of both SIMT backward kernels: q, dy, k, v tiles, P, dS, lse, D, then the
// accumulators (dQ, or dK and dV).
struct SimtBwd {
  float *qs, *dos, *ks, *vs, *ps, *dss, *ls, *ds, *acc;
  __device__ SimtBwd(unsigned char* smem, int lds) {
    qs = reinterpret_cast<float*>(smem);
    dos = qs + kS * lds;
    ks = dos + kS * lds;
    vs = ks + kS * lds;
    ps = vs + kS * lds;
    dss = ps + kS * kPs;
    ls = dss + kS * kPs;
    ds = ls + kS;
    acc = ds + kS;
  }
};
size_t simt_bwd_bytes(int hd, int accumulators) {
  return sizeof(float) * (size_t(4) * kS * simt_lds(hd) + 2 * kS * kPs + 2 * kS + size_t(accumulators) * kS * hd);
}

__global__ void __launch_bounds__(kSimtThreads) bwd_dq_simt(const void* qkv, int dt, const void* dy, int dydt,
                                                            const float* lse, const float* dd, void* dqkv, int dqdt,
                                                            int T, int H, int hd, float scale, bool tf32) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lds = simt_lds(hd);
  SimtBwd t(smem, lds);
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * kS;
  const int D = H * hd;
  const int64_t ld3 = 3LL * D, off = int64_t(b) * T * ld3 + int64_t(h) * hd, doff = int64_t(b) * T * D + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  simt_load(t.qs, lds, qkv, dt, off, ld3, q0, T, hd, tf32);
  simt_load(t.dos, lds, dy, dydt, doff, D, q0, T, hd, tf32);
  simt_load_stats(t.ls, t.ds, lse, dd, int64_t(bh) * T, q0, T);
  for (int i = threadIdx.x; i < kS * hd; i += kSimtThreads) t.acc[i] = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kS;
    simt_load(t.ks, lds, qkv, dt, off + D, ld3, k0, T, hd, tf32);
    simt_load(t.vs, lds, qkv, dt, off + 2 * D, ld3, k0, T, hd, tf32);
    __syncthreads();
    simt_p_ds(t.qs, t.dos, t.ks, t.vs, t.ls, t.ds, t.ps, t.dss, q0, k0, T, hd, lds, scale);
    __syncwarp();  // dS rows of this warp, read by this warp
    for (int c = lane; c < hd; c += 32) {
      float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
      for (int j = 0; j < kS; ++j) {
        const float kv = t.ks[j * lds + c];
#pragma unroll
        for (int u = 0; u < 4; ++u) a[u] = fmaf(t.dss[(warp + 8 * u) * kPs + j], kv, a[u]);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) t.acc[(warp + 8 * u) * hd + c] += a[u];
    }
    __syncthreads();
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int i = warp + 8 * u, q = q0 + i;
    if (q >= T) continue;
    const int64_t row = (int64_t(b) * T + q) * ld3 + int64_t(h) * hd;
    for (int c = lane; c < hd; c += 32) st(dqkv, row + c, dqdt, t.acc[i * hd + c] * scale);
  }
}

__global__ void __launch_bounds__(kSimtThreads) bwd_dkv_simt(const void* qkv, int dt, const void* dy, int dydt,
                                                             const float* lse, const float* dd, void* dqkv, int dqdt,
                                                             int T, int H, int hd, float scale, bool tf32) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lds = simt_lds(hd);
  SimtBwd t(smem, lds);
  float* dks = t.acc;
  float* dvs = t.acc + kS * hd;
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const int kt = gridDim.y - 1 - blockIdx.y, k0 = kt * kS;
  const int D = H * hd;
  const int64_t ld3 = 3LL * D, off = int64_t(b) * T * ld3 + int64_t(h) * hd, doff = int64_t(b) * T * D + int64_t(h) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  simt_load(t.ks, lds, qkv, dt, off + D, ld3, k0, T, hd, tf32);
  simt_load(t.vs, lds, qkv, dt, off + 2 * D, ld3, k0, T, hd, tf32);
  for (int i = threadIdx.x; i < 2 * kS * hd; i += kSimtThreads) t.acc[i] = 0.0f;
  const int nq = (T + kS - 1) / kS;
  for (int qt = kt; qt < nq; ++qt) {
    const int q0 = qt * kS;
    simt_load(t.qs, lds, qkv, dt, off, ld3, q0, T, hd, tf32);
    simt_load(t.dos, lds, dy, dydt, doff, D, q0, T, hd, tf32);
    simt_load_stats(t.ls, t.ds, lse, dd, int64_t(bh) * T, q0, T);
    __syncthreads();
    simt_p_ds(t.qs, t.dos, t.ks, t.vs, t.ls, t.ds, t.ps, t.dss, q0, k0, T, hd, lds, scale);
    __syncthreads();  // columns of P and dS come from every warp
    for (int c = lane; c < hd; c += 32) {
      float av[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ak[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
      for (int i = 0; i < kS; ++i) {
        const float dov = t.dos[i * lds + c], qv = t.qs[i * lds + c];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          av[u] = fmaf(t.ps[i * kPs + warp + 8 * u], dov, av[u]);
          ak[u] = fmaf(t.dss[i * kPs + warp + 8 * u], qv, ak[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        dvs[(warp + 8 * u) * hd + c] += av[u];
        dks[(warp + 8 * u) * hd + c] += ak[u];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int j = warp + 8 * u, key = k0 + j;
    if (key >= T) continue;
    const int64_t row = (int64_t(b) * T + key) * ld3 + int64_t(h) * hd;
    for (int c = lane; c < hd; c += 32) {
      st(dqkv, row + D + c, dqdt, dks[j * hd + c] * scale);
      st(dqkv, row + 2 * D + c, dqdt, dvs[j * hd + c]);
    }
  }
}

// D[b, h, t] = dy . y over the head's hd columns (unrounded dy, as the CPU): one warp per row.
__global__ void rowdot_kernel(const void* dy, int dydt, const void* y, int ydt, float* dd, int64_t rows, int T, int H,
                              int hd) {
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;  // r = (b*T + t)*H + h
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = lane; c < hd; c += 32) s = fmaf(ld(dy, r * hd + c, dydt), ld(y, r * hd + c, ydt), s);
  s = warp_sum(s);
  if (lane == 0) {
    const int64_t h = r % H, bt = r / H, b = bt / T, t = bt % T;
    dd[(b * H + h) * T + t] = s;
  }
}

// The same D with 16-byte loads where dy and y share a 16- or 32-bit format and a head row is
// whole 16-byte chunks (hd = 64 bf16: 8 lanes a row, 4 rows a warp, every load coalesced). Each
// lane sums its chunk in order, then the row's lanes combine by shuffles: fp32 throughout, as the
// generic kernel (the sums differ from it only in order).
template <typename E, int kLanes>
__global__ void rowdot_vec_kernel(const E* __restrict__ dy, const E* __restrict__ y, float* __restrict__ dd,
                                  int64_t rows, int T, int H, int hd) {
  constexpr int kV = 16 / int(sizeof(E));
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
  const int sub = threadIdx.x % kLanes;
  float s = 0.0f;
  if (r < rows) {
    for (int c = sub * kV; c < hd; c += kLanes * kV) {
      const uint4 a = *reinterpret_cast<const uint4*>(dy + r * hd + c);
      const uint4 b = *reinterpret_cast<const uint4*>(y + r * hd + c);
      const E* ea = reinterpret_cast<const E*>(&a);
      const E* eb = reinterpret_cast<const E*>(&b);
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        if constexpr (std::is_same_v<E, float>)
          s = fmaf(ea[i], eb[i], s);
        else if constexpr (std::is_same_v<E, __half>)
          s = fmaf(__half2float(ea[i]), __half2float(eb[i]), s);
        else
          s = fmaf(__bfloat162float(ea[i]), __bfloat162float(eb[i]), s);
      }
    }
  }
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (r < rows && sub == 0) {
    const int64_t h = r % H, bt = r / H, b = bt / T, t = bt % T;
    dd[(b * H + h) * T + t] = s;
  }
}

template <typename E>
bool rowdot_vec(const void* dy, const void* y, float* dd, int64_t rows, int64_t T, int64_t H, int64_t hd,
                cudaStream_t s) {
  constexpr int kV = 16 / int(sizeof(E));
  if (hd % kV != 0 || reinterpret_cast<uintptr_t>(dy) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0) return false;
  const int64_t chunks = hd / kV;
  const auto go = [&](auto lanes) {
    constexpr int kL = decltype(lanes)::value;
    rowdot_vec_kernel<E, kL><<<blocks_for(rows * kL, 256, 0x7fffffffu), 256, 0, s>>>(
        static_cast<const E*>(dy), static_cast<const E*>(y), dd, rows, int(T), int(H), int(hd));
  };
  if (chunks <= 4)
    go(std::integral_constant<int, 4>{});
  else if (chunks <= 8)
    go(std::integral_constant<int, 8>{});
  else
    go(std::integral_constant<int, 16>{});
  TL_LAUNCH_CHECK("attention rowdot_vec");
  return true;
}

// D = rowdot(dy, y) into dd [B, H, T]: the vector kernel where the formats allow, else one warp
// a row with per-element format conversion.
void launch_rowdot(const void* dy, int dy_dt, const void* y, int y_dt, float* dd, int64_t rows, int64_t T, int64_t H,
                   int64_t hd, cudaStream_t s) {
  if (dy_dt == y_dt) {
    if (dy_dt == kBF16 && rowdot_vec<__nv_bfloat16>(dy, y, dd, rows, T, H, hd, s)) return;
    if (dy_dt == kF16 && rowdot_vec<__half>(dy, y, dd, rows, T, H, hd, s)) return;
    if (dy_dt == kF32 && rowdot_vec<float>(dy, y, dd, rows, T, H, hd, s)) return;
  }
  rowdot_kernel<<<blocks_for(rows, 8, 0x7fffffffu), 256, 0, s>>>(dy, dy_dt, y, y_dt, dd, rows, int(T), int(H), int(hd));
  TL_LAUNCH_CHECK("attention rowdot");
}

int optin_smem() {
  int dev = 0, v = 0;
  TL_CUDA_CHECK(cudaGetDevice(&dev));
  TL_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return v;
}

// Raises the kernel's dynamic shared-memory limit to `bytes` (an Error naming the op if the
// device cannot give that much).
// The limit is raised once per (device, kernel) and only ever grows, so launches inside a captured
// step make no attribute calls after the eager first step.
template <typename K>
void allow_smem(K kernel, size_t bytes, const char* op, int64_t hd) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> raised;
  int dev = 0;
  TL_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  size_t& have = raised[{dev, reinterpret_cast<const void*>(kernel)}];
  if (have >= bytes) return;
  const int limit = optin_smem();
  if (bytes > static_cast<size_t>(limit))
    throw Error(std::string(op) + ": head dim " + std::to_string(hd) + " needs " + std::to_string(bytes) +
                " bytes of shared memory per block, more than this GPU offers (" + std::to_string(limit) + ")");
  TL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  have = bytes;
}

void check_dims(const char* op, int64_t B, int64_t T, int64_t H, int64_t hd) {
  if (B < 1 || T < 1 || H < 1 || hd < 1 || B * H > 2147483647LL || T > (1LL << 21) || B * T * H * hd * 3 > (1LL << 40))
    throw Error(std::string(op) + ": unsupported shape B=" + std::to_string(B) + " T=" + std::to_string(T) +
                " H=" + std::to_string(H) + " hd=" + std::to_string(hd));
}

// The tensor cores take bf16 / fp16 / fp32 inputs (all of them in one format) with hd <= 128:
// the padded head dim, or 0 for the SIMT path.
int tc_hdp(int qkv_dt, int other_dt, int64_t hd) {
  const bool fmt = qkv_dt == kBF16 || qkv_dt == kF16 || qkv_dt == kF32;
  if (!fmt || other_dt != qkv_dt || hd > 128) return 0;
  return hd <= 16 ? 16 : hd <= 32 ? 32 : hd <= 64 ? 64 : 128;
}

template <int HDP>
constexpr int dkv_queries() {
  return HDP >= 128 ? 16 : 64;  // fewer registers next to the two hd-wide accumulators at hd 128
}
// Shared-memory bytes of the tensor-core kernels (tile rows x padded row, see attention_tc.cuh).
template <typename E, int HDP>
constexpr size_t tile_row_bytes() {
  return size_t(HDP + attn::kPad<E>) * sizeof(E);
}
template <typename E, int HDP>
constexpr size_t fwd_tc_bytes() {
  return size_t(attn::fwd_rows<HDP>() + 4 * attn::kKeys) * tile_row_bytes<E, HDP>();
}
template <typename E, int HDP>
constexpr size_t dq_tc_bytes() {
  return size_t(2 * attn::kRows + 4 * attn::kKeys) * tile_row_bytes<E, HDP>();
}
template <typename E, int HDP>
constexpr size_t dkv_tc_bytes() {
  return size_t(2 * attn::kRows + 4 * dkv_queries<HDP>()) * tile_row_bytes<E, HDP>() +
         4 * dkv_queries<HDP>() * sizeof(float);
}

// 16-byte loads: rows of whole 16-byte chunks from 16-byte aligned bases.
template <typename E>
bool vec_ok(int64_t hd, const void* a, const void* b) {
  return hd % attn::kVec<E> == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(b) % 16 == 0;
}

template <typename E, int HDP>
void tc_forward(const void* qkv, void* y, int ydt, float* lse, int64_t B, int64_t T, int64_t H, int64_t hd,
                cudaStream_t s) {
  const size_t bytes = fwd_tc_bytes<E, HDP>();
  allow_smem(attn::fwd_tc<E, HDP>, bytes, "attention_forward", hd);
  constexpr int kBlockRows = attn::fwd_rows<HDP>();
  const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((T + kBlockRows - 1) / kBlockRows));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  attn::fwd_tc<E, HDP><<<grid, attn::kThreads, bytes, s>>>(static_cast<const E*>(qkv), y, ydt, lse, int(T), int(H),
                                                           int(hd), scale * attn::kLog2e, vec_ok<E>(hd, qkv, qkv));
  TL_LAUNCH_CHECK("attention fwd_tc");
}

template <typename E, int HDP>
void tc_backward(const void* qkv, const void* dy, const float* lse, const float* dd, void* dqkv, int dqdt, int64_t B,
                 int64_t T, int64_t H, int64_t hd, cudaStream_t s) {
  constexpr int kNq = dkv_queries<HDP>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const unsigned bh = static_cast<unsigned>(B * H), tiles = static_cast<unsigned>((T + attn::kRows - 1) / attn::kRows);
  const bool vec = vec_ok<E>(hd, qkv, dy);
  allow_smem(attn::bwd_dkv_tc<E, HDP, kNq>, dkv_tc_bytes<E, HDP>(), "attention_backward", hd);
  attn::bwd_dkv_tc<E, HDP, kNq><<<dim3(bh, tiles), attn::kThreads, dkv_tc_bytes<E, HDP>(), s>>>(
      static_cast<const E*>(qkv), static_cast<const E*>(dy), lse, dd, dqkv, dqdt, int(T), int(H), int(hd), scale, vec);
  TL_LAUNCH_CHECK("attention bwd_dkv_tc");
  allow_smem(attn::bwd_dq_tc<E, HDP>, dq_tc_bytes<E, HDP>(), "attention_backward", hd);
  attn::bwd_dq_tc<E, HDP><<<dim3(bh, tiles), attn::kThreads, dq_tc_bytes<E, HDP>(), s>>>(
      static_cast<const E*>(qkv), static_cast<const E*>(dy), lse, dd, dqkv, dqdt, int(T), int(H), int(hd), scale, vec);
  TL_LAUNCH_CHECK("attention bwd_dq_tc");
}

template <typename E>
void tc_forward_hd(int hdp, const void* qkv, void* y, int ydt, float* lse, int64_t B, int64_t T, int64_t H, int64_t hd,
                   cudaStream_t s) {
  switch (hdp) {
    case 16: return tc_forward<E, 16>(qkv, y, ydt, lse, B, T, H, hd, s);
    case 32: return tc_forward<E, 32>(qkv, y, ydt, lse, B, T, H, hd, s);
    case 64: return tc_forward<E, 64>(qkv, y, ydt, lse, B, T, H, hd, s);
    default: return tc_forward<E, 128>(qkv, y, ydt, lse, B, T, H, hd, s);
  }
}
// The dK/dV and dQ kernels for the padded head dim.
template <typename E>
void tc_backward_hd(int hdp, const void* qkv, const void* dy, const float* lse, const float* dd, void* dqkv, int dqdt,
                    int64_t B, int64_t T, int64_t H, int64_t hd, cudaStream_t s) {
  switch (hdp) {
    case 16: return tc_backward<E, 16>(qkv, dy, lse, dd, dqkv, dqdt, B, T, H, hd, s);
    case 32: return tc_backward<E, 32>(qkv, dy, lse, dd, dqkv, dqdt, B, T, H, hd, s);
    case 64: return tc_backward<E, 64>(qkv, dy, lse, dd, dqkv, dqdt, B, T, H, hd, s);
    default: return tc_backward<E, 128>(qkv, dy, lse, dd, dqkv, dqdt, B, T, H, hd, s);
  }
}
}  // namespace

int64_t attention_backward_scratch_floats(int64_t B, int64_t T, int64_t H, int64_t /*hd*/, int /*qkv_dt*/,
                                          int /*dy_dt*/, bool /*tf32*/) {
  return B * H * T;  // D
}

void launch_attention_forward(const void* qkv, int qkv_dt, void* y, int y_dt, float* lse, int64_t B, int64_t T,
                              int64_t H, int64_t hd, bool tf32, bool wgmma, cudaStream_t s) {
  check_dims("attention_forward", B, T, H, hd);
  if (wgmma && launch_attention_forward_wgmma(qkv, qkv_dt, y, y_dt, lse, B, T, H, hd, s)) return;
  const int hdp = tc_hdp(qkv_dt, qkv_dt, hd);
  if (hdp && qkv_dt == kBF16) return tc_forward_hd<__nv_bfloat16>(hdp, qkv, y, y_dt, lse, B, T, H, hd, s);
  if (hdp && qkv_dt == kF16) return tc_forward_hd<__half>(hdp, qkv, y, y_dt, lse, B, T, H, hd, s);
  if (hdp && tf32) return tc_forward_hd<float>(hdp, qkv, y, y_dt, lse, B, T, H, hd, s);
  if (hdp) return tc_forward_hd<attn::F32x3>(hdp, qkv, y, y_dt, lse, B, T, H, hd, s);
  const int l = simt_lds(int(hd));
  const size_t bytes = sizeof(float) * (size_t(3) * kS * l + size_t(kS) * hd + kS * kPs);
  allow_smem(fwd_simt, bytes, "attention_forward", hd);
  const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((T + kS - 1) / kS));
  fwd_simt<<<grid, kSimtThreads, bytes, s>>>(qkv, qkv_dt, y, y_dt, lse, int(T), int(H), int(hd),
                                             1.0f / std::sqrt(static_cast<float>(hd)), tf32);
  TL_LAUNCH_CHECK("attention fwd_simt");
}

void launch_attention_backward(const void* qkv, int qkv_dt, const void* y, int y_dt, const void* dy, int dy_dt,
                               const float* lse, float* scratch, void* dqkv, int dqkv_dt, int64_t B, int64_t T,
                               int64_t H, int64_t hd, bool tf32, bool wgmma, cudaStream_t s) {
  check_dims("attention_backward", B, T, H, hd);
  const int64_t rows = B * T * H;
  launch_rowdot(dy, dy_dt, y, y_dt, scratch, rows, T, H, hd, s);
  if (wgmma && launch_attention_backward_wgmma(qkv, qkv_dt, dy, dy_dt, lse, scratch, dqkv, dqkv_dt, B, T, H, hd, s))
    return;
  const int hdp = tc_hdp(qkv_dt, dy_dt, hd);
  if (hdp && qkv_dt == kBF16)
    return tc_backward_hd<__nv_bfloat16>(hdp, qkv, dy, lse, scratch, dqkv, dqkv_dt, B, T, H, hd, s);
  if (hdp && qkv_dt == kF16) return tc_backward_hd<__half>(hdp, qkv, dy, lse, scratch, dqkv, dqkv_dt, B, T, H, hd, s);
  if (hdp && tf32) return tc_backward_hd<float>(hdp, qkv, dy, lse, scratch, dqkv, dqkv_dt, B, T, H, hd, s);
  if (hdp) return tc_backward_hd<attn::F32x3>(hdp, qkv, dy, lse, scratch, dqkv, dqkv_dt, B, T, H, hd, s);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((T + kS - 1) / kS));
  const size_t dkv_bytes = simt_bwd_bytes(int(hd), 2), dq_bytes = simt_bwd_bytes(int(hd), 1);
  allow_smem(bwd_dkv_simt, dkv_bytes, "attention_backward", hd);
  bwd_dkv_simt<<<grid, kSimtThreads, dkv_bytes, s>>>(qkv, qkv_dt, dy, dy_dt, lse, scratch, dqkv, dqkv_dt, int(T),
                                                     int(H), int(hd), scale, tf32);
  TL_LAUNCH_CHECK("attention bwd_dkv_simt");
  allow_smem(bwd_dq_simt, dq_bytes, "attention_backward", hd);
  bwd_dq_simt<<<grid, kSimtThreads, dq_bytes, s>>>(qkv, qkv_dt, dy, dy_dt, lse, scratch, dqkv, dqkv_dt, int(T), int(H),
                                                   int(hd), scale, tf32);
  TL_LAUNCH_CHECK("attention bwd_dq_simt");
}

}  // namespace trainlab::kern
