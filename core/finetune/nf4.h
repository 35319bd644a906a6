// NF4: bitsandbytes' 4-bit NormalFloat with double quantization (Dettmers et al. 2023, QLoRA),
// the format of QLoRA's frozen base.
//
//   codebook   the 16 values of bitsandbytes' get_4bit_type("nf4"): quantiles of N(0, 1) scaled
//              to [-1, 1], with an exact 0 (kNf4Code below, copied digit for digit)
//   block      64 weights share absmax = max |w|; a weight is stored as the index of the code
//              nearest to w / absmax (ties: the lower index), two a byte, the even element in the
//              high nibble (bitsandbytes' packing)
//   double q.  the absmax values minus their mean (`offset`, one fp32 per tensor) are quantized
//              blockwise again: 256 of them share an fp32 absmax2, each stored as the 8-bit index
//              of the nearest entry of the signed dynamic map (tensor/dynamic_map.h, bitsandbytes'
//              create_dynamic_map(signed=True))
//   dequant    w = code[q] * (dyn[q2] * absmax2 + offset)
// Bits a weight: 4 + 8/64 + 32/(64*256) = 4.127 when n is a multiple of 16384, plus the tensor's
// one fp32 offset (32/n).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace trainlab {

constexpr int64_t kNf4Block = 64;
constexpr int64_t kNf4ScaleBlock = 256;
extern const std::array<float, 16> kNf4Code;

struct Nf4Tensor {
  int64_t n = 0;
  std::vector<uint8_t> codes;         // ceil(n/2) bytes
  std::vector<uint8_t> absmax_codes;  // one byte a block of 64
  std::vector<float> absmax2;         // one fp32 a block of 256 block scales
  float offset = 0.0f;                // mean of the block absmax values
  int64_t blocks() const { return static_cast<int64_t>(absmax_codes.size()); }
  int64_t bytes() const {
    return static_cast<int64_t>(codes.size() + absmax_codes.size() + 4 * absmax2.size() + 4);
  }
  double bits_per_weight() const { return n ? 8.0 * static_cast<double>(bytes()) / static_cast<double>(n) : 0.0; }
};

// Index of the NF4 code nearest to x in [-1, 1] (ties: the lower index).
uint8_t nf4_index(float x);
// w: n fp32 values (finite; Error naming the element otherwise).
Nf4Tensor nf4_quantize(const float* w, int64_t n);
// The block scales as dequantized from the double quantization.
std::vector<float> nf4_block_scales(const Nf4Tensor& q);
void nf4_dequantize(const Nf4Tensor& q, float* out);

}  // namespace trainlab
