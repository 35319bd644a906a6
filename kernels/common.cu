// kernels/common.cu: the error path of TL_CUDA_CHECK (see common.cuh). No device code.
#include "common.cuh"

#include "util/error.h"

namespace trainlab::kern {

void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  throw Error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + what +
              " at " + base + ":" + std::to_string(line));
}

}  // namespace trainlab::kern
