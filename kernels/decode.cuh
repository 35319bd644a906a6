// kernels/decode.cuh: the per-token kernels of the GPU char-gpt decoder
// (core/backend/cuda/cuda_decoder.cpp): LayerNorms, weight-only GEMVs with fused epilogues, and
// single-query attention over the KV cache; a kernel per operation (five a layer for one
// sequence, seven for several), replayed as one CUDA graph, or the whole token in one cooperative
// kernel (decode_step.cu).
//
// GEMV: y[r] = sum_k W[r, k] * x[k] + bias[r], W [rows, cols] row-major in fp32, bf16, int8
//   (codes, one fp16 scale per `group` consecutive weights of a row) or packed int4
//   (two's-complement nibbles, low nibble first, element i of the matrix at bit 4i; fp16 scale per
//   group). Codes are dequantised in registers: each 16-byte load gives 4 fp32, 8 bf16, 16 int8 or
//   32 int4 weights (codes through the mantissa of 2^23, exact, no I2F), their products with x are
//   summed in fp32 and multiplied by the group's scale once. Weights stream past L1 with 256-byte
//   L2 fetches.
//   One sequence (decode_gemv.cuh, the tile GEMV): one wave of 256-thread blocks at most; the
//   block puts x into shared memory (padded so that a warp's lanes meet different banks), or
//   LN(x) computed by the block itself for the GEMVs that take a normalised input, bit for bit the
//   LayerNorm kernel's; a warp reads R rows side by side (each x value read once for the R), U
//   loads of each in flight a lane, long rows split into pieces over P warps (summed in piece
//   order). R, U and P by the matrix's shape (decode.cu, launch_tile_rule).
//   LayerNorm, a kernel of its own (launch_decode_batch_norm): the step's first, x = tok[t] +
//                   pos[p] (stored: the residual stream), h = LayerNorm(x; gamma, beta) (mean,
//                   biased variance, eps 1e-5); with several sequences also before every GEMV
//                   that takes a normalised input, h = LN(x).
//   Epilogue: y[r] = v | y[r] += v (residual add) | y[r] = GELU(v) (erf form) |
//             qkv scatter: r < d -> q[r], r < 2d -> kcache[p, r - d], else vcache[p, r - 2d].
//   The token t and position p are read from memory (state[2], state[1]) so a captured graph
//   replays for every token: the step's first kernel reads them from mapped pinned host memory and
//   copies them to device memory (state_out) for the kernels after it.
// Attention (decode_attention.cu, flash-decoding): the positions 0..p of each head in runs of at
//   most kAttnRunKeys, a block a run; a block computes q . k_j / sqrt(hd) (a warp a key), m = the
//   run's max, e_j = exp(s_j - m), l = sum e_j and the unnormalised sum e_j v_j, the keys and
//   values of earlier steps loaded before the wait for the previous kernel; one run writes
//   y = sum e_j v_j / l, several are combined by the last block of the head in order:
//   y = sum_r exp(m_r - M) acc_r / sum_r exp(m_r - M) l_r. KV cache fp32 [context, d] per layer.
//   The one-kernel step runs runs of its own split (decode_dev::attention_run, about two blocks
//   an SM), the heads' runs going round its blocks, and the same combination.
// Step: the whole token in one cooperative kernel (decode_step.cu), persistent blocks (one per SM)
//   with a grid-wide barrier between phases, five a layer, each over the whole grid: (A)
//   LayerNorm + qkv (q to memory, k and v into the cache); (B) attention; (C) the projection
//   + residual; (D) LayerNorm + fc + GELU; (E) out + residual; then the head. Before each barrier
//   a block already loads its first weights, scales and bias of the next phase, so that after it
//   only the activations (read through L2) are on the critical path. Its sums agree with the
//   kernel-per-operation step's to rounding (the order of a row's sums and of attention's runs
//   differs with the block size).
// Latency: each GEMV's first weights and scales, and attention's earlier keys and values, are
//   loaded before the kernel waits for the previous one (programmatic dependent launch); the tile
//   GEMV also its LayerNorm's gamma and beta (cp.async into shared memory) and, but for int4, its
//   rows' biases, reading the residual it adds to right after the wait, so that only x and the
//   sums stay on the critical path. ptxas may move the wait above loads of the same basic block
//   (it did for the fp32 and bf16 tile and batched GEMVs and the tensor-core GEMV: a loop before
//   the wait prevents it); tools/pdl_order_check.sh checks the order in the SASS.
// Requirements (checked by the decoder): cols a multiple of the format's 16-byte vector (4, 8,
//   16, 32 weights), groups a multiple of it, 16-byte aligned rows (and LayerNorm parameters:
//   cp.async copies them 16 bytes at a time), head dim <= 256 and a multiple of 4.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common.cuh"

