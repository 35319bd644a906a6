// kernels/gemm.cuh: small and medium matrix products with fused epilogues, for the launch-bound
// sizes of the lab's MLPs (a digits layer is 128 x 256 x 256: cuBLAS's setup costs more than the
// product there).
//
// Math, per problem:   C[m, n] = alpha * sum_k A(m, k) * B(k, n) + beta * C[m, n]
//   then, in order:    + bias[n];  rounded to C's format;  -> pre[m, n];  act();  -> C[m, n]
// A(m, k) = a[m * sam + k * sak] and B(k, n) = b[k * sbk + n * sbn] (any transposes through the
// strides); C is row-major with leading dimension ldc.
// Operand options:
//   * a_mask (same layout as A): ReLU' (A *= mask > 0) or GELU' (A = round(A * gelu'(mask)))
//     applied on load: the backward of an activation fused into the products that consume it;
//   * ones_col: B gains a column of ones at n == N, whose result column goes to bias_grad[m]
//     (dbias = row sums of A computed by the same tiles as dW);
//   * tf32: inputs rounded to tf32 (10-bit mantissa, ties to even) as the CPU reference does.
// Accumulation: fp32 FMA. Tiles of 16 x 16 outputs (launches whose 16 x 16 tiles fit one block per
// multiprocessor: the small MLP products) or 32 x 32 (larger ones), 256 threads a block; K staged
// through shared memory in chunks of 256 (16 x 16) or 128 (32 x 32), converted to fp32 (and
// masked, tf32-rounded) once when staged, split four ways inside a block (thread group g sums
// k = g, g+4, ... in ascending order, the four partials summed at the end): the result is
// bit-identical for either tile shape. Operands with stride 1 on one dimension, the other stride a
// multiple of 16 bytes and 16-byte aligned pointers are staged with 16-byte loads; any other
// strides take bounds-checked element loads. Inputs fp32/bf16/fp16 (A and B the same format),
// outputs any float format.
// Up to three independent problems run in one launch (dW, dbias and dx of a layer's backward).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

struct GemmProblem {
  const void* a = nullptr;
  int64_t sam = 0, sak = 0;
  const void* b = nullptr;
  int64_t sbk = 0, sbn = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int c_dt = 0;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;  // [n], format bias_dt
  int bias_dt = 0;
  void* pre = nullptr;         // [m, n] with ldc, format c_dt
  int act = 0;                 // 0 none, 1 ReLU, 2 GELU
  const void* a_mask = nullptr;// same layout/format as A
  int a_mask_act = 0;          // 1 ReLU', 2 GELU'
  bool ones_col = false;
  void* bias_grad = nullptr;   // [m], format bias_grad_dt, with beta as for C
  int bias_grad_dt = 0;
  bool tf32 = false;           // round A and B to tf32 on load (fp32 inputs)
};

constexpr int kMaxGemmProblems = 3;
// in_dt: the format of A and B (fp32, bf16 or fp16) of every problem. Runs `count` (<= 3)
// independent problems in one launch.
void launch_gemm(int in_dt, const GemmProblem* problems, int count, cudaStream_t s);

}  // namespace trainlab::kern
