// Small numeric helpers shared by the CPU backend's source files (cpu_backend.cpp,
// cpu_transformer_ops.cpp, cpu_panels.cpp): the vector-clone attribute of the hot loops and tf32
// rounding. Internal to core/backend; not part of the backend interface.
#pragma once

#include <bit>
#include <cstdint>

#include "tensor/vector_clones.h"  // TL_VECTOR_CLONES

namespace trainlab::cpu {

// f rounded to tf32 (10 mantissa bits): the low 13 bits rounded away, ties to even; inf/NaN kept.
inline float tf32_round(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7F800000u) != 0x7F800000u) {
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
  }
  return std::bit_cast<float>(u);
}

}  // namespace trainlab::cpu
