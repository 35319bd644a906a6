// tools/wgmma_lab/wgmma_bwd_lab.cu: a development harness for the wgmma attention backward
// (tools/wgmma_lab/attention_wgmma_bwd.cuh; not part of the build or the tests). Random bf16 inputs
// (qkv in [-2, 2], dy in [-0.5, 0.5]), y and lse by attn::fwd_tc<bf16, 64>, D = rowdot(dy, y);
// then the reference bwd_dkv_tc<bf16, 64, 64> / bwd_dq_tc<bf16, 64> (kernels/attention_tc.cuh)
// and each wgmma variant, comparing dq, dk, dv (max |diff| / max |ref| per part, and the count of
// elements that differ at all) over several shapes (edges included), and timing every kernel
// (median of 21 event-timed launches) at the char-gpt2 and char-small shapes. Exit status 1 on a
// mismatch (relative error > 1e-2) or a CUDA error. sm_90a only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attention_tc.cuh"
#include "attention_wgmma_bwd.cuh"
using namespace trainlab::kern;
using E = __nv_bfloat16;
#define CK(x)                                                      \
  do {                                                             \
    cudaError_t e_ = (x);                                          \
    if (e_ != cudaSuccess) {                                       \
      printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); \
      exit(1);                                                     \
    }                                                              \
  } while (0)

__global__ void rowdot(const E* dy, const E* y, float* dd, long rows, int T, int H, int hd) {
  long r = long(blockIdx.x) * 8 + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0;
  for (int c = lane; c < hd; c += 32) s += __bfloat162float(dy[r * hd + c]) * __bfloat162float(y[r * hd + c]);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (!lane) {
    long h = r % H, bt = r / H, b = bt / T, t = bt % T;
    dd[(b * H + h) * T + t] = s;
  }
}
struct Sh {
  int B, T, H, hd;
};
template <class F>
float med(F f, int n = 21) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> v;
  for (int i = 0; i < n + 2; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 2) v.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
static float bf(E x) { return __bfloat162float(x); }

