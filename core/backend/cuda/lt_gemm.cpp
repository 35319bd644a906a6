#include "backend/cuda/lt_gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "util/error.h"

namespace trainlab::cuda {

namespace {
// Every cuBLASLt call's status: an Error naming the call unless it succeeded.
void lt_check(cublasStatus_t status, const char* call, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt error ") + cublasLtGetStatusName(status) + " in " + call + " (lt_gemm.cpp:" +
                std::to_string(line) + ")");
}
}  // namespace
#define TL_LT_CHECK(expr) lt_check((expr), #expr, __LINE__)

// Why device.fp32_gemm defaults to native (DeviceOptions), measured. On the H200 (sm_90,
// cuBLAS of CUDA 13.0), tests/gpu/test_cuda_fp32_gemm, 2026-11-29 19:30 UTC, the 15 product shapes
// of a gpt2 step (16384 tokens, d 768):
//   native   167.5 ms of products per step (47-52 TFLOP/s), worst error 2.5e-6 (err_rel), 2.4e-7 (err_norm)
//   bf16x9   167.4 ms, output bit-identical to native on every shape: cuBLAS accepts the emulated
//   auto     compute type on Hopper but runs its plain FP32 kernels (BF16x9 kernels are Blackwell's)
//   split6   83.6 ms (2.0x; a hand split into three bf16 parts, six part products on the bf16
//            tensor cores) but errors of 1.0e-4 (err_rel) and 4.3e-6 (err_norm): 18-40x native's,
//            above the fp32 parity tolerance (1e-5) -- Hopper's tensor-core accumulation is not
//            fp32-exact, so this emulation is not FP32-accurate here.
// Neither is both faster and FP32-accurate on Hopper; bf16x9/auto remain selectable for GPUs where
// cuBLAS does emulate (test_cuda_fp32_gemm checks their accuracy wherever it runs).

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;
static_assert(sizeof(cublasLtMatmulAlgo_t) <= 64, "LtGemm::Plan::algo too small");

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw Error(std::string("cuBLASLt product: unsupported format ") + dtype_name(t));
  }
}
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
// The alignment (bytes, a power of two up to 256) every row of a matrix at p with rows of
// ld_bytes has: the lowest set bit of both.
uint32_t alignment(const void* p, int64_t ld_bytes) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(ld_bytes) | 256u;
  return static_cast<uint32_t>(v & (~v + 1));
}
struct Alignments {
  uint32_t a, b, c;  // our A, B and C
};
Alignments alignments(const LtProblem& p) {
  const int64_t ein = static_cast<int64_t>(dtype_bytes(p.in, 1)), eout = static_cast<int64_t>(dtype_bytes(p.out, 1));
  const uint32_t c = alignment(p.c, p.n * eout), c_src = p.c_src ? alignment(p.c_src, p.n * eout) : c;
  return {alignment(p.a, (p.trans_a ? p.m : p.k) * ein), alignment(p.b, (p.trans_b ? p.k : p.n) * ein),
          std::min(c, c_src)};
}
}  // namespace

LtGemm::LtGemm(CudaBackend& be, Fp32Math fp32_math, bool autotune)
    : m_be(be), m_fp32_math(fp32_math), m_autotune(autotune) {}

LtGemm::~LtGemm() {
  for (auto& [k, p] : m_plans) {
    if (p.lc) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.lc));
    if (p.lb) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.lb));
    if (p.la) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.la));
    if (p.desc) cublasLtMatmulDescDestroy(static_cast<cublasLtMatmulDesc_t>(p.desc));
  }
  if (m_emulation) cublasLtEmulationDescDestroy(static_cast<cublasLtEmulationDesc_t>(m_emulation));
  if (m_handle) cublasLtDestroy(static_cast<cublasLtHandle_t>(m_handle));
}

