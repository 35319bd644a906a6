// LtGemm: the large matrix products of the CUDA backend through cuBLASLt (the transformer's
// [16384 x 384] x [384 x 1152] and larger), where the hand-written tiles of kernels/gemm.cu (tuned
// for the digits MLP's launch-bound sizes) are far from the tensor cores' speed.
//
// Math (row-major, as Backend::gemm):  C[m, n] = alpha * op(A) op(B) + beta * C  (+ bias[n]), where
// the C read may be another matrix than the one written (c_src: a residual added in the epilogue)
// and optionally row_sums[i] = sum_k op(A)[i, k] (the bias gradient of a linear layer's dW product,
// cuBLASLt's BGRADB epilogue).
// Formats: A and B fp32, bf16 or fp16 (the same); C the input format or fp32; bias in C's format.
// Compute: fp32 accumulation. fp32 inputs use CUBLAS_COMPUTE_32F_FAST_TF32 when tf32 is on, else
// the FP32 math of device.fp32_gemm (Fp32Math, config/device_options.h): CUBLAS_COMPUTE_32F
// (plain fp32 FMA, no tensor cores) or
// cuBLAS's BF16x9 emulation (CUBLAS_COMPUTE_32F_EMULATED_16BFX9: every fp32 operand split into
// three bf16 parts, the products on the bf16 tensor cores, FP32-accurate by cuBLAS's contract).
// A product the emulated compute type has no algorithm for (an epilogue, a shape) uses plain FP32.
// Plans: the operation descriptor, layouts and the heuristic's algorithm are built once per
// (shape, transposes, formats, compute, epilogue) and reused; only pointers change per call, so
// a captured step replays the same plan. Workspace: 32 MiB, allocated once through the backend
// (ledger category Workspace), like PyTorch's cuBLAS workspace that its allocator also counts.
// A product cuBLASLt refuses (no algorithm) returns false, and the caller uses its own kernel.
// Autotuning (device.lt_autotune, off by default): the plan keeps the heuristic's first
// kLtCandidates algorithms, and the plan's first eager (not captured) call that overwrites its
// output (beta 0) times each (one warm-up, three timed runs) and keeps the fastest. The choice
// can differ between processes, so products are then not bit-reproducible from run to run
// (within a process a plan keeps its algorithm): an experiment, not the default.
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
  const void* c_src = nullptr; // the C that beta scales when it is not the output (D != C); same layout
  bool tf32 = false;
  const void* bias = nullptr;  // [n] in `out` format, added to every row (EPILOGUE_BIAS)
  void* row_sums = nullptr;    // [m] in `out` format: sums over k of op(A) (EPILOGUE_BGRADB)
};

class LtGemm {
 public:
  // fp32_math and autotune: the backend's DeviceOptions (device.fp32_gemm, device.lt_autotune).
  LtGemm(CudaBackend& be, Fp32Math fp32_math, bool autotune);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Whether the product is in the formats cuBLASLt is used for here (bias vectors 16-byte aligned;
  // matrices of any alignment: the plan asks for algorithms that need no more than they have).
  static bool eligible(const LtProblem& p);
  // Runs the product on the backend's stream; false (nothing written) when cuBLASLt has no
  // algorithm for it.
  bool run(const LtProblem& p);
  Fp32Math fp32_math() const { return m_fp32_math; }

 private:
  static constexpr int kLtCandidates = 8;
  struct Plan {
    void* desc = nullptr;        // cublasLtMatmulDesc_t
    void* la = nullptr, *lb = nullptr, *lc = nullptr;  // cublasLtMatrixLayout_t
    alignas(16) unsigned char algos[kLtCandidates][64] = {};  // cublasLtMatmulAlgo_t, heuristic order
    int count = 0;               // algorithms held (1 unless autotuning)
    int chosen = 0;              // the one run
    bool tuned = false;
    bool ok = false;
  };
  // m, n, k, transposes, formats, operand alignments, compute type, epilogue.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, int, int, int>;
  Plan& plan(const LtProblem& p, int epilogue, int compute);
  int compute_type(const LtProblem& p) const;  // cublasComputeType_t
  // One cuBLASLt call of the plan's algorithm `i`; the cublasStatus_t.
  int matmul(const LtProblem& p, Plan& pl, int i);
  void tune(const LtProblem& p, Plan& pl);
  CudaBackend& m_be;
  Fp32Math m_fp32_math;
  void* m_handle = nullptr;     // cublasLtHandle_t
  void* m_emulation = nullptr;  // cublasLtEmulationDesc_t of the emulated plans (their strategy)
  bool m_told_fallback = false; // the note that an emulated product fell back to plain FP32 was written
  bool m_autotune = false;      // device.lt_autotune
  Tensor m_workspace;
  std::map<Key, Plan> m_plans;
};

}  // namespace trainlab::cuda
