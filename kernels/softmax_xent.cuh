// kernels/softmax_xent.cuh: fused softmax + cross-entropy, forward and backward in one pass.
//
// Math, per row i of logits z [B, C] with label y_i:
//   mx = max_j z_ij;  s = sum_j exp(z_ij - mx);  loss_i = log(s) + mx - z_{i,y_i}
//   dz_ij = (exp(z_ij - mx) / s - [j == y_i]) * grad_multiplier * loss_scale
//   stats (=|+=) { sum_i loss_i, #{i : argmax_j z_ij == y_i} }   (first maximum wins, as on the CPU)
// loss_scale is read from the device-side step scalars, so a captured step sees the current one.
// Layout: row-major logits and dlogits (any float format), int32 labels, fp32 stats[2].
// Precision: fp32 throughout (softmax and loss in fp32 whatever the logits' format); the row
// losses are summed in fp64. One warp per row, no atomics: up to kOneBlockRows rows in one block
// (the MLPs' batches: one launch); more rows over blocks of 256 rows (or more) each, whose sums a
// second one-thread kernel adds in block order, so the result is deterministic either way.
// Workspace: softmax_xent_workspace_bytes(rows) bytes, 8-byte aligned (none for one block).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

constexpr int64_t kOneBlockRows = 2048;
int64_t softmax_xent_workspace_bytes(int64_t rows);
void launch_softmax_xent(const void* logits, int logits_dt, int64_t rows, int64_t cols, const int32_t* labels,
                         void* dlogits, int dlogits_dt, float grad_multiplier, const DevScalars* scalars, float* stats,
                         bool accumulate, void* workspace, cudaStream_t s);

}  // namespace trainlab::kern
