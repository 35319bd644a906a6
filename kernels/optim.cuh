// kernels/optim.cuh: multi-tensor optimizers and the finiteness check, one launch for up to
// kMaxTensors parameters (the table travels as a kernel argument, so a captured step needs no
// device-side table).
//
// AdamW (PyTorch's order of operations), per element, with lr, t and unscale read from the
// device-side step scalars:
//   g = grad * unscale;  w *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps);  w *= mask;  value = round(w)
// SGD:  g = grad * unscale + wd * w;  buf = mu buf + g;  w -= lr * (nesterov ? g + mu buf : buf)
// all_finite: flag = 1 when any element of any tensor is inf or NaN (flag zeroed by the caller).
// Layout: flat. Precision: fp32 master, m, v; gradients and the compute copy in any float format;
// the fp32 master and the 16-bit copy are written in the same pass.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

constexpr int kMaxTensors = 24;

struct OptTensor {
  float* master = nullptr;
  void* value = nullptr;  // null when value is master
  int value_dt = 0;
  const void* grad = nullptr;
  int grad_dt = 0;
  float* m = nullptr;
  float* v = nullptr;
  const float* mask = nullptr;
  int64_t n = 0;
  float decay = 1.0f;  // 1 when weight decay applies, else 0
  int m_dt = 0;        // Lion: the momentum's format (fp32 or bf16; m then points to that format)
  // 8-bit AdamW (optim_lean.cuh): codes (n bytes) and absmax (one per block) of m and v.
  uint8_t* m_code = nullptr;
  uint8_t* v_code = nullptr;
  float* m_absmax = nullptr;
  float* v_absmax = nullptr;
};

struct OptHyper {
  float beta1, beta2, eps, weight_decay;  // AdamW; SGD uses beta1 as momentum
  bool nesterov;
};

// *dst = v: the step scalars travel as a kernel argument (no host buffer to keep alive, no copy
// engine round trip in front of each replayed step).
void launch_set_scalars(DevScalars* dst, const DevScalars& v, cudaStream_t s);
void launch_adamw(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s);
void launch_sgd(const OptTensor* t, int count, const OptHyper& h, const DevScalars* sc, cudaStream_t s);
// t[i].grad / grad_dt / n are the tensors to check.
void launch_all_finite(const OptTensor* t, int count, int* flag, cudaStream_t s);

}  // namespace trainlab::kern
