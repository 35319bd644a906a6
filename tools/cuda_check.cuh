// tools/cuda_check.cuh: CK(expr), the CUDA runtime check of the standalone tools built by hand with
// nvcc (tools/gemv_probe.cu, tools/sync_floor/): on an error, the file, line, call and CUDA's
// message to stderr, then exit(1). The library's kernels throw instead (TL_CUDA_CHECK, common.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(e)                                                                                  \
  do {                                                                                         \
    cudaError_t err_ = (e);                                                                    \
    if (err_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #e, cudaGetErrorString(err_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
