#!/bin/bash
# tools/attn_lab/run.sh [REV]: builds and runs attn_lab.cu on a CUDA machine, the working copy of
# kernels/attention_tc.cuh against the one at git revision REV (default HEAD). On the GPU machine,
# where the checkout has no .git, pass the reference file instead: REF=path/to/attention_tc.cuh.
# Extra nvcc flags (-D...) through NVCC_FLAGS.
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-attn-lab
if [ -n "$REF" ]; then cat "$REF"; else git show "${1:-HEAD}:kernels/attention_tc.cuh"; fi |
  sed 's/namespace trainlab::kern::attn\b/namespace trainlab::kern::attn_old/' > build-attn-lab/attn_old.cuh
PATH=/usr/local/cuda/bin:$PATH nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 \
  -Ikernels -Icore -Ibuild-attn-lab $NVCC_FLAGS tools/attn_lab/attn_lab.cu -o build-attn-lab/attn_lab
build-attn-lab/attn_lab