int LtGemm::compute_type(const LtProblem& p) const {
  if (p.in != DType::F32) return CUBLAS_COMPUTE_32F;
  if (p.tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return m_fp32_math == Fp32Math::Native ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_EMULATED_16BFX9;
}

bool LtGemm::eligible(const LtProblem& p) {
  const bool in_ok = p.in == DType::F32 || p.in == DType::BF16 || p.in == DType::F16;
  const bool out_ok = p.out == p.in || p.out == DType::F32;
  if (!in_ok || !out_ok || p.m <= 0 || p.n <= 0 || p.k <= 0) return false;
  // Matrices of any alignment (the plan asks for algorithms that need no more than they have:
  // the 65-column logits of the character model are 130-byte rows in bf16); bias vectors 16 bytes.
  return (!p.bias || aligned16(p.bias)) && (!p.row_sums || aligned16(p.row_sums));
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B,
// its second A. A row-major matrix [r, c] is the column-major [c, r] with leading dimension c.
LtGemm::Plan& LtGemm::plan(const LtProblem& p, int epilogue, int compute_code) {
  const Alignments al = alignments(p);
  const int al_code = static_cast<int>(std::countr_zero(al.a) * 100 + std::countr_zero(al.b) * 10 + std::countr_zero(al.c));
  const Key key{p.m,    p.n,     p.k, p.trans_a, p.trans_b, static_cast<int>(p.in) * 16 + static_cast<int>(p.out),
                al_code, compute_code, epilogue};
  auto it = m_plans.find(key);
  if (it != m_plans.end()) return it->second;
  if (!m_handle) {
    cublasLtHandle_t h;
    TL_LT_CHECK(cublasLtCreate(&h));
    m_handle = h;
    m_workspace = m_be.empty({static_cast<int64_t>(kWorkspaceBytes)}, DType::I8, MemCategory::Workspace);
  }
  Plan& pl = m_plans[key];
  const auto compute = static_cast<cublasComputeType_t>(compute_code);
  cublasLtMatmulDesc_t desc;
  TL_LT_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  pl.desc = desc;
  if (compute == CUBLAS_COMPUTE_32F_EMULATED_16BFX9) {
    if (!m_emulation) {
      cublasLtEmulationDesc_t em;
      TL_LT_CHECK(cublasLtEmulationDescCreate(&em));
      m_emulation = em;
      const int32_t strategy =
          m_fp32_math == Fp32Math::Auto ? CUBLAS_EMULATION_STRATEGY_PERFORMANT : CUBLAS_EMULATION_STRATEGY_EAGER;
      TL_LT_CHECK(cublasLtEmulationDescSetAttribute(em, CUBLASLT_EMULATION_DESC_STRATEGY, &strategy, sizeof(strategy)));
    }
    auto em = static_cast<cublasLtEmulationDesc_t>(m_emulation);
    TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, &em, sizeof(em)));
  }
  const cublasOperation_t op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // B
  const cublasOperation_t op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // A
  TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  const cublasLtEpilogue_t epi = static_cast<cublasLtEpilogue_t>(epilogue);
  TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
    const cudaDataType_t bt = lt_type(p.out);
    TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    // A placeholder pointer for the heuristic; run() sets the call's own.
    const void* bp = p.bias ? p.bias : p.row_sums;
    TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  // First operand: op(B)^T [n, k]. Stored B is [k, n] (col-major [n, k], ld n) or, transposed,
  // [n, k] (col-major [k, n], ld k, op T).
  cublasLtMatrixLayout_t la, lb, lc;
  const cudaDataType_t ti = lt_type(p.in), to = lt_type(p.out);
  if (p.trans_b)
    TL_LT_CHECK(cublasLtMatrixLayoutCreate(&la, ti, p.k, p.n, p.k));
  else
    TL_LT_CHECK(cublasLtMatrixLayoutCreate(&la, ti, p.n, p.k, p.n));
  pl.la = la;
  // Second operand: op(A)^T [k, m]. Stored A is [m, k] (col-major [k, m], ld k) or, transposed,
  // [k, m] (col-major [m, k], ld m, op T).
  if (p.trans_a)
    TL_LT_CHECK(cublasLtMatrixLayoutCreate(&lb, ti, p.m, p.k, p.m));
  else
    TL_LT_CHECK(cublasLtMatrixLayoutCreate(&lb, ti, p.k, p.m, p.k));
  pl.lb = lb;
  TL_LT_CHECK(cublasLtMatrixLayoutCreate(&lc, to, p.n, p.m, p.n));  // C^T: col-major [n, m]
  pl.lc = lc;
  cublasLtMatmulPreference_t pref;
  TL_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // What the operands guarantee (cuBLASLt's A is our B, its B our A); the heuristic otherwise
  // assumes 256-byte alignment.
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al.b, sizeof(al.b));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al.a, sizeof(al.a));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al.c, sizeof(al.c));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al.c, sizeof(al.c));
  cublasLtMatmulHeuristicResult_t heur[kLtCandidates] = {};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(m_handle), desc, la, lb, lc, lc,
                                                           pref, m_autotune ? kLtCandidates : 1, heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  pl.ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
  if (pl.ok) {
    pl.count = std::min(found, kLtCandidates);
    for (int i = 0; i < pl.count; ++i) std::memcpy(pl.algos[i], &heur[i].algo, sizeof(heur[i].algo));
  }
  return pl;
}

