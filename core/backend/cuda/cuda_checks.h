// Small helpers shared by the CUDA backend's source files (internal): argument checks, the
// kernels' activation codes, and TL_TIMED, which times the rest of the calling operation when
// kernel timing is on (TimedOp, cuda_backend.h).
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "util/error.h"

#define TL_TIMED(name) TimedOp tl_timed_op_(this, name, m_kernel_timing)

namespace trainlab::cuda {

inline void check_matrix(const Tensor& t, const char* what) {
  if (t.rank() != 2) throw Error(std::string(what) + " must be a matrix, got shape " + shape_str(t.shape()));
}
// The kernels' activation code: 0 none, 1 ReLU, 2 GELU.
inline int act_code(Activation a) { return a == Activation::ReLU ? 1 : a == Activation::GELU ? 2 : 0; }

}  // namespace trainlab::cuda
