// kernels/common.cuh: what every kernel family shares.
//
// Math: none of its own. Number formats: every kernel reads its floating-point inputs through
// ld(), which converts fp32 / bf16 / fp16 / fp8 (e4m3, e5m2) to fp32, computes in fp32, and writes
// through st(), which rounds fp32 to the output format to nearest even (fp8 e4m3 saturates to
// +-448, e5m2 overflows to inf, as core/tensor/dtype.cpp does on the CPU). The format of a buffer
// is a run-time code (trainlab::DType), so one instantiation serves every format.
//
// Checking: TL_CUDA_CHECK wraps every runtime call and TL_LAUNCH_CHECK follows every launch; both
// throw trainlab::Error naming the call, the file and the line.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace trainlab::kern {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line);

#define TL_CUDA_CHECK(expr)                                                                   \
  do {                                                                                        \
    cudaError_t tl_err_ = (expr);                                                             \
    if (tl_err_ != cudaSuccess) ::trainlab::kern::throw_cuda_error(tl_err_, #expr, __FILE__, __LINE__); \
  } while (0)
// After every <<<>>> launch: launch-configuration errors surface here, not at the next sync.
#define TL_LAUNCH_CHECK(name) TL_CUDA_CHECK(cudaGetLastError())

// Device-side copy of trainlab::StepScalars (same field order): read by kernels on every replay of
// a captured step, so a CUDA graph always sees the current learning rate, loss scale and step.
struct DevScalars {
  float lr;
  float loss_scale;
  float grad_unscale;
  float step;
};

inline int dcode(DType t) { return static_cast<int>(t); }

}  // namespace trainlab::kern
