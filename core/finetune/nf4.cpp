#include "finetune/nf4.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tensor/dynamic_map.h"
#include "util/error.h"

namespace trainlab {

const std::array<float, 16> kNf4Code{-1.0f,
                                     -0.6961928009986877f,
                                     -0.5250730514526367f,
                                     -0.39491748809814453f,
                                     -0.28444138169288635f,
                                     -0.18477343022823334f,
                                     -0.09105003625154495f,
                                     0.0f,
                                     0.07958029955625534f,
                                     0.16093020141124725f,
                                     0.24611230194568634f,
                                     0.33791524171829224f,
                                     0.44070982933044434f,
                                     0.5626170039176941f,
                                     0.7229568362236023f,
                                     1.0f};

uint8_t nf4_index(float x) {
  uint8_t best = 0;
  float best_d = std::fabs(x - kNf4Code[0]);
  for (uint8_t i = 1; i < 16; ++i) {
    const float d = std::fabs(x - kNf4Code[i]);
    if (d < best_d) best = i, best_d = d;
  }
  return best;
}

Nf4Tensor nf4_quantize(const float* w, int64_t n) {
  Nf4Tensor q;
  q.n = n;
  const int64_t blocks = (n + kNf4Block - 1) / kNf4Block;
  std::vector<float> absmax(static_cast<size_t>(blocks), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i])) throw Error("NF4: weight " + std::to_string(i) + " is not finite");
    float& a = absmax[static_cast<size_t>(i / kNf4Block)];
    a = std::max(a, std::fabs(w[i]));
  }
  q.codes.assign(static_cast<size_t>((n + 1) / 2), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float a = absmax[static_cast<size_t>(i / kNf4Block)];
    const uint8_t c = nf4_index(a > 0.0f ? w[i] / a : 0.0f);
    q.codes[static_cast<size_t>(i / 2)] |= static_cast<uint8_t>(i % 2 == 0 ? c << 4 : c);
  }
  // Double quantization of the block scales (bitsandbytes' compress_statistics).
  double sum = 0.0;
  for (float a : absmax) sum += a;
  q.offset = static_cast<float>(sum / static_cast<double>(blocks));
  const DynamicMap& map = dynamic_map_signed();
  const int64_t groups = (blocks + kNf4ScaleBlock - 1) / kNf4ScaleBlock;
  q.absmax2.assign(static_cast<size_t>(groups), 0.0f);
  q.absmax_codes.assign(static_cast<size_t>(blocks), 0);
  for (int64_t b = 0; b < blocks; ++b) {
    float& a2 = q.absmax2[static_cast<size_t>(b / kNf4ScaleBlock)];
    a2 = std::max(a2, std::fabs(absmax[static_cast<size_t>(b)] - q.offset));
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const float a2 = q.absmax2[static_cast<size_t>(b / kNf4ScaleBlock)];
    const float x = absmax[static_cast<size_t>(b)] - q.offset;
    q.absmax_codes[static_cast<size_t>(b)] = dynamic_quantize(map, a2 > 0.0f ? x / a2 : 0.0f);
  }
  return q;
}

std::vector<float> nf4_block_scales(const Nf4Tensor& q) {
  const DynamicMap& map = dynamic_map_signed();
  std::vector<float> s(static_cast<size_t>(q.blocks()));
  for (int64_t b = 0; b < q.blocks(); ++b)
    s[static_cast<size_t>(b)] = map[q.absmax_codes[static_cast<size_t>(b)]] *
                                    q.absmax2[static_cast<size_t>(b / kNf4ScaleBlock)] + q.offset;
  return s;
}

void nf4_dequantize(const Nf4Tensor& q, float* out) {
  const std::vector<float> s = nf4_block_scales(q);
  for (int64_t i = 0; i < q.n; ++i) {
    const uint8_t byte = q.codes[static_cast<size_t>(i / 2)];
    const uint8_t c = i % 2 == 0 ? byte >> 4 : byte & 15;
    out[i] = kNf4Code[c] * s[static_cast<size_t>(i / kNf4Block)];
  }
}

}  // namespace trainlab
