// The layer-level algorithms of post-training quantization beside round-to-nearest (issue 40),
// on host matrices: GPTQ (Frantar et al. 2023) and AWQ (Lin et al. 2024). The model-level driver
// (calibration inputs, layer order, folding, the weights file) is compress/ptq_methods.h.
//
// A linear layer y = x W^T + b has W [rows = out, cols = in]; its calibration inputs are X [n, in].
// Both methods write the lab's format (tensor/quant_format.h): symmetric b-bit codes, one fp16
// scale s = fp16(max|w| / qmax) per group of consecutive weights of a row (a row, or the tensor).
//
// GPTQ: H = 2/n X^T X (the Hessian of the layer's squared output error in W's rows), dampened by
// lambda = damp * mean(diag H) on the diagonal; inputs that never fire (H_jj = 0) get H_jj = 1 and
// their weights 0. U = chol(H^-1) upper. Columns are quantized in order (act-order: by descending
// H_jj), in blocks of 128: column j's code q_j = Q(w_j), its error e = (w_j - q_j) / U_jj spread
// over the block's later columns w_k -= e U_jk; after each block the later columns receive the
// block's errors at once (W[:, later] -= E U[block, later], one product: the lazy batch update).
// A group's scale is taken when its first column is reached, from the columns as updated so far;
// with act-order (columns out of order) every scale is taken from the original weights first
// ("static groups"), so that the groups stay consecutive weights of a row, as the file stores them.
//
// AWQ: per input channel a_j = mean_n |x_nj|; for alpha on a grid over [0, 1], s_j = a_j^alpha
// (normalised by sqrt(max s * min s); a channel that never fires gets 1), the weight becomes
// W diag(s) quantized to nearest, the layer's output X diag(1/s) (W diag(s))_q^T; the alpha with the
// smallest output error over the calibration inputs wins (alpha = 0 is round-to-nearest itself, so
// AWQ's calibration error is never above it). 1/s is folded into the operation before the layer.
// Then each group's clipping range is searched on the output error (clip_quantize).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/quant_format.h"

namespace trainlab {

// A quantized matrix in the lab's format: codes [rows * cols] row-major, one scale a group.
struct QuantizedMatrix {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<float> scales;
  std::vector<int8_t> codes;
  std::vector<float> dequantized() const;  // s * q
};

// Round-to-nearest (quantize_groups) of a [rows, cols] matrix with `spec`.
QuantizedMatrix rtn_quantize(const float* w, int64_t rows, int64_t cols, const QuantSpec& spec);

// Accumulates X^T X of a chunk of inputs x [n, cols] into h [cols * cols] (double, row-major).
void accumulate_gram(const float* x, int64_t n, int64_t cols, std::vector<double>& h);

struct GptqOptions {
  double damp = 0.01;      // lambda = damp * mean(diag H), in (0, 1]
  bool act_order = false;  // columns by descending H_jj
  int64_t block = 128;     // columns a lazy batch update
};

// GPTQ of W [rows, cols] with `gram` = X^T X over `samples` calibration inputs (H = 2/n gram).
// Throws Error when the dampened H is not positive definite (only with an unusable damp).
QuantizedMatrix gptq_quantize(const float* w, int64_t rows, int64_t cols, const std::vector<double>& gram, int64_t samples,
                              const QuantSpec& spec, const GptqOptions& o);

struct AwqResult {
  std::vector<float> scales;  // s [cols]: W diag(s) is quantized, 1/s folded into the input
  double alpha = 0.0;
  double error = 0.0;         // mean squared output error at alpha (per output value)
  double rtn_error = 0.0;     // the same at alpha = 0 (round-to-nearest)
};

// AWQ's search over alpha in {0, 1/grid, ..., 1} for W [rows, cols] with the inputs' mean |x| per
// channel (`mean_abs`, [cols]) and `gram` = X^T X over `samples` inputs (the output error of a
// weight change D is tr(D gram D^T) / samples). `fixed_alpha` >= 0 takes that alpha instead of the
// search (rtn_error is still alpha = 0's).
AwqResult awq_search(const float* w, int64_t rows, int64_t cols, const std::vector<float>& mean_abs,
                     const std::vector<double>& gram, int64_t samples, const QuantSpec& spec, int grid = 20,
                     double fixed_alpha = -1.0);

// AWQ's clipping search, after the scaling: per group inside a row (per channel, per group) the
// scale fp16(c max|w| / qmax) for c in {1, 0.975, ..., 0.5} with the smallest output error of the
// group's weights d^T gram[group cols] d (the reference's auto_clip: 20 steps down to half);
// per tensor it is round-to-nearest.
QuantizedMatrix clip_quantize(const float* w, int64_t rows, int64_t cols, const std::vector<double>& gram,
                              const QuantSpec& spec);

// Mean squared output error per output value of W' against W on inputs with `gram` over `samples`:
// tr((W' - W) gram (W' - W)^T) / (samples * rows).
double output_error(const float* w, const float* w_new, int64_t rows, int64_t cols, const std::vector<double>& gram,
                    int64_t samples);

}  // namespace trainlab
