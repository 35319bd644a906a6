// Delayed scaling of the fp8 casts of a matrix product: the one implementation of the scale
// bookkeeping, used by the CPU backend (backend/cpu_fp8.cpp) and the CUDA cast kernel
// (kernels/fp8.cu), so a CPU fp8 run scales its tensors exactly as the GPU does.
//
// Each cast tensor (a layer's input, weight and output gradient) has a history h[0..16) of its
// recent maxima |x|. At step t (the step scalar), slot s = t mod 16:
//   amax  = max of h over the slots other than s and s+1 (mod 16)
//   scale = fmax / amax, or 1 while that is 0 (fmax = 448 for e4m3, 57,344 for e5m2)
//   q     = fp8(x * scale) (one fp32 product, then the cast of tensor/dtype.h); the product of two
//           cast operands is multiplied by both inverse scales 1 / scale
//   h[s]  = max(h[s], max |x|) when that maximum is finite and positive; h[s+1] = 0
// so the scale of step t comes from earlier steps only ("delayed" scaling), several casts in one
// step (gradient accumulation, recomputation) all use the same scale, and slot s+1 starts empty
// when the step after next reaches it. Header-only and plain C++ so a kernel can include it.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define TL_FP8_HD __host__ __device__
#else
#define TL_FP8_HD
#endif

namespace trainlab {

constexpr int kFp8History = 16;
// The maximum |x| of a cast is taken over tiles of 32 x 32 elements (the CUDA kernel's thread
// blocks): a tile whose maximum is not finite contributes nothing, the others their maximum
// (fp8_amax_recordable), and the history records the largest of those.
constexpr int kFp8AmaxTile = 32;

// Which of a layer's three cast tensors a history belongs to (the row of a [3, 16] history).
enum class Fp8Operand : int { Input = 0, Weight = 1, Gradient = 2 };

TL_FP8_HD inline int fp8_history_slot(float step) { return static_cast<int>(step) % kFp8History; }

// The largest finite value of the fp8 format: e4m3 (forward operands) or e5m2 (gradients).
TL_FP8_HD inline float fp8_format_max(bool e4m3) { return e4m3 ? 448.0f : 57344.0f; }

// The scale of step `step` from a history of kFp8History maxima.
TL_FP8_HD inline float fp8_delayed_scale(const float* history, float step, float fmax) {
  const int slot = fp8_history_slot(step), next = (slot + 1) % kFp8History;
  float amax = 0.0f;
  for (int j = 0; j < kFp8History; ++j)
    if (j != slot && j != next && history[j] > amax) amax = history[j];
  return amax > 0.0f ? fmax / amax : 1.0f;
}

// Whether a tensor's maximum |x| enters the history (NaN, inf and 0 do not).
TL_FP8_HD inline bool fp8_amax_recordable(float amax) { return amax > 0.0f && amax <= 3.402823466e38f; }

// The history update after a cast of step `step` whose tensor had maximum |x| = amax (the CUDA
// kernel does the same with an atomic max over its blocks).
inline void fp8_record_amax(float* history, float step, float amax) {
  const int slot = fp8_history_slot(step);
  if (fp8_amax_recordable(amax) && amax > history[slot]) history[slot] = amax;
  history[(slot + 1) % kFp8History] = 0.0f;
}

// Whether a linear layer's products run in fp8: what cuBLASLt's fp8 products take (rows m, inputs k
// and outputs n multiples of 16) and an epilogue they have (ReLU or none, no pre-activation
// output). Elsewhere the layer computes in bf16 on every backend.
inline bool fp8_linear_eligible(int64_t m, int64_t k, int64_t n, bool gelu, bool keeps_pre) {
  return m % 16 == 0 && k % 16 == 0 && n % 16 == 0 && !gelu && !keeps_pre;
}

}  // namespace trainlab
