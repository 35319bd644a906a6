// tools/wgmma_lab/wgmma_lab.cu: a development harness for the wgmma attention forward
// (attention_wgmma.cuh; not part of the build or the tests). It runs fwd_tc<bf16, 64> (the
// reference, kernels/attention_tc.cuh) and each fwd_wg variant on the same random bf16 inputs in
// [-2, 2] over several shapes (edges included), reports max |dy| and max |dlse| per shape and
// variant, and times the kernels (median of 21 event-timed launches) at the char-gpt2 and
// char-small shapes. Exit status 1 on a mismatch (|dy| > 2e-2 or |dlse| > 1e-4). sm_90a only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attention_tc.cuh"
#include "attention_wgmma.cuh"
using namespace trainlab::kern;
using E = __nv_bfloat16;
#define CK(x)                                                                \
  do {                                                                       \
    cudaError_t e_ = (x);                                                    \
    if (e_ != cudaSuccess) {                                                 \
      printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__);           \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

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

using Kern = void (*)(const E*, void*, int, float*, int, int, int, float, bool);
struct Variant {
  const char* name;
  Kern k;
  int nwg, smem;
};
template <int NWG, int KN, int ST, int MINB>
Variant make(const char* name) {
  Kern k = attn_wg::fwd_wg<NWG, KN, ST, MINB>;
  const int sm = attn_wg::fwd_smem_bytes(NWG, KN, ST);
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm));
  return {name, k, NWG, sm};
}

int main() {
  constexpr int kLds = 64 + 8;
  const size_t fwd_b = (128 + 256) * kLds * 2;
  CK(cudaFuncSetAttribute(attn::fwd_tc<E, 64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd_b));
  setvbuf(stdout, nullptr, _IONBF, 0);
  // The tuned configuration first (what launch_fwd runs), then alternatives for comparison.
  std::vector<Variant> vs = {make<attn_wg::kFwdWarpgroups, attn_wg::kFwdKeys, attn_wg::kFwdStages,
                                  attn_wg::kFwdMinBlocks>("wg2 n64 st4 (tuned)"),
                             make<2, 64, 3, 2>("wg2 n64 st3"), make<1, 64, 3, 3>("wg1 n64 st3"),
                             make<3, 128, 3, 1>("wg3 n128 st3")};
  // WG_ONLY=i keeps variant i alone, WG_SHAPES=n the first n shapes, WG_NOTIME=1 skips the timings
  // (for a profiler run).
  if (const char* e = getenv("WG_ONLY")) vs = {vs[atoi(e)]};  // (index 0 keeps the launcher)
  const bool timing = !getenv("WG_NOTIME");
  Sh shapes[] = {{16, 1024, 12, 64}, {64, 256, 6, 64}, {3, 200, 2, 64}, {2, 1, 3, 64}, {2, 77, 2, 64}};
  const int nshapes = getenv("WG_SHAPES") ? atoi(getenv("WG_SHAPES")) : 5;
  int bad = 0;
  for (int si = 0; si < nshapes; ++si) {
    const Sh s = shapes[si];
    const long N = long(s.B) * s.T, D = long(s.H) * s.hd, BH = long(s.B) * s.H;
    std::vector<E> hq(N * 3 * D);
    srand(12345 + s.T);
    for (auto& x : hq) x = __float2bfloat16((rand() / float(RAND_MAX) - 0.5f) * 4.0f);
    E *qkv, *y0, *y1;
    float *l0, *l1;
    CK(cudaMalloc(&qkv, N * 3 * D * 2));
    CK(cudaMalloc(&y0, N * D * 2));
    CK(cudaMalloc(&y1, N * D * 2));
    CK(cudaMalloc(&l0, BH * s.T * 4));
    CK(cudaMalloc(&l1, BH * s.T * 4));
    CK(cudaMemcpy(qkv, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
    const float sl2 = 1.0f / sqrtf(float(s.hd)) * 1.4426950408889634f;
    dim3 gf(BH, (s.T + 127) / 128);
    auto ref = [&] { attn::fwd_tc<E, 64><<<gf, 128, fwd_b>>>(qkv, y0, kBF16, l0, s.T, s.H, s.hd, sl2, true); };
    ref();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<E> a(N * D), c(N * D);
    std::vector<float> la(BH * s.T), lc(BH * s.T);
    CK(cudaMemcpy(a.data(), y0, N * D * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(la.data(), l0, la.size() * 4, cudaMemcpyDeviceToHost));
    const double fl = 4.0 * BH * double(s.T) * s.T / 2 * s.hd;
    float tref = 0;
    if (s.T >= 256 && timing) {
      tref = med(ref);
      printf("shape B%d T%d H%d: fwd_tc %.4f ms (%.0f TFLOP/s)\n", s.B, s.T, s.H, tref, fl / tref / 1e9);
    }
    for (const Variant& v : vs) {
      CK(cudaMemset(y1, 0xff, N * D * 2));
      CK(cudaMemset(l1, 0xff, BH * s.T * 4));
      const int rows = v.nwg * 64;
      dim3 g(BH, (s.T + rows - 1) / rows);
      const int sm = v.smem;
      // The tuned variant goes through launch_fwd (the header's launcher), the others directly.
      auto run = [&] {
        if (&v == &vs[0])
          CK(attn_wg::launch_fwd(qkv, y1, kBF16, l1, s.B, s.T, s.H, sl2));
        else
          v.k<<<g, v.nwg * 128, sm>>>(qkv, y1, kBF16, l1, s.T, s.H, s.hd, sl2, true);
      };
      run();
      CK(cudaDeviceSynchronize());
      CK(cudaGetLastError());
      CK(cudaMemcpy(c.data(), y1, N * D * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(lc.data(), l1, lc.size() * 4, cudaMemcpyDeviceToHost));
      double my = 0, ml = 0;
      long worst = 0;
      for (long i = 0; i < N * D; ++i) {
        double d = fabs(bf(a[i]) - bf(c[i]));
        if (!(d <= 1e30)) d = 1e30;
        if (d > my) my = d, worst = i;
      }
      for (size_t i = 0; i < la.size(); ++i) {
        double d = fabs(la[i] - lc[i]);
        if (!(d <= 1e30)) d = 1e30;
        ml = std::max(ml, d);
      }
      const bool ok = my <= 2e-2 && ml <= 1e-4;
      bad += !ok;
      printf("  %-20s B%d T%d H%d: max|dy| %.3e max|dlse| %.3e %s", v.name, s.B, s.T, s.H, my, ml, ok ? "PASS" : "FAIL");
      if (!ok)
        printf(" (worst y at row %ld col %ld: ref %g got %g)", worst / D, worst % D, bf(a[worst]), bf(c[worst]));
      if (s.T >= 256 && timing) {
        const float t = med(run);
        printf("  %.4f ms (%.0f TFLOP/s, %.2fx fwd_tc)", t, fl / t / 1e9, tref / t);
      }
      printf("\n");
    }
    cudaFree(qkv);
    cudaFree(y0);
    cudaFree(y1);
    cudaFree(l0);
    cudaFree(l1);
  }
  printf(bad ? "FAILED %d\n" : "ALL PASS\n", bad);
  return bad != 0;
}
