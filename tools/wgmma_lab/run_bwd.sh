#!/bin/bash
# tools/wgmma_lab/run_bwd.sh: builds and runs wgmma_bwd_lab.cu (the wgmma attention backward of
# kernels/attention_wgmma_bwd.cuh against bwd_dkv_tc / bwd_dq_tc) on an sm_90 machine;
# build in build-wgmma-lab/ (git-ignored). Extra nvcc flags (-D..., -Xptxas -v) through NVCC_FLAGS;
# BUILD_ONLY=1 stops after the build.
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-wgmma-lab
/usr/local/cuda/bin/nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
  -Ikernels -Icore $NVCC_FLAGS tools/wgmma_lab/wgmma_bwd_lab.cu -o build-wgmma-lab/wgmma_bwd_lab
[ -n "$BUILD_ONLY" ] && exit 0
timeout 100 build-wgmma-lab/wgmma_bwd_lab
