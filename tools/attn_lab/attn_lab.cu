// tools/attn_lab/attn_lab.cu: a development harness for the tensor-core attention kernels (not part
// of the build or the tests). It compiles a reference revision of kernels/attention_tc.cuh (namespace
// attn_old, made by run.sh) next to the working copy and, in bf16 at hd 64, compares y, lse, dq, dk
// and dv of the two on random inputs (several shapes, edges included) and times each kernel (median of
// 21 event-timed launches) at the char-gpt2 and char-small shapes; NQ32=1 runs the 32-query dK/dV
// variant in the comparison. Exit status 1 on a mismatch. One build is ~30 s, so several variants fit
// in one device command (see run.sh).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cstring>
#include "attn_old.cuh"
#include "attention_tc.cuh"
using namespace trainlab::kern;
using E = __nv_bfloat16;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

__global__ void rowdot(const E* dy, const E* y, float* dd, long rows, int T, int H, int hd) {
  long r = long(blockIdx.x) * 8 + threadIdx.x / 32; int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0;
  for (int c = lane; c < hd; c += 32) s += __bfloat162float(dy[r * hd + c]) * __bfloat162float(y[r * hd + c]);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (!lane) { long h = r % H, bt = r / H, b = bt / T, t = bt % T; dd[(b * H + h) * T + t] = s; }
}
struct Sh { int B, T, H, hd; };
template <class F> float med(F f, int n = 21) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> v;
  for (int i = 0; i < n + 2; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 2) v.push_back(ms); }
  CK(cudaGetLastError());
  std::sort(v.begin(), v.end()); return v[v.size() / 2];
}
static float bf(E x) { return __bfloat162float(x); }
template <class K> void smem(K k, size_t b) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b)); }

