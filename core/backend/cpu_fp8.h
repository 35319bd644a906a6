// The CPU backend's side of fp8 delayed scaling (cpu_fp8.cpp), public for the parity test
// (tests/gpu/test_cuda_fp8.cpp), which checks that these evolve a history exactly as the CUDA
// cast kernel does.
#pragma once

#include "tensor/tensor.h"

namespace trainlab::cpu {

// The largest |x| of t (2-D, any float format) as the CUDA cast kernel takes it: per tile of
// kFp8AmaxTile x kFp8AmaxTile elements, NaN ignored, tiles with an infinite maximum left out.
float fp8_tiled_amax(const Tensor& t);

// The scale of this step's cast of t from `history` (kFp8History maxima; e4m3 or e5m2 sets the
// format's largest value), after which the history records t's maximum (fp8_scaling.h).
float fp8_cast_scale(float* history, float step, bool e4m3, const Tensor& t);

}  // namespace trainlab::cpu