namespace trainlab::kern {

enum DecodeWeightFormat : int { kDecF32 = 0, kDecBF16 = 1, kDecI8 = 2, kDecI4 = 3 };
enum DecodeEpilogue : int { kStore = 0, kAddTo = 1, kGelu = 2, kQkvScatter = 3 };
enum DecodeLayout : int { kRowMajor = 0, kTcChunks = 1 };

// Weights a 16-byte load holds in `format` (host code; the kernels have it as Fmt<F>).
inline int decode_weights_per_load(int format) {
  return format == kDecF32 ? 4 : format == kDecBF16 ? 8 : format == kDecI8 ? 16 : 32;
}

struct DecodeGemv {
  // weights
  int format = kDecF32;
  const void* w = nullptr;           // codes / values
  const void* scales = nullptr;      // fp16, rows * cols / group (int8 / int4)
  int64_t rows = 0, cols = 0, group = 0;
  const float* bias = nullptr;       // [rows] or null
  // input: a LayerNorm's output (launch_decode_batch_norm before the GEMV), or, one sequence
  // (launch_decode_gemv_batch with batch 1), x itself normalised by the GEMV when ln_gamma is set
  const float* x = nullptr;          // [cols]
  const float *ln_gamma = nullptr, *ln_beta = nullptr;  // [cols]
  // epilogue
  int epilogue = kStore;
  float* y = nullptr;                // [rows] (kQkvScatter: q [d])
  float* kcache = nullptr, * vcache = nullptr;  // kQkvScatter: [context, d], d = rows / 3
  const int32_t* state = nullptr;    // {token, position} (device memory, or mapped host memory)
  // batched (launch_decode_gemv_batch only): `batch` input vectors x [batch, cols] and outputs y
  // [batch, rows] (kQkvScatter: q [batch, d]); sequence b's caches start at b * kv_stride floats.
  int batch = 1;
  int64_t kv_stride = 0;
  // Rows of one sequence (a verification pass): row b is at position state[1] + b * pos_step
  // (0: every sequence at state[1]); with kv_stride 0 all rows write one cache.
  int pos_step = 0;
  // A batch of one through the batched kernel all the same (not the one-sequence kernel), so that
  // a row's sums are those of any batch: a verifying decoder's pushes equal its rows bit for bit.
  bool batch_sums = false;
  int layout = kRowMajor;  // kTcChunks: stored by decode_tc_column (launch_decode_gemv_tc)
};

// Batched decoding (DecodeSpec::batch > 1), the same kernels over the sequences:
//   LayerNorm:  h[b] = LN(x[b]) or, embedding, x[b] = tok[state[2 + b]] + pos[state[1]] then
//               h[b] = LN(x[b]); one block a sequence (launch_decode_batch_norm).
//   GEMV:       (fp32 weights, and rows that do not take the tensor-core layout below)
//               y[b] = W x[b] + bias for b < batch (at most kMaxBatch), each 16-byte weight load
//               used for every sequence: the weights are read once for the whole batch. One wave
//               of 512-thread blocks at most (by occupancy) going round tiles of rows, 8 loads in
//               flight a lane; x from global memory (L1 / L2).
//   Attention:  decode_attention_kernel with a third grid dimension over the sequences
//               (DecodeAttention::batch, kv_stride).
// Batched decoding, tensor cores (decode_tc.cu; bf16, int8 and int4 weights whose rows split into
//   chunks of 64 bytes, groups a multiple of 16): the batched decoder stores each row's chunks in
//   tensor-core order, position p = E t + 4 j + i of a chunk (E weights a 16-byte load, t < 4,
//   j < E / 4, i < 4) holding the chunk's column 16 j + 4 t + i (decode_tc_column), so that the
//   16 bytes thread t of a quad loads are its mma.sync m16n8k16 A fragments for the chunk's E / 4
//   k-steps, each k-step 16 whole columns of one scale group. x is split into bf16 hi + lo
//   (x = hi + lo to 2^-16 of x) and both are multiplied: products exact (the weights' values are
//   bf16 numbers), sums in fp32. A block: 16 rows, its chunks dealt round 8 warps, the warps'
//   sums added in warp order; weights stream ahead by one chunk a warp.
// Verification rows (a speculative pass, CudaDecoder with DecodeSpec::verify_rows): the same
//   kernels over `batch` rows of ONE sequence, row b at position state[1] + b (pos_step 1), all
//   rows writing and reading one KV cache (kv_stride 0): row b attends over keys 0..state[1] + b,
//   the rows before it written by the same pass's qkv kernel. A row's sums do not depend on the
//   number of rows (each sequence of a batched GEMV has its own accumulators; the attention split
//   is fixed by the decoder), so a pass of n rows equals n pushes bit for bit when the pushes run
//   the same kernels (DecodeGemv::batch_sums).
// State (mapped pinned host memory, copied to device memory by the embedding's LayerNorm):
//   {unused, position, token of sequence (or row) 0, ..., token of sequence batch - 1}.
constexpr int kMaxBatch = 16;
struct DecodeBatchNorm {
  const float* x = nullptr;             // [batch, dim] the residual stream (embedding: written)
  float* x_out = nullptr;               // embedding: receives tok + pos (same buffer as x)
  float* h = nullptr;                   // [batch, dim] LN(x)
  const float *gamma = nullptr, *beta = nullptr;
  const float *tok = nullptr, *pos = nullptr;  // embedding when tok is set
  int64_t dim = 0;
  int batch = 1;
  int pos_step = 0;                     // row b's position: state[1] + b * pos_step (DecodeGemv)
  const int32_t* state = nullptr;       // see above
  int32_t* state_out = nullptr;         // when set, block 0 copies the 2 + batch ints here
};

// One matrix of the step (the fields of DecodeGemv's weights).
struct DecodeMatrix {
  const void* w = nullptr;
  const void* scales = nullptr;
  const float* bias = nullptr;
  int64_t rows = 0, cols = 0, group = 0;
};

struct DecodeLayer {
  DecodeMatrix qkv, proj, fc, out;
  const float *ln1_w = nullptr, *ln1_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr;
  float *k = nullptr, *v = nullptr;  // KV cache [context, dim]
};

// Single-query attention of one token over the KV cache (decode_attention.cu): the positions of
// each head in runs of at most kAttnRunKeys, a block a run, combined by the last of them.
constexpr int kAttnThreads = 512;
constexpr int kAttnRunKeys = 128;
struct DecodeAttention {
  const float* q = nullptr;                            // [dim]
  const float *k = nullptr, *v = nullptr;              // KV cache [context, dim]
  const int32_t* state = nullptr;                      // {token, position}: keys 0..position
  int64_t heads = 0, dim = 0, context = 0;
  float scale = 1.0f;                                  // 1 / sqrt(head dim), as the CPU generator
  int splits = 1;                                      // decode_attention_splits
  float* part = nullptr;                               // scratch: [heads, splits, hd] partial sums
  float* stats = nullptr;                              // [heads, splits, 2] max and sum of exponentials
  unsigned* tickets = nullptr;                         // [heads], zero before the first launch
  float* y = nullptr;                                  // [dim]
  // Batched: `batch` sequences (grid z); sequence b's q and y at b * dim, its caches at
  // b * kv_stride, its scratch at b * splits * dim (part) and b * splits * heads * 2 (stats),
  // its tickets at b * heads.
  int batch = 1;
  int64_t kv_stride = 0;
  int pos_step = 0;  // rows of one sequence (kv_stride 0): row b attends over keys 0..state[1] + b
};

struct DecodeStep {
  int format = kDecF32;
  int64_t layers = 0, dim = 0, heads = 0, context = 0;
  const DecodeLayer* layer = nullptr;  // [layers], device memory
  DecodeMatrix head;
  const float *tok = nullptr, *pos = nullptr, *ln_w = nullptr, *ln_b = nullptr;
  float *x = nullptr, *x2 = nullptr, *f = nullptr;  // the residual stream (two buffers, alternating by layer) [dim], f [4 dim]
  float *q = nullptr, *att = nullptr;                 // the query and the attention output [dim]
  DecodeAttention attn;  // flash-decoding's split and scratch (q, caches and y set by the kernel)
  float* logits = nullptr;                                         // [head.rows]
  // Profiling (null otherwise): block 0 stores the global timer (ns) at the start, after each
  // barrier and at the end: 5 * layers + 2 stamps, the phases' boundaries as block 0 sees them.
  unsigned long long* stamps = nullptr;
};

// Blocks of the step kernel (one per SM when one fits: the kernel's blocks must all be resident),
// or 0 when the device cannot run it (no cooperative launch, too much shared memory).
int decode_step_blocks(const DecodeStep& s, int device);

// One token at `position`: its logits into s.logits, its keys and values into the caches.
void launch_decode_step(const DecodeStep& s, int32_t token, int32_t position, int blocks, cudaStream_t stream);

// Sets the kernels' attributes on the current device (one L1/shared-memory split for all of them,
// the tile GEMV's shared memory and blocks an SM); call before any launch on each device and
// outside stream capture.
void prepare_decode_kernels();

// The kernel-per-operation step (see DecodeBatchNorm above), any batch from 1. pdl: launch with
// programmatic dependent launch (the kernel may start while the previous one on the stream
// finishes, and waits for it before reading; hides most of the launch gap).
void launch_decode_batch_norm(const DecodeBatchNorm& n, bool pdl, cudaStream_t s);
void launch_decode_gemv_batch(const DecodeGemv& g, int sm_count, bool pdl, cudaStream_t s);
// Computes (and caches) the occupancy that sizes the batched GEMV's grid for `format`: call
// outside stream capture, before the first launch.
void prepare_decode_gemv_batch(int format);
// Whether a matrix of `format` with rows of `cols` weights in groups of `group` takes the
// tensor-core layout; the column stored at position p of a row in it.
bool decode_tc_layout_fits(int format, int64_t cols, int64_t group);
inline int64_t decode_tc_column(int format, int64_t p) {
  const int64_t e = decode_weights_per_load(format), chunk = 4 * e, q = p % chunk;
  const int64_t t = q / e, j = (q % e) / 4, i = q % 4;
  return p - q + 16 * j + 4 * t + i;
}
// The batched GEMV of a kTcChunks matrix (launch_decode_gemv_batch calls it for such matrices).
void launch_decode_gemv_tc(const DecodeGemv& g, bool pdl, cudaStream_t s);

// Runs a head for the one-kernel step (decode_step.cu) on a device with sm_count SMs: about two
// blocks an SM over all heads, runs of at least 16 positions, and never fewer runs than the
// attention kernel's (one per kAttnRunKeys positions of the context, the scratch's stride).
// The scratch `part` + `stats` in floats.
int decode_attention_splits(int64_t heads, int64_t context, int sm_count);
int64_t decode_attention_scratch_floats(int64_t heads, int64_t dim, int splits);

void prepare_decode_attention();
void launch_decode_attention(const DecodeAttention& a, bool pdl, cudaStream_t s);

}  // namespace trainlab::kern
