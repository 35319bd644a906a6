// The arithmetic work and memory traffic of one call of an operation, from the shapes and formats
// at the call: what places a timed kernel on a roofline (achieved FLOP/s against its arithmetic
// intensity, flops / bytes). One formula per kind of operation, here only; both backends' kernel
// timing (KernelTime::flops, ::bytes) and the roofline view read these.
//  - matrix products: 2 m n k FLOPs; bytes = A and B read once and C written once in their own
//    formats (C read too when accumulated), the minimum traffic a perfectly tiled product has;
//  - streaming operations (element-wise, normalisations, gathers, optimizers): every operand read
//    once and every result written once, plus a stated number of FLOPs an element;
//  - attention (causal, fused): the two products QK^T and PV over the lower triangle, 2 B H T^2 d
//    FLOPs forward (half of the square's 4 B H T^2 d) and 2.5 times that backward (five products:
//    QK^T recomputed, dV, dP, dQ, dK); bytes = q, k, v, y and the row statistics (plus dy and dqkv
//    backward), never the T x T scores, which a fused kernel keeps on chip.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>

#include "backend/backend.h"

namespace trainlab {

struct OpCost {
  double flops = 0.0;
  double bytes = 0.0;
  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

// C[m, n] = A[m, k] B[k, n] with A, B and C in formats a, b, c; `reads_c` when C is accumulated.
OpCost matmul_cost(int64_t m, int64_t n, int64_t k, DType a, DType b, DType c, bool reads_c = false);
// A streaming operation: `read` tensors read once, `written` written once, `flops_per_element`
// FLOPs for each element of the first written tensor (or of the first read one when none is written).
OpCost stream_cost(std::initializer_list<const Tensor*> read, std::initializer_list<const Tensor*> written,
                   double flops_per_element = 0.0);
// The products of the table, from their arguments (backend.h's shapes): gemm C = op(A) op(B)
// (+ beta C); linear_forward (+ bias read, + residual read); linear_backward (dw = dy^T x and
// dx = dy w: two products, dy read, dw read too when accumulated, dbias written).
OpCost gemm_cost(const Tensor& a, bool trans_a, const Tensor& b, const Tensor& c, float beta);
OpCost linear_forward_cost(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                           const Tensor* residual = nullptr);
OpCost linear_backward_cost(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dw, const Tensor* dbias,
                            const Tensor* dx, bool accumulate);
// FLOPs an element of the streaming operations (counted as a plain loop computes them: an exp or
// a tanh as one), for stream_cost.
namespace op_flops {
constexpr double kCopy = 0.0, kAdd = 1.0, kRelu = 1.0, kGelu = 8.0, kGeluBackward = 12.0, kDropout = 2.0;
constexpr double kSoftmaxXent = 6.0, kLayerNorm = 8.0, kLayerNormBackward = 12.0, kEmbedding = 1.0;
constexpr double kAdamW = 14.0, kSgd = 4.0, kLion = 8.0;
}  // namespace op_flops
// Causal fused attention on qkv [B*T, 3C] with H heads (see above).
OpCost attention_cost(const Tensor& qkv, int64_t B, int64_t T, int64_t H, bool backward);
// A multi-tensor optimizer step: per element the master, gradient and `state_tensors` moments
// (fp32) read and written (the gradient only read), the compute copy written when it is not the
// master, and `flops_per_element` FLOPs.
OpCost optimizer_cost(std::span<const ParamSlot> params, int state_tensors, double flops_per_element);

}  // namespace trainlab
