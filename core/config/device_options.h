// DeviceOptions: the device.* config keys that choose how a backend computes (config_schema.cpp,
// device_keys), as the typed struct that create_backend takes and hands on to the CUDA module and
// its kernels as arguments. These were environment variables (TRAINLAB_FP32_GEMM,
// TRAINLAB_LT_AUTOTUNE, TRAINLAB_ATTN_WGMMA); as config keys they are part of a run's record and
// can differ between two backends of one process. Deployment settings that say where things are
// rather than how a run computes stay environment variables: TRAINLAB_THREADS (OpenBLAS threads
// of the CPU backend), TRAINLAB_CUDA_MODULE (the path of libtrainlab_cuda.so), TRAINLAB_DATA_DIR
// (where the data sets are).
#pragma once
#include <cstdint>
#include <string>

namespace trainlab {

class Config;

// How fp32 products (MatmulMode::Native on fp32 operands) are computed on cuBLASLt:
//   Native  CUBLAS_COMPUTE_32F: plain fp32 FMA, no tensor cores;
//   Bf16x9  CUBLAS_COMPUTE_32F_EMULATED_16BFX9, strategy EAGER: every fp32 operand split into three
//           bf16 parts, the products on the bf16 tensor cores, FP32-accurate by cuBLAS's contract;
//   Auto    the same compute type, strategy PERFORMANT: emulated only where cuBLAS expects a gain.
// Native is the default: on the H200 (cuBLAS of CUDA 13.0) the emulated compute type runs cuBLAS's
// plain FP32 kernels (bit-identical output, same time: BF16x9 kernels are Blackwell's), so neither
// alternative is faster there (measurement: core/backend/cuda/lt_gemm.cpp, test_cuda_fp32_gemm).
enum class Fp32Math : uint8_t { Native, Bf16x9, Auto };
const char* fp32_math_name(Fp32Math m);  // "native", "bf16x9", "auto"
// Throws Error naming the three choices for any other name.
Fp32Math fp32_math_from_name(const std::string& name);

struct DeviceOptions {
  Fp32Math fp32_gemm = Fp32Math::Native;  // device.fp32_gemm
  // device.lt_autotune: each cuBLASLt plan times the heuristic's first 8 algorithms on its first
  // eager call that overwrites its output and keeps the fastest. The choice can differ between
  // processes, so products are then not bit-reproducible from run to run: an experiment.
  bool lt_autotune = false;
  // device.attention_wgmma: the warpgroup-MMA attention kernels (bf16, head dim 64, compute
  // capability 9.0); off runs the mma.sync kernels, bit-identical results (for comparisons).
  bool attention_wgmma = true;
};

// The device.* keys of a config (every key validated by the schema already).
DeviceOptions device_options(const Config& config);

}  // namespace trainlab
