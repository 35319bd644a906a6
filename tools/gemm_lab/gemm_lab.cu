// tools/gemm_lab/gemm_lab.cu: a development harness (not part of the build) that times the
// char-gpt2 step's large products on cuBLASLt in the variants the CUDA backend could use, so a
// change to core/backend/cuda/lt_gemm.cpp or cuda_linear.cpp is chosen by measurement:
//   dW (+ bias gradient):  BGRADB epilogue (the backend's path), no epilogue, best of the
//                          heuristic's first 16 algorithms, and a K split into S batched
//                          products (fp32 partials + BGRADB per part) summed by a small kernel;
//   forward with residual: bias epilogue, then the same with beta = 1 and C = the residual
//                          (D != C), which would make the separate add kernel unnecessary.
// Usage on a CUDA machine: bash tools/gemm_lab/run.sh  (median of 30 timed runs per variant).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    auto e_ = (x);                                                                     \
    if (static_cast<int>(e_) != 0) {                                                   \
      std::printf("error %d at %s:%d: %s\n", static_cast<int>(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace {
cublasLtHandle_t g_lt;
void* g_ws;
constexpr size_t kWs = 32u << 20;
cudaStream_t g_s;

struct Mm {
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, c{}, d{};
  std::vector<cublasLtMatmulAlgo_t> algos;
};

// Column-major D[M, N] = op(A) op(B) (+ beta C), batch `batch` with the given strides.
Mm make(int M, int N, int K, bool ta, bool tb, cudaDataType_t tin, cudaDataType_t tout, cublasLtEpilogue_t epi,
        const void* bias, int batch, long long sa, long long sb, long long sd, int want) {
  Mm m;
  CK(cublasLtMatmulDescCreate(&m.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof(oa)));
  CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof(ob)));
  CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
    CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &tout, sizeof(tout)));
    CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (batch > 1) {
      long long bs = epi == CUBLASLT_EPILOGUE_BGRADB ? N : M;
      CK(cublasLtMatmulDescSetAttribute(m.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bs, sizeof(bs)));
    }
  }
  CK(ta ? cublasLtMatrixLayoutCreate(&m.a, tin, K, M, K) : cublasLtMatrixLayoutCreate(&m.a, tin, M, K, M));
  CK(tb ? cublasLtMatrixLayoutCreate(&m.b, tin, N, K, N) : cublasLtMatrixLayoutCreate(&m.b, tin, K, N, K));
  CK(cublasLtMatrixLayoutCreate(&m.c, tout, M, N, M));
  CK(cublasLtMatrixLayoutCreate(&m.d, tout, M, N, M));
  if (batch > 1) {
    for (auto [l, s] : {std::pair{m.a, sa}, std::pair{m.b, sb}, std::pair{m.c, sd}, std::pair{m.d, sd}}) {
      CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof(s)));
    }
  }
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kWs;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> h(want);
  int found = 0;
  auto st = cublasLtMatmulAlgoGetHeuristic(g_lt, m.desc, m.a, m.b, m.c, m.d, pref, want, h.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i) m.algos.push_back(h[i].algo);
  return m;
}

float time_ms(const std::vector<float>& v) {
  auto w = v;
  std::sort(w.begin(), w.end());
  return w[w.size() / 2];
}

template <typename F>
float timed(F f) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 30; ++i) {
    CK(cudaEventRecord(e0, g_s));
    f();
    CK(cudaEventRecord(e1, g_s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return time_ms(t);
}

int run(Mm& m, int i, const void* A, const void* B, const void* C, void* D, float beta) {
  const float alpha = 1.0f;
  return cublasLtMatmul(g_lt, m.desc, &alpha, A, m.a, B, m.b, &beta, C, m.c, D, m.d, &m.algos[i], g_ws, kWs, g_s);
}

// out[i] = bf16(sum_s parts[s * n + i]) for the weight and the bias parts.
__global__ void sum_parts(const float* parts, int S, long long n, __nv_bfloat16* out) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < S; ++s) acc += parts[s * n + i];
    out[i] = __float2bfloat16(acc);
  }
}

void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  std::vector<__nv_bfloat16> h(n);
  unsigned x = seed;
  for (auto& v : h) {
    x = x * 1664525u + 1013904223u;
    v = __float2bfloat16(((x >> 9) / float(1 << 23) - 0.5f) * 0.2f);
  }
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
}
}  // namespace