bool LtGemm::run(const LtProblem& p) {
  if (p.bias && p.row_sums) throw Error("cuBLASLt product: a bias and a bias gradient in one call");
  const int epi = p.bias ? CUBLASLT_EPILOGUE_BIAS : p.row_sums ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
  const int compute = compute_type(p);
  bool emulated = compute == CUBLAS_COMPUTE_32F_EMULATED_16BFX9;
  Plan* chosen = &plan(p, epi, compute);
  if (!chosen->ok && emulated) {
    // No emulated algorithm for this product: plain FP32 (still FP32-accurate), said once.
    if (!m_told_fallback)
      std::fprintf(stderr, "note: cuBLASLt has no BF16x9-emulated algorithm for a %lld x %lld x %lld product (epilogue %d); "
                   "such products use plain FP32\n", static_cast<long long>(p.m), static_cast<long long>(p.n),
                   static_cast<long long>(p.k), epi);
    m_told_fallback = true;
    emulated = false;
    chosen = &plan(p, epi, CUBLAS_COMPUTE_32F);
  }
  Plan& pl = *chosen;
  if (!pl.ok) return false;
  auto desc = static_cast<cublasLtMatmulDesc_t>(pl.desc);
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
    const void* bp = p.bias ? p.bias : p.row_sums;
    TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  if (m_autotune && !pl.tuned && pl.count > 1 && p.beta == 0.0f && !m_be.m_ctx.capturing) tune(p, pl);
  const auto st = static_cast<cublasStatus_t>(matmul(p, pl, pl.chosen));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    pl.ok = false;  // refused at run time: plain FP32 (emulated plans) or the caller's kernel from now on
    return emulated ? run(p) : false;
  }
  TL_LT_CHECK(st);
  return true;
}

int LtGemm::matmul(const LtProblem& p, Plan& pl, int i) {
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, pl.algos[i], sizeof(algo));
  return cublasLtMatmul(static_cast<cublasLtHandle_t>(m_handle), static_cast<cublasLtMatmulDesc_t>(pl.desc), &p.alpha, p.b,
                        static_cast<cublasLtMatrixLayout_t>(pl.la), p.a, static_cast<cublasLtMatrixLayout_t>(pl.lb), &p.beta,
                        p.c_src ? p.c_src : p.c, static_cast<cublasLtMatrixLayout_t>(pl.lc), p.c,
                        static_cast<cublasLtMatrixLayout_t>(pl.lc),
                        &algo, m_workspace.raw(), kWorkspaceBytes, m_be.m_ctx.stream);
}

// Times each held algorithm on the call's own operands (beta is 0: every run rewrites the output,
// and run() then writes it once more with the chosen one) and keeps the fastest that runs.
void LtGemm::tune(const LtProblem& p, Plan& pl) {
  cudaStream_t s = m_be.m_ctx.stream;
  cudaEvent_t e0, e1;
  TL_CUDA_CHECK(cudaEventCreate(&e0));
  TL_CUDA_CHECK(cudaEventCreate(&e1));
  float best_ms = 0.0f;
  int best = -1;
  for (int i = 0; i < pl.count; ++i) {
    if (matmul(p, pl, i) != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; an algorithm that refuses is skipped
    TL_CUDA_CHECK(cudaEventRecord(e0, s));
    bool ran = true;
    for (int r = 0; r < 3 && ran; ++r) ran = matmul(p, pl, i) == CUBLAS_STATUS_SUCCESS;
    TL_CUDA_CHECK(cudaEventRecord(e1, s));
    TL_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (ran && (best < 0 || ms < best_ms)) best = i, best_ms = ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  pl.chosen = best >= 0 ? best : 0;
  pl.tuned = true;
}

}  // namespace trainlab::cuda
