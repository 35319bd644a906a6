// Small helpers shared by the CUDA backend's source files (internal): argument checks (those of
// every backend come from backend/backend_checks.h), the kernels' activation codes, and TL_TIMED,
// which times the rest of the calling operation when kernel timing is on (TimedOp, cuda_backend.h).
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/backend_checks.h"
#include "backend/op_cost.h"
#include "backend/cuda/cuda_backend.h"
#include "util/error.h"

#define TL_TIMED(name) TimedOp tl_timed_op_(this, name, m_kernel_timing)
// TL_TIMED with the call's work and traffic (backend/op_cost.h), for the roofline.
#define TL_TIMED_COST(name, cost) \
  TimedOp tl_timed_op_(this, name, m_kernel_timing, m_kernel_timing ? OpCost(cost) : OpCost{})

namespace trainlab::cuda {

using trainlab::check_matrix;  // backend/backend_checks.h
// The kernels' activation code: 0 none, 1 ReLU, 2 GELU.
inline int act_code(Activation a) { return a == Activation::ReLU ? 1 : a == Activation::GELU ? 2 : 0; }

}  // namespace trainlab::cuda
