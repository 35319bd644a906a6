// The CPU backend's format conversions and its blocked matrix product (cpu_panels.cpp).
//
// Operands that are not plain fp32 (16-bit and fp8 formats, or fp32 with tf32 rounding) are converted
// to fp32 a block at a time, and results are computed in blocks and rounded back. The conversion
// workspace of a product grows with the product but stays below what storing its two smaller
// tensors in 16 bits saves (kGemmWork floats a slot at least), or what its slot already holds, so
// a 16-bit run never holds more memory than the fp32 run it replaces, whatever the batch. The elementwise loops split the
// elements (kPanel at a time) and row reductions keep their row order, so they give the same bits
// as whole-tensor conversions; the products make the same sgemm calls (64 x 64 blocks of the
// result, panels of 64 of the inner dimension accumulated in fp32) however their operands are
// converted or their calls spread over threads, so the results keep their bits (panel_gemm).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tensor/tensor.h"

namespace trainlab::cpu {

constexpr int64_t kPanel = 4096;      // elements a step of the elementwise loops
constexpr int64_t kGemmWork = 4096;  // floats panel_gemm may always use for each of A, B and C (16 KiB)

// dst[i] = fp32 of n values of format t (exact widening; vectorised).
void to_f32(DType t, const void* src, float* dst, size_t n);
// n fp32 values rounded to format t (nearest even, NaNs stay quiet NaNs), written to dst.
void from_f32(const float* src, DType t, void* dst, size_t n);
// p[i] = round_to(t, p[i]) for n values.
void round_n(DType t, float* p, size_t n);

// Address of element `elem` of t's storage (any format).
const char* elem_ptr(const Tensor& t, int64_t elem);
char* elem_ptr(Tensor& t, int64_t elem);

// An operand's fp8 cast inside a product (MatmulMode::Fp8): each value is multiplied by `scale`
// and rounded to `format` (e4m3 or e5m2) as it is loaded into a panel. The panel holds the fp8
// grid values (exact in fp32), not divided back: the product's alpha carries the inverse scales,
// as cuBLASLt's scale pointers do. With `amax_bits` set, the largest |x| of the values loaded
// (before the scale) is max-ed into it as fp32 bits (convert_round_scaled: NaN left out, an inf
// gives 0x7F800000), so the delayed scaling's maximum needs no pass of its own.
struct Fp8Cast {
  DType format = DType::F8E4M3;
  float scale = 1.0f;
  uint32_t* amax_bits = nullptr;
};

// dst[rows, cols] (dense) = fp32 of the block at (r0, c0) of the row-major matrix t (tf32-rounded
// if asked, or cast to fp8 by `cast`).
void load_block(const Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float* dst, bool tf32,
                const Fp8Cast* cast = nullptr);
// The block at (r0, c0) of t = src[rows, cols] (row stride ld_src), rounded to t's format.
void store_block(const float* src, int64_t ld_src, Tensor& t, int64_t r0, int64_t rows, int64_t c0, int64_t cols);

// A workspace buffer of at least n floats in the given slot (allocated on first use).
using Scratch = std::function<float*(int slot, size_t n)>;
// Runs on every finished fp32 block of a product's result before it is rounded into C:
// block[rows, cols] with row stride ld, at (i0, j0) of C.
using BlockEpilogue = std::function<void(float* block, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t cols)>;

// C[m,n] = alpha op(A) op(B) + beta C through cblas_sgemm; with everything fp32 it is one sgemm on
// the tensors. Otherwise C is computed in blocks, each as a sum over the inner dimension's panels
// of 64 (one sgemm each, beta for the first, then accumulated in fp32), converting
// whatever is not plain fp32 into blocks of A, B and C in workspace slot 1, within the budget
// above: each value of A and B is converted as few times as that allows. A product of at least
// 2^20 multiply-adds a thread runs on up to `threads` threads (no more than its budget holds
// 3 x kGemmWork floats for), each taking a run of C's blocks with buffers of its own (B
// converted once for all of them where that fits), or, where C is one block, splitting that
// block's conversions by rows and its calls; the sgemm calls, and so the bits, are the same
// whatever the blocks or the threads.
// cast_a / cast_b (optional): the operands' fp8 casts (then never read in place).
// held: the floats slot 1 already holds (grown by a larger product or another operation): the
// product may use them too (more threads' buffers, larger blocks), as they cost no more memory.
void panel_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta, bool tf32,
                const Scratch& scratch, const BlockEpilogue* epilogue, const Fp8Cast* cast_a = nullptr,
                const Fp8Cast* cast_b = nullptr, int threads = 1, size_t held = 0);

}  // namespace trainlab::cpu
