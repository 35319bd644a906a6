// kernels/transformer_ops.cuh: the character transformer's operations apart from attention and
// the matrix products (issue 4): token + position embedding (and its backward), LayerNorm (and
// its backward, with the residual add fused), elementwise add, erf GELU and inverted dropout.
//
// Math (as core/backend/backend.h states it, CpuBackend is the reference):
//   embedding fwd:  out[i, :] = tok[idx[i], :] + pos[i % T, :]   (out-of-range tokens give tok row 0s)
//   embedding bwd:  dtok[v, :] (=|+=) sum_{i: idx[i] = v} dout[i, :];  dpos[t, :] (=|+=) sum_b dout[b*T + t, :]
//   layernorm fwd:  mean, var (biased, two passes: the mean, then the squares of x - mean),
//                   rstd = 1 / sqrt(var + eps);  y = (x - mean) * rstd * gamma + beta
//   layernorm bwd:  g = dy * gamma;  dx (=|+=) rstd * (g - mean(g) - xhat * mean(g * xhat));
//                   dgamma (=|+=) sum_rows dy * xhat;  dbeta (=|+=) sum_rows dy
//   add:            out = a + b;   gelu: y = x * Phi(x);  gelu bwd: dx = dy * (Phi(x) + x phi(x)), Phi as the
//                   CPU's: 0.5 erfc(|x| / sqrt 2) by Numerical Recipes' erfc (fractional error < 1.2e-7)
//   dropout:        y[i] = hash(seed, first + i) >= threshold(p) ? x[i] * (1 / (1 - p)) : 0  (backend/dropout_hash.h)
// Layout: row-major, contiguous. Precision: inputs converted to fp32, fp32 arithmetic and
// accumulation, one rounding (nearest even) to the output's format. Formats: fp32, bf16, fp16
// (any mix; when all tensors of a call share one format, 16-byte vector loads are used).
// Determinism: no floating-point atomics anywhere. The column reductions (dtok, dpos, dgamma,
// dbeta) are split into fixed row segments (a function of the shape alone) whose partial sums
// (fp32, in row order) are added in segment order by a second kernel, so the same inputs always
// give bit-identical results. LayerNorm backward reads each row once: dx and the segment's
// dgamma / dbeta partial sums come from one kernel (rows up to 25,345 columns wide).
// Scratch: the backward reductions need `partial` fp32 workspace of the size *_workspace() says.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

void launch_embedding_forward(const void* tok, int tok_dt, int64_t vocab, const void* pos, int pos_dt,
                              const int32_t* idx, int64_t n, int64_t T, int64_t d, void* out, int out_dt,
                              cudaStream_t s);
// fp32 elements of scratch embedding_backward needs.
int64_t embedding_backward_workspace(int64_t n, int64_t vocab, int64_t d);
void launch_embedding_backward(const void* dout, int dout_dt, const int32_t* idx, int64_t n, int64_t T, int64_t d,
                               void* dtok, int dtok_dt, int64_t vocab, void* dpos, int dpos_dt, int64_t pos_rows,
                               bool accumulate, float* partial, cudaStream_t s);

void launch_layernorm_forward(const void* x, int x_dt, const void* gamma, int g_dt, const void* beta, int b_dt,
                              float eps, int64_t rows, int64_t d, void* y, int y_dt, float* mean, float* rstd,
                              cudaStream_t s);
// fp32 elements of scratch layernorm_backward needs (with dx_sums: the column sums of dx as
// stored, accumulated as the parameters, a linear layer's bias gradient taken in the same pass).
int64_t layernorm_backward_workspace(int64_t rows, int64_t d);
void launch_layernorm_backward(const void* x, int x_dt, const void* gamma, int g_dt, const float* mean,
                               const float* rstd, const void* dy, int dy_dt, int64_t rows, int64_t d, void* dx,
                               int dx_dt, bool accumulate_dx, void* dgamma, int dg_dt, void* dbeta, int db_dt,
                               bool accumulate_params, float* partial, cudaStream_t s, void* dx_sums = nullptr,
                               int ds_dt = 0);

// out[c] (=|+=) sum_r x[r, c] (a linear layer's bias gradient), same deterministic segments.
int64_t column_sums_workspace(int64_t rows, int64_t cols);
void launch_column_sums(const void* x, int x_dt, int64_t rows, int64_t cols, void* out, int out_dt, bool accumulate,
                        float* partial, cudaStream_t s);

void launch_add(const void* a, int a_dt, const void* b, int b_dt, void* out, int out_dt, int64_t n, cudaStream_t s);
void launch_gelu_forward(const void* x, int x_dt, void* y, int y_dt, int64_t n, cudaStream_t s);
void launch_gelu_backward(const void* x, int x_dt, const void* dy, int dy_dt, void* dx, int dx_dt, int64_t n,
                          cudaStream_t s);
void launch_dropout(const void* x, int x_dt, float p, uint64_t seed, uint64_t first, void* y, int y_dt, int64_t n,
                    cudaStream_t s);

}  // namespace trainlab::kern
