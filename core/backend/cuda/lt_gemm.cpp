#include "backend/cuda/lt_gemm.h"

#include <cublasLt.h>

#include <bit>
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
  return {alignment(p.a, (p.trans_a ? p.m : p.k) * ein), alignment(p.b, (p.trans_b ? p.k : p.n) * ein),
          alignment(p.c, p.n * eout)};
}
}  // namespace

LtGemm::LtGemm(CudaBackend& be) : m_be(be) {}

LtGemm::~LtGemm() {
  for (auto& [k, p] : m_plans) {
    if (p.lc) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.lc));
    if (p.lb) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.lb));
    if (p.la) cublasLtMatrixLayoutDestroy(static_cast<cublasLtMatrixLayout_t>(p.la));
    if (p.desc) cublasLtMatmulDescDestroy(static_cast<cublasLtMatmulDesc_t>(p.desc));
  }
  if (m_handle) cublasLtDestroy(static_cast<cublasLtHandle_t>(m_handle));
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
LtGemm::Plan& LtGemm::plan(const LtProblem& p, int epilogue) {
  const Alignments al = alignments(p);
  const int al_code = static_cast<int>(std::countr_zero(al.a) * 100 + std::countr_zero(al.b) * 10 + std::countr_zero(al.c));
  const Key key{p.m, p.n, p.k, p.trans_a, p.trans_b, static_cast<int>(p.in) * 16 + static_cast<int>(p.out), al_code, p.tf32,
                epilogue};
  auto it = m_plans.find(key);
  if (it != m_plans.end()) return it->second;
  if (!m_handle) {
    cublasLtHandle_t h;
    TL_LT_CHECK(cublasLtCreate(&h));
    m_handle = h;
    m_workspace = m_be.empty({static_cast<int64_t>(kWorkspaceBytes)}, DType::I8, MemCategory::Workspace);
  }
  Plan& pl = m_plans[key];
  const cublasComputeType_t compute =
      p.in == DType::F32 ? (p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t desc;
  TL_LT_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  pl.desc = desc;
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
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(m_handle), desc, la, lb, lc, lc,
                                                           pref, 1, &heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  pl.ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
  if (pl.ok) std::memcpy(pl.algo, &heur.algo, sizeof(heur.algo));
  return pl;
}

bool LtGemm::run(const LtProblem& p) {
  if (p.bias && p.row_sums) throw Error("cuBLASLt product: a bias and a bias gradient in one call");
  const int epi = p.bias ? CUBLASLT_EPILOGUE_BIAS : p.row_sums ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
  Plan& pl = plan(p, epi);
  if (!pl.ok) return false;
  auto desc = static_cast<cublasLtMatmulDesc_t>(pl.desc);
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
    const void* bp = p.bias ? p.bias : p.row_sums;
    TL_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, pl.algo, sizeof(algo));
  const cublasStatus_t st = cublasLtMatmul(
      static_cast<cublasLtHandle_t>(m_handle), desc, &p.alpha, p.b, static_cast<cublasLtMatrixLayout_t>(pl.la), p.a,
      static_cast<cublasLtMatrixLayout_t>(pl.lb), &p.beta, p.c, static_cast<cublasLtMatrixLayout_t>(pl.lc), p.c,
      static_cast<cublasLtMatrixLayout_t>(pl.lc), &algo, m_workspace.raw(), kWorkspaceBytes, m_be.m_ctx.stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    pl.ok = false;  // refused at run time: the caller's kernel from now on
    return false;
  }
  TL_LT_CHECK(st);
  return true;
}

}  // namespace trainlab::cuda