using Kern = void (*)(const E*, const E*, const float*, const float*, void*, int, int, int, int, float, bool);
struct Variant {
  const char* name;
  Kern k;
  int nwg, smem;
  bool dkv;  // writes dk, dv (else dq)
};
template <int NWG, int ST, int MINB, bool PIPE = true>
Variant make_dkv(const char* name) {
  Kern k = attn_wg::bwd_dkv_wg<NWG, ST, MINB, PIPE>;
  const int sm = attn_wg::dkv_smem_bytes(NWG, ST);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm));
  return {name, k, NWG, sm, true};
}
template <int NWG, int ST, int MINB, bool PIPE = true>
Variant make_dq(const char* name) {
  Kern k = attn_wg::bwd_dq_wg<NWG, ST, MINB, PIPE>;
  const int sm = attn_wg::dq_smem_bytes(NWG, ST);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm));
  return {name, k, NWG, sm, false};
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  constexpr int kLds = 64 + 8;
  const int fwd_b = (128 + 256) * kLds * 2, dq_b = (128 + 256) * kLds * 2, dkv_b = (128 + 256) * kLds * 2 + 4 * 64 * 4;
  CK(cudaFuncSetAttribute(attn::fwd_tc<E, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize, fwd_b));
  CK(cudaFuncSetAttribute(attn::bwd_dq_tc<E, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize, dq_b));
  CK(cudaFuncSetAttribute(attn::bwd_dkv_tc<E, 64, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize, dkv_b));
  // Index 0 of each kind goes through the header's launcher (the tuned configuration).
  std::vector<Variant> vs = {
      make_dkv<attn_wg::kDkvWarpgroups, attn_wg::kDkvStages, attn_wg::kDkvMinBlocks, attn_wg::kDkvPipe>("dkv (launcher)"),
      make_dkv<1, 3, 2>("dkv wg1 st3 b2"),
      make_dkv<2, 3, 1>("dkv wg2 st3 b1"),
      make_dkv<3, 3, 1, false>("dkv wg3 st3 b1 serial"),
      make_dq<attn_wg::kDqWarpgroups, attn_wg::kDqStages, attn_wg::kDqMinBlocks, attn_wg::kDqPipe>("dq (launcher)"),
      make_dq<2, 4, 2, false>("dq wg2 st4 b2 serial"),
      make_dq<1, 3, 3>("dq wg1 st3 b3"),
      make_dq<2, 3, 1>("dq wg2 st3 b1"),
  };
  const bool timing = !getenv("WG_NOTIME");
  Sh shapes[] = {{16, 1024, 12, 64}, {64, 256, 6, 64}, {3, 200, 2, 64}, {2, 1, 3, 64}, {2, 77, 2, 64}};
  int bad = 0;
  for (const Sh s : shapes) {
    const long N = long(s.B) * s.T, D = long(s.H) * s.hd, BH = long(s.B) * s.H;
    std::vector<E> hq(N * 3 * D), hdy(N * D);
    srand(12345 + s.T);
    for (auto& x : hq) x = __float2bfloat16((rand() / float(RAND_MAX) - 0.5f) * 4.0f);
    for (auto& x : hdy) x = __float2bfloat16((rand() / float(RAND_MAX) - 0.5f));
    E *qkv, *dy, *y, *g0, *g1;
    float *lse, *dd;
    CK(cudaMalloc(&qkv, N * 3 * D * 2));
    CK(cudaMalloc(&dy, N * D * 2));
    CK(cudaMalloc(&y, N * D * 2));
    CK(cudaMalloc(&g0, N * 3 * D * 2));
    CK(cudaMalloc(&g1, N * 3 * D * 2));
    CK(cudaMalloc(&lse, BH * s.T * 4));
    CK(cudaMalloc(&dd, BH * s.T * 4));
    CK(cudaMemcpy(qkv, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, hdy.data(), hdy.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(g0, 0xff, N * 3 * D * 2));
    const float scale = 1.0f / sqrtf(float(s.hd));
    dim3 gf(BH, (s.T + 127) / 128), gb(BH, (s.T + 63) / 64);
    attn::fwd_tc<E, 64><<<gf, 128, fwd_b>>>(qkv, y, kBF16, lse, s.T, s.H, s.hd, scale * 1.4426950408889634f, true);
    rowdot<<<(N * s.H + 7) / 8, 256>>>(dy, y, dd, N * s.H, s.T, s.H, s.hd);
    auto dkv0 = [&] {
      attn::bwd_dkv_tc<E, 64, 64><<<gb, 128, dkv_b>>>(qkv, dy, lse, dd, g0, kBF16, s.T, s.H, s.hd, scale, true);
    };
    auto dq0 = [&] { attn::bwd_dq_tc<E, 64><<<gb, 128, dq_b>>>(qkv, dy, lse, dd, g0, kBF16, s.T, s.H, s.hd, scale, true); };
    dkv0();
    dq0();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<E> a(N * 3 * D), c(N * 3 * D);
    CK(cudaMemcpy(a.data(), g0, a.size() * 2, cudaMemcpyDeviceToHost));
    float tk0 = 0, tq0 = 0;
    if (s.T >= 256 && timing) {
      tk0 = med(dkv0), tq0 = med(dq0);
      printf("shape B%d T%d H%d: bwd_dkv_tc %.4f ms, bwd_dq_tc %.4f ms, total %.4f\n", s.B, s.T, s.H, tk0, tq0,
             tk0 + tq0);
    }
    for (const Variant& v : vs) {
      CK(cudaMemset(g1, 0xff, N * 3 * D * 2));
      const int rows = v.nwg * 64;
      dim3 g(BH, (s.T + rows - 1) / rows);
      const bool launcher = &v == &vs[0] || &v == &vs[4];
      auto run = [&] {
        if (launcher && v.dkv)
          CK(attn_wg::launch_bwd_dkv(qkv, dy, lse, dd, g1, kBF16, s.B, s.T, s.H, scale));
        else if (launcher)
          CK(attn_wg::launch_bwd_dq(qkv, dy, lse, dd, g1, kBF16, s.B, s.T, s.H, scale));
        else
          v.k<<<g, v.nwg * 128, v.smem>>>(qkv, dy, lse, dd, g1, kBF16, s.T, s.H, s.hd, scale, true);
      };
      run();
      CK(cudaDeviceSynchronize());
      CK(cudaGetLastError());
      CK(cudaMemcpy(c.data(), g1, c.size() * 2, cudaMemcpyDeviceToHost));
      double mg[3] = {0, 0, 0}, sg[3] = {0, 0, 0};
      long ndiff[3] = {0, 0, 0}, worst[3] = {0, 0, 0};
      for (long i = 0; i < N * 3 * D; ++i) {
        const int part = int((i % (3 * D)) / D);
        if (v.dkv != (part > 0)) continue;
        double d = fabs(bf(a[i]) - bf(c[i]));
        if (!(d <= 1e30)) d = 1e30;
        if (d > 0) ++ndiff[part];
        if (d > mg[part]) mg[part] = d, worst[part] = i;
        sg[part] = std::max(sg[part], (double)fabs(bf(a[i])));
      }
      bool ok = true;
      printf("  %-16s B%d T%d H%d:", v.name, s.B, s.T, s.H);
      const char* nm[3] = {"dq", "dk", "dv"};
      for (int p = 0; p < 3; ++p) {
        if (v.dkv != (p > 0)) continue;
        const double r = sg[p] > 0 ? mg[p] / sg[p] : mg[p];
        ok = ok && r <= 1e-2;
        printf(" %s rel %.2e (%ld differ)", nm[p], r, ndiff[p]);
        if (r > 1e-2) {
          const long w = worst[p], row = w / (3 * D), col = w % D;
          printf(" [worst row %ld col %ld ref %g got %g]", row, col, bf(a[w]), bf(c[w]));
        }
      }
      bad += !ok;
      printf(" %s", ok ? "PASS" : "FAIL");
      if (s.T >= 256 && timing) {
        const float t = med(run), tr = v.dkv ? tk0 : tq0;
        printf("  %.4f ms (%.2fx)", t, tr / t);
      }
      printf("\n");
    }
    cudaFree(qkv);
    cudaFree(dy);
    cudaFree(y);
    cudaFree(g0);
    cudaFree(g1);
    cudaFree(lse);
    cudaFree(dd);
  }
  printf(bad ? "FAILED %d\n" : "ALL PASS\n", bad);
  return bad != 0;
}
