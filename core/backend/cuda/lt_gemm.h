// LtGemm: the large matrix products of the CUDA backend through cuBLASLt (the transformer's
// [16384 x 384] x [384 x 1152] and larger), where the hand-written tiles of kernels/gemm.cu (tuned
// for the digits MLP's launch-bound sizes) are far from the tensor cores' speed.
//
// Math (row-major, as Backend::gemm):  C[m, n] = alpha * op(A) op(B) + beta * C  (+ bias[n])
// and optionally row_sums[i] = sum_k op(A)[i, k] (the bias gradient of a linear layer's dW product,
// cuBLASLt's BGRADB epilogue).
// Formats: A and B fp32, bf16 or fp16 (the same); C the input format or fp32; bias in C's format.
// Compute: fp32 accumulation. fp32 inputs use CUBLAS_COMPUTE_32F (exact fp32 FMA products, no
// tensor-core rounding) or CUBLAS_COMPUTE_32F_FAST_TF32 when tf32 is on.
// Plans: the operation descriptor, layouts and the heuristic's algorithm are built once per
// (shape, transposes, formats, compute, epilogue) and reused; only pointers change per call, so
// a captured step replays the same plan. Workspace: 32 MiB, allocated once through the backend
// (ledger category Workspace), like PyTorch's cuBLAS workspace that its allocator also counts.
// A product cuBLASLt refuses (no algorithm) returns false, and the caller uses its own kernel.
#pragma once
#include <map>
#include <tuple>

#include "backend/backend.h"

namespace trainlab::cuda {

class CudaBackend;

struct LtProblem {
  const void* a = nullptr;
  bool trans_a = false;
  const void* b = nullptr;
  bool trans_b = false;
  void* c = nullptr;
  int64_t m = 0, n = 0, k = 0;
  DType in = DType::F32, out = DType::F32;
  float alpha = 1.0f, beta = 0.0f;
  bool tf32 = false;
  const void* bias = nullptr;  // [n] in `out` format, added to every row (EPILOGUE_BIAS)
  void* row_sums = nullptr;    // [m] in `out` format: sums over k of op(A) (EPILOGUE_BGRADB)
};

class LtGemm {
 public:
  explicit LtGemm(CudaBackend& be);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Whether the product is in the formats cuBLASLt is used for here (bias vectors 16-byte aligned;
  // matrices of any alignment: the plan asks for algorithms that need no more than they have).
  static bool eligible(const LtProblem& p);
  // Runs the product on the backend's stream; false (nothing written) when cuBLASLt has no
  // algorithm for it.
  bool run(const LtProblem& p);

 private:
  struct Plan {
    void* desc = nullptr;        // cublasLtMatmulDesc_t
    void* la = nullptr, *lb = nullptr, *lc = nullptr;  // cublasLtMatrixLayout_t
    alignas(16) unsigned char algo[64] = {};  // cublasLtMatmulAlgo_t
    bool ok = false;
  };
  // m, n, k, transposes, formats, operand alignments, tf32, epilogue.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, int, bool, int>;
  Plan& plan(const LtProblem& p, int epilogue);
  CudaBackend& m_be;
  void* m_handle = nullptr;  // cublasLtHandle_t
  Tensor m_workspace;
  std::map<Key, Plan> m_plans;
};

}  // namespace trainlab::cuda
