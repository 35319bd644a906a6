// kernels/attention.cuh: fused causal multi-head attention, forward and backward (flash style).
//
// Math, per (batch b, head h), hd = D / H, scale = 1/sqrt(hd), query row i and keys j <= i:
//   s_ij = scale * q_i . k_j;  lse_i = log sum_j exp(s_ij);  P_ij = exp(s_ij - lse_i);  y_i = sum_j P_ij v_j
//   backward: D_i = dy_i . y_i;  dP_ij = dy_i . v_j;  dS_ij = P_ij (dP_ij - D_i)
//             dq_i = scale sum_j dS_ij k_j;  dk_j = scale sum_i dS_ij q_i;  dv_j = sum_i P_ij dy_i
// Layout: qkv [B*T, 3D] row-major, per row q | k | v, head h in columns h*hd .. (h+1)*hd of each
// part; y, dy [B*T, D]; lse fp32 [B, H, T] (natural log of the scaled scores, as the CPU keeps it);
// dqkv [B*T, 3D], every element overwritten.
// Flash style: the T x T scores never reach device memory. Forward: online softmax over key tiles
// with fp32 running max and sum. Backward: P rebuilt from q, k and lse. One kernel per key tile
// accumulates dK and dV over the query tiles below it, a second per query tile accumulates dQ
// over the key tiles left of it (recomputing P and dS). No atomics: deterministic, bit-identical
// from run to run. Causal tiles above the diagonal are skipped. (A fused one-kernel backward that
// summed dQ partials in a fixed order was measured slower in every precision and removed; see
// BENCHMARKS.md.)
// Precision: bf16/fp16 qkv with hd <= 128 run on tensor cores (mma.sync m16n8k16, fp32
// accumulation; P and dS are rounded to the input format before their products, as FlashAttention
// does); so do fp32 inputs: in tf32 mode as m16n8k8 tf32 (q, k, v and dy rounded to tf32 as the
// CPU reference does, P and dS rounded to tf32 too), in fp32 mode as 3xTF32 (each operand split
// into two tf32 parts, three products: fp32-grade accuracy). Larger hd and mixed formats run a
// SIMT fp32 path (rounding q, k, v, dy to tf32 in tf32 mode). Statistics, softmax and
// accumulators are fp32 everywhere. Outputs are rounded once to their format (RNE).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

// wgmma: whether the warpgroup-MMA kernels below may run (the backend's device.attention_wgmma);
// false runs the mma.sync kernels, bit-identical, for comparisons.
void launch_attention_forward(const void* qkv, int qkv_dt, void* y, int y_dt, float* lse, int64_t B, int64_t T,
                              int64_t H, int64_t hd, bool tf32, bool wgmma, cudaStream_t s);

// The warpgroup-MMA kernels (attention_wgmma.cu, sm_90a): bf16 at hd 64 on a compute capability
// 9.0 GPU, bit-identical to the mma.sync kernels they replace there (H200, char-gpt2 shape, a
// layer: forward 0.094 against 0.170 ms, backward 0.27 against 0.51). They return false, having
// launched nothing, where they do not apply; launch_attention_forward and launch_attention_backward
// try them first unless told not to (wgmma false). dd: D = rowdot(dy, y) [B, H, T].
bool launch_attention_forward_wgmma(const void* qkv, int qkv_dt, void* y, int y_dt, float* lse, int64_t B, int64_t T,
                                    int64_t H, int64_t hd, cudaStream_t s);
bool launch_attention_backward_wgmma(const void* qkv, int qkv_dt, const void* dy, int dy_dt, const float* lse,
                                     const float* dd, void* dqkv, int dqkv_dt, int64_t B, int64_t T, int64_t H,
                                     int64_t hd, cudaStream_t s);

// fp32 scratch the backward needs, in floats: D = rowdot(dy, y) [B, H, T].
int64_t attention_backward_scratch_floats(int64_t B, int64_t T, int64_t H, int64_t hd, int qkv_dt, int dy_dt,
                                          bool tf32);

void launch_attention_backward(const void* qkv, int qkv_dt, const void* y, int y_dt, const void* dy, int dy_dt,
                               const float* lse, float* scratch, void* dqkv, int dqkv_dt, int64_t B, int64_t T,
                               int64_t H, int64_t hd, bool tf32, bool wgmma, cudaStream_t s);

}  // namespace trainlab::kern