int main() {
  CK(cublasLtCreate(&g_lt));
  CK(cudaMalloc(&g_ws, kWs));
  CK(cudaStreamCreate(&g_s));
  const int m = 16384;  // tokens (16 x 1024)
  struct Shape {
    const char* name;
    int n, k;  // weight [n, k]
  } shapes[] = {{"qkv", 2304, 768}, {"proj", 768, 768}, {"fc", 3072, 768}, {"out", 768, 3072}};
  __nv_bfloat16 *x, *g, *dw, *db, *res, *y;
  float* parts;
  CK(cudaMalloc(&x, size_t(m) * 3072 * 2));
  CK(cudaMalloc(&g, size_t(m) * 3072 * 2));
  CK(cudaMalloc(&res, size_t(m) * 3072 * 2));
  CK(cudaMalloc(&y, size_t(m) * 3072 * 2));
  CK(cudaMalloc(&dw, size_t(3072) * 3072 * 2));
  CK(cudaMalloc(&db, 3072 * 2 * 8));
  CK(cudaMalloc(&parts, size_t(8) * (3072 * 768 + 3072) * 4));
  fill(x, size_t(m) * 3072, 1);
  fill(g, size_t(m) * 3072, 2);
  fill(res, size_t(m) * 3072, 3);
  double tot[8] = {};
  for (auto sh : shapes) {
    const int n = sh.n, k = sh.k;
    const double gf = 2.0 * m * n * k / 1e9;
    // dW row-major [n, k] = col-major [k, n] = X'[k, m] * G'[n, m]^T; BGRADB sums G' over m.
    Mm bg = make(k, n, m, false, true, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_BGRADB, db, 1, 0, 0, 0, 16);
    Mm df = make(k, n, m, false, true, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT, nullptr, 1, 0, 0, 0, 16);
    auto best = [&](Mm& mm, int& bi) {
      float b = 1e9f;
      bi = -1;
      for (int i = 0; i < int(mm.algos.size()); ++i) {
        if (run(mm, i, x, g, dw, dw, 0.0f) != 0) continue;
        float t = timed([&] { run(mm, i, x, g, dw, dw, 0.0f); });
        if (t < b) b = t, bi = i;
      }
      return b;
    };
    float t_bg1 = bg.algos.empty() ? -1 : timed([&] { run(bg, 0, x, g, dw, dw, 0.0f); });
    float t_df1 = df.algos.empty() ? -1 : timed([&] { run(df, 0, x, g, dw, dw, 0.0f); });
    int bi1, bi2;
    float t_bgb = best(bg, bi1), t_dfb = best(df, bi2);
    std::printf("%-5s dW %5d x %4d x %5d (%5.1f GF): BGRADB top1 %.4f ms (%3.0f TF/s) best-of-%zu %.4f [#%d] | "
                "plain top1 %.4f best-of-%zu %.4f [#%d]\n",
                sh.name, n, k, m, gf, t_bg1, gf / t_bg1, bg.algos.size(), t_bgb, bi1, t_df1, df.algos.size(), t_dfb, bi2);
    tot[0] += t_bg1, tot[1] += t_bgb, tot[2] += t_df1, tot[3] += t_dfb;
    for (int S : {2, 4}) {
      const int mc = m / S;
      Mm sp = make(k, n, mc, false, true, CUDA_R_16BF, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, parts + size_t(S) * n * k,
                   S, (long long)mc * k, (long long)mc * n, (long long)n * k, 16);
      if (sp.algos.empty()) {
        std::printf("      split %d: no algorithm\n", S);
        continue;
      }
      float bsp = 1e9f;
      int bsi = -1;
      for (int i = 0; i < int(sp.algos.size()); ++i) {
        if (run(sp, i, x, g, parts, parts, 0.0f) != 0) continue;
        float t = timed([&] {
          run(sp, i, x, g, parts, parts, 0.0f);
          sum_parts<<<264, 256, 0, g_s>>>(parts, S, (long long)n * k, dw);
          sum_parts<<<8, 256, 0, g_s>>>(parts + size_t(S) * n * k, S, n, db);
        });
        if (i == 0) std::printf("      split %d top1 %.4f ms\n", S, t);
        if (t < bsp) bsp = t, bsi = i;
      }
      std::printf("      split %d (fp32 parts + BGRADB + sum): best-of-%zu %.4f ms [#%d] (%3.0f TF/s)\n", S, sp.algos.size(),
                  bsp, bsi, gf / bsp);
      tot[S == 2 ? 4 : 5] += bsp;
    }
    // dx row-major [m, k] = G[m, n] W[n, k]: col-major [k, m] = W'[k, n] G'[n, m].
    Mm dx = make(k, m, n, false, false, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT, nullptr, 1, 0, 0, 0, 1);
    float t_dx = timed([&] { run(dx, 0, dw, g, y, y, 0.0f); });
    // forward row-major Y[m, n] = X[m, k] W[n, k]^T + b: col-major [n, m] = W'^T X'.
    Mm fw = make(n, m, k, true, false, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_BIAS, db, 1, 0, 0, 0, 1);
    float t_fw = timed([&] { run(fw, 0, dw, x, y, y, 0.0f); });
    float t_fr = timed([&] { run(fw, 0, dw, x, res, y, 1.0f); });
    std::printf("      dx %.4f ms (%3.0f TF/s) | fwd+bias %.4f ms (%3.0f TF/s), +residual C (beta 1, D != C) %.4f ms\n", t_dx,
                gf / t_dx, t_fw, gf / t_fw, t_fr);
    tot[6] += t_dx, tot[7] += t_fw;
  }
  std::printf("per layer: dW BGRADB top1 %.3f best %.3f | plain top1 %.3f best %.3f | split2 %.3f split4 %.3f | dx %.3f fwd %.3f\n",
              tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[6], tot[7]);
  return 0;
}
