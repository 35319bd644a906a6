// kernels/optim_lean.cuh: the lean optimizers of issue 19, multi-tensor like optim.cuh (one
// launch for up to kMaxTensors parameters; backend.h states the numerics the CPU reference shares).
//
// Lion, per element (m in fp32 or bf16, m_dt):
//   g = grad * unscale; c = b1 m + (1-b1) g; w = w (1 - lr wd) - lr sign(c); m = b2 m + (1-b2) g
// 8-bit AdamW (bitsandbytes' blockwise Adam): a thread block per quantization block of `block`
// (256 or 2048) elements of one tensor; m, v dequantized (map[code] * absmax), updated in fp32 as
// AdamW, the weight updated from them, then the block's new absmax (max |m|, max v: a block
// reduction) and the codes of the nearest map entries (binary search, ties to the lower code).
// `maps` is device memory holding tensor/dynamic_map.h's signed map then the unsigned one (512
// floats), copied into shared memory by every block.
// Layout: flat. Precision: fp32 master, absmax and arithmetic; codes uint8; gradients and the
// compute copy in any float format.
#pragma once
#include <cuda_runtime_api.h>

#include "optim.cuh"

namespace trainlab::kern {

struct LionHyperDev {
  float beta1, beta2, weight_decay;
};

void launch_lion(const OptTensor* t, int count, const LionHyperDev& h, const DevScalars* sc, cudaStream_t s);
// t[i].m_code, v_code, m_absmax, v_absmax set; block 256 or 2048.
void launch_adamw8bit(const OptTensor* t, int count, const OptHyper& h, int block, const float* maps,
                      const DevScalars* sc, cudaStream_t s);

}  // namespace trainlab::kern
