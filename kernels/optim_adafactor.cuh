// kernels/optim_adafactor.cuh: Adafactor, multi-tensor (backend.h states the numerics the CPU
// reference shares). Four launches a step over the table, with a per-tensor scratch `acc`
// (3 + cols floats, zeroed by the launcher): acc[0] the sum of the updated row averages, acc[1]
// the sum of squares of the unclipped update, acc[2] the sum of squares of the weights (before the
// step), acc[3..] the column sums of u = g^2 + eps1.
//   1 stats   factored: a block per row: row_i = b row_i + (1-b) mean_j u_ij, column sums into acc;
//             vectors: v = b v + (1-b) u; both: sum of w^2
//   2 columns factored: col_j = b col_j + (1-b) colsum_j / rows
//   3 rms     U = g rsqrt(row_i / mean(row)) rsqrt(col_j) (or g rsqrt(v)); sum of U^2
//   4 apply   U /= max(1, RMS(U) / clip); m = b1 m + (1-b1) U, U = m (beta1 > 0);
//             a = relative ? min(1e-2, t^-1/2) max(eps2, RMS(w)) : lr; w = w (1 - a wd) - a U; mask; value
// Sums use float atomics (their order varies: results agree with the CPU's to about 1e-6).
#pragma once
#include <cuda_runtime_api.h>

#include "optim.cuh"

namespace trainlab::kern {

struct AfTensor {
  float* master = nullptr;
  void* value = nullptr;  // null when value is master
  int value_dt = 0;
  const void* grad = nullptr;
  int grad_dt = 0;
  float* m = nullptr;      // beta1 > 0
  float* v = nullptr;      // not factored
  float* row = nullptr;    // factored: rows values
  float* col = nullptr;    // factored: cols values
  const float* mask = nullptr;
  int64_t n = 0, rows = 0, cols = 0;  // rows = 0: not factored
  float decay = 1.0f;
  float* acc = nullptr;    // 3 + cols floats of scratch, zeroed
};

struct AfHyper {
  float beta1, weight_decay, eps1, eps2, clip, decay_rate;
  bool relative_step;
};

// scratch: every tensor's acc lies in it (scratch_floats floats), zeroed here first.
void launch_adafactor(const AfTensor* t, int count, const AfHyper& h, float* scratch, int64_t scratch_floats,
                      const DevScalars* sc, cudaStream_t s);

}  // namespace trainlab::kern