int main() {
  constexpr int HDP = 64, kLds = HDP + 8;
  const size_t fwd_b = (128 + 256) * kLds * 2, dq_b = (128 + 256) * kLds * 2, dkv_b = (128 + 256) * kLds * 2 + 4 * 64 * 4;
  smem(attn_old::fwd_tc<E, 64>, fwd_b); smem(attn::fwd_tc<E, 64>, fwd_b);
  smem(attn_old::bwd_dq_tc<E, 64>, dq_b); smem(attn::bwd_dq_tc<E, 64>, dq_b);
  smem(attn_old::bwd_dkv_tc<E, 64, 64>, dkv_b); smem(attn::bwd_dkv_tc<E, 64, 64>, dkv_b);
  const size_t dkv32_b = (128 + 128) * kLds * 2 + 4 * 32 * 4;
  smem(attn::bwd_dkv_tc<E, 64, 32>, dkv32_b);
  Sh shapes[] = {{16, 1024, 12, 64}, {64, 256, 6, 64}, {3, 200, 2, 64}, {2, 1, 3, 64}, {2, 77, 2, 64}};
  int bad = 0;
  for (Sh s : shapes) {
    const long N = long(s.B) * s.T, D = long(s.H) * s.hd, BH = long(s.B) * s.H;
    std::vector<E> hq(N * 3 * D), hdy(N * D);
    srand(12345 + s.T);
    for (auto& x : hq) x = __float2bfloat16((rand() / float(RAND_MAX) - 0.5f) * 4.0f);
    for (auto& x : hdy) x = __float2bfloat16((rand() / float(RAND_MAX) - 0.5f));
    E *qkv, *dy, *y0, *y1, *g0, *g1; float *l0, *l1, *dd;
    CK(cudaMalloc(&qkv, N * 3 * D * 2)); CK(cudaMalloc(&dy, N * D * 2)); CK(cudaMalloc(&y0, N * D * 2)); CK(cudaMalloc(&y1, N * D * 2));
    CK(cudaMalloc(&g0, N * 3 * D * 2)); CK(cudaMalloc(&g1, N * 3 * D * 2)); CK(cudaMalloc(&l0, BH * s.T * 4)); CK(cudaMalloc(&l1, BH * s.T * 4)); CK(cudaMalloc(&dd, BH * s.T * 4));
    CK(cudaMemcpy(qkv, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dy, hdy.data(), hdy.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(y1, 0xff, N * D * 2)); CK(cudaMemset(g1, 0xff, N * 3 * D * 2)); CK(cudaMemset(l1, 0xff, BH * s.T * 4));
    const float scale = 1.0f / sqrtf(float(s.hd));
    dim3 gf(BH, (s.T + 127) / 128), gb(BH, (s.T + 63) / 64);
    auto fwd0 = [&] { attn_old::fwd_tc<E, 64><<<gf, 128, fwd_b>>>(qkv, y0, kBF16, l0, s.T, s.H, s.hd, scale * 1.4426950408889634f, true); };
    auto fwd1 = [&] { attn::fwd_tc<E, 64><<<gf, 128, fwd_b>>>(qkv, y1, kBF16, l1, s.T, s.H, s.hd, scale * 1.4426950408889634f, true); };
    fwd0(); fwd1(); CK(cudaDeviceSynchronize());
    rowdot<<<(N * s.H + 7) / 8, 256>>>(dy, y0, dd, N * s.H, s.T, s.H, s.hd);
    auto dkv0 = [&] { attn_old::bwd_dkv_tc<E, 64, 64><<<gb, 128, dkv_b>>>(qkv, dy, l0, dd, g0, kBF16, s.T, s.H, s.hd, scale, true); };
    auto dq0 = [&] { attn_old::bwd_dq_tc<E, 64><<<gb, 128, dq_b>>>(qkv, dy, l0, dd, g0, kBF16, s.T, s.H, s.hd, scale, true); };
    auto dkv1 = [&] { attn::bwd_dkv_tc<E, 64, 64><<<gb, 128, dkv_b>>>(qkv, dy, l0, dd, g1, kBF16, s.T, s.H, s.hd, scale, true); };
    auto dq1 = [&] { attn::bwd_dq_tc<E, 64><<<gb, 128, dq_b>>>(qkv, dy, l0, dd, g1, kBF16, s.T, s.H, s.hd, scale, true); };
    auto dkv2 = [&] { attn::bwd_dkv_tc<E, 64, 32><<<gb, 128, dkv32_b>>>(qkv, dy, l0, dd, g1, kBF16, s.T, s.H, s.hd, scale, true); };
    if (getenv("NQ32")) { dkv0(); dq0(); dkv2(); dq1(); } else {
    dkv0(); dq0(); dkv1(); dq1(); } CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
    std::vector<E> a(N * 3 * D), b2(N * 3 * D); std::vector<float> la(BH * s.T), lb(BH * s.T);
    CK(cudaMemcpy(a.data(), y0, N * D * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b2.data(), y1, N * D * 2, cudaMemcpyDeviceToHost));
    double my = 0, sy = 0;
    for (long i = 0; i < N * D; ++i) { double d = fabs(bf(a[i]) - bf(b2[i])); if (!(d <= 1e30)) d = 1e30; my = std::max(my, d); sy = std::max(sy, (double)fabs(bf(a[i]))); }
    CK(cudaMemcpy(la.data(), l0, la.size() * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(lb.data(), l1, lb.size() * 4, cudaMemcpyDeviceToHost));
    double ml = 0; for (size_t i = 0; i < la.size(); ++i) { double d = fabs(la[i] - lb[i]); if (!(d <= 1e30)) d = 1e30; ml = std::max(ml, d); }
    CK(cudaMemcpy(a.data(), g0, N * 3 * D * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b2.data(), g1, N * 3 * D * 2, cudaMemcpyDeviceToHost));
    double mg[3] = {0, 0, 0}, sg[3] = {0, 0, 0};
    for (long i = 0; i < N * 3 * D; ++i) { int part = (i % (3 * D)) / D; double d = fabs(bf(a[i]) - bf(b2[i])); if (!(d <= 1e30)) d = 1e30;
      mg[part] = std::max(mg[part], d); sg[part] = std::max(sg[part], (double)fabs(bf(a[i]))); }
    const double ry = my / sy, rq = mg[0] / sg[0], rk = mg[1] / sg[1], rv = mg[2] / sg[2];
    const bool ok = ry < 1e-2 && ml < 1e-3 && rq < 1e-2 && rk < 1e-2 && rv < 1e-2;
    bad += !ok;
    printf("shape B%d T%d H%d: rel diff y %.2e lse %.2e dq %.2e dk %.2e dv %.2e %s\n", s.B, s.T, s.H, ry, ml, rq, rk, rv, ok ? "OK" : "MISMATCH");
    if (s.T >= 256) {
      const double fl = 4.0 * BH * double(s.T) * s.T / 2 * s.hd;
      float f0 = med(fwd0), f1 = med(fwd1), k0 = med(dkv0), k1 = med(dkv1), q0 = med(dq0), q1 = med(dq1);
      const float k2 = med(dkv2); printf("  dkv NQ=32 %.4f ms\n", k2);
      printf("  fwd old %.4f new %.4f ms (%.0f -> %.0f TFLOP/s)\n", f0, f1, fl / f0 / 1e9, fl / f1 / 1e9);
      printf("  dkv old %.4f new %.4f ms; dq old %.4f new %.4f ms; bwd old %.4f new %.4f (%.0f -> %.0f TFLOP/s)\n", k0, k1, q0, q1, k0 + q0, k1 + q1,
             2.5 * fl / (k0 + q0) / 1e9, 2.5 * fl / (k1 + q1) / 1e9);
    }
    cudaFree(qkv); cudaFree(dy); cudaFree(y0); cudaFree(y1); cudaFree(g0); cudaFree(g1); cudaFree(l0); cudaFree(l1); cudaFree(dd);
  }
  printf(bad ? "FAILED %d\n" : "ALL OK\n", bad);
  return bad != 0;
}
