// TL_VECTOR_CLONES: the attribute of the hot elementwise loops (format conversions in
// tensor/dtype.cpp, the CPU backend's loops). They are written branch-free so the compiler
// vectorises them; on x86-64 each also gets an AVX2/FMA/F16C clone (x86-64-v3) chosen at load
// time by the CPU it runs on, with the baseline clone as the fallback. Both clones compute the
// same bits (integer and exactly rounded operations only), which tests/unit/test_fp8.cpp checks.
#pragma once

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define TL_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TL_VECTOR_CLONES
#endif
