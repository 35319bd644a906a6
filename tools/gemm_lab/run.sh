#!/bin/bash
# tools/gemm_lab/run.sh: builds and runs gemm_lab.cu (cuBLASLt variants of the char-gpt2 products)
# on a CUDA machine.
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-gemm-lab
PATH=/usr/local/cuda/bin:$PATH nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 \
  tools/gemm_lab/gemm_lab.cu -lcublasLt -o build-gemm-lab/gemm_lab
build-gemm-lab/gemm_lab
