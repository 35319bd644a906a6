// kernels/elementwise.cuh: format conversion, fill, activations and row gathers.
//
// Math:   convert: dst[i] = round_dst(src[i]);  fill: t[i] = round(value);
//         act fwd: y = relu(x) | gelu(x) = x * Phi(x) | x;   act bwd: dx = dy * act'(x);
//         bias_act: y = act(y + bias[col]);
//         gather:  dst[i, :] = src[idx[i], :]  (raw bytes, any format; out-of-range rows give 0).
// Layout: flat, contiguous; gather works on rows of row_bytes bytes.
// Precision: each element converted to fp32, computed in fp32 (erf/exp from CUDA's libm),
// rounded once to the output format (nearest even).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

void launch_convert(const void* src, int src_dt, void* dst, int dst_dt, int64_t n, cudaStream_t s);
void launch_fill(void* dst, int dt, float value, int64_t n, cudaStream_t s);
void launch_activation_forward(int act, const void* x, int x_dt, void* y, int y_dt, int64_t n, cudaStream_t s);
void launch_activation_backward(int act, const void* x, int x_dt, const void* dy, int dy_dt, void* dx, int dx_dt,
                                int64_t n, cudaStream_t s);
// y[m, n] = act(y[m, n] + bias[n]) in place (an epilogue for products that could not fuse it).
void launch_bias_act(void* y, int y_dt, const void* bias, int bias_dt, int64_t rows, int64_t cols, int act,
                     cudaStream_t s);
// Several gathers of 4-byte rows in one launch (the batch's inputs and labels of a step): job j
// copies rows idx[i] of src into dst and, when dst2 is set, also into dst2 converted from fp32 to
// dst2_dt (the compute-format copy of the batch).
struct GatherJob {
  const uint32_t* src = nullptr;
  int64_t src_rows = 0, words = 0;  // words (4-byte elements) per row
  const int32_t* idx = nullptr;
  int64_t rows = 0;
  uint32_t* dst = nullptr;
  void* dst2 = nullptr;
  int dst2_dt = 0;
};
constexpr int kMaxGatherJobs = 4;
// When `scalars` is given, the same launch also writes *scalars_dst = *scalars (the step's
// scalars ride on the step's first kernel instead of a launch of their own).
void launch_gather_multi(const GatherJob* jobs, int count, DevScalars* scalars_dst, const DevScalars* scalars,
                         cudaStream_t s);
// Captured steps: finds the gather node of `graph` that writes the step scalars, and rewrites the
// scalars that node of the instantiated graph writes on its next replay.
bool find_scalar_gather_node(cudaGraph_t graph, cudaGraphNode_t* node);
void set_scalar_gather_node(cudaGraphExec_t exec, cudaGraphNode_t node, const DevScalars& v);
void launch_gather_rows(const void* src, int64_t src_rows, int64_t row_bytes, const int32_t* idx, int64_t rows,
                        void* dst, cudaStream_t s);

}  // namespace trainlab::kern
