// The dropout mask as a pure function of (seed, element index), shared by the CPU backend and the
// CUDA kernels so that both draw the same mask and a recomputation (checkpointing, backward)
// redraws it without storing it: element i is kept iff hash(seed, i) >= p * 2^32.
// Plain C++ usable from CUDA (.cu files define TRAINLAB_HD as __host__ __device__ first).
#pragma once
#include <cstdint>

#ifndef TRAINLAB_HD
#define TRAINLAB_HD
#endif

namespace trainlab {

// splitmix64's finaliser over seed + golden-ratio * (i + 1), top 32 bits.
TRAINLAB_HD inline uint32_t dropout_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

// The keep threshold for probability p in [0, 1): keep iff hash >= threshold.
TRAINLAB_HD inline uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 4294967295u : static_cast<uint32_t>(t);
}

}  // namespace trainlab
