#!/bin/bash
# tools/wgmma_lab/run.sh: builds and runs wgmma_lab.cu (the wgmma attention forward of
# kernels/attention_wgmma.cuh against fwd_tc) on an sm_90 machine; build in build-wgmma-lab/ (git-ignored).
# Extra nvcc flags (-D..., -Xptxas -v) through NVCC_FLAGS; BUILD_ONLY=1 stops after the build.
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-wgmma-lab
/usr/local/cuda/bin/nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
  -Ikernels -Icore $NVCC_FLAGS tools/wgmma_lab/wgmma_lab.cu -o build-wgmma-lab/wgmma_lab
[ -n "$BUILD_ONLY" ] && exit 0
timeout 100 build-wgmma-lab/wgmma_lab
