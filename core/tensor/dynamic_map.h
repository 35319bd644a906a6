// The 8-bit dynamic code maps of bitsandbytes (Dettmers et al. 2022, "8-bit Optimizers via
// Block-wise Quantization"): 256 sorted values in [-1, 1] (signed, for Adam's first moment) or
// [0, 1] (unsigned, for the second), dense near zero. Built as bitsandbytes' create_dynamic_map
// (max_exponent_bits 7): for i = 0..6, the midpoints of linspace(0.1, 1, n_i + 1) times 10^(i - 6)
// with n_i = 2^i (signed, both signs) or 2^(i+1) (unsigned), plus 0 and 1, sorted.
// A value x (already divided by its block's absmax, so |x| <= 1) is stored as the index of the
// nearest entry; of two equally near entries the lower index. The CPU optimizer and the CUDA
// kernels (kernels/optim8.cu, which receives these tables from the host) use the same tables and
// the same rule.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace trainlab {

using DynamicMap = std::array<float, 256>;
const DynamicMap& dynamic_map_signed();
const DynamicMap& dynamic_map_unsigned();

// Index of the entry of `map` nearest to x (ties: the lower index); x outside the map's range
// gives the first or last index. A branch-free binary search: lo ends as the last index with
// map[lo] <= x (0 when x < map[0]), then lo or lo + 1, whichever is nearer.
inline uint8_t dynamic_quantize(const DynamicMap& map, float x) {
  int lo = 0;
  for (int step = 128; step > 0; step >>= 1) lo += map[static_cast<size_t>(lo + step)] <= x ? step : 0;
  if (lo == 255) return 255;
  const float below = map[static_cast<size_t>(lo)], above = map[static_cast<size_t>(lo + 1)];
  return static_cast<uint8_t>(x - below <= above - x ? lo : lo + 1);
}

}  // namespace trainlab
