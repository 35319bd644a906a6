#!/bin/bash
# tools/attn_lab/run.sh [REV]: builds and runs attn_lab.cu on a CUDA machine, the working copy of
# kernels/attention_tc.cuh (and attention_tiles.cuh) against the one at git revision REV (default
# HEAD). On the GPU machine, where the checkout has no .git, pass the reference files instead:
# REF=path/to/attention_tc.cuh, and REF_TILES=path/to/attention_tiles.cuh for revisions that have it.
# Extra nvcc flags (-D...) through NVCC_FLAGS.
set -e
cd "$(dirname "$0")/../.."
mkdir -p build-attn-lab
rename() { sed -e 's/namespace trainlab::kern::attn\b/namespace trainlab::kern::attn_old/' \
               -e 's/#include "attention_tiles.cuh"/#include "attn_old_tiles.cuh"/'; }
if [ -n "$REF" ]; then
  rename < "$REF" > build-attn-lab/attn_old.cuh
  [ -n "$REF_TILES" ] && rename < "$REF_TILES" > build-attn-lab/attn_old_tiles.cuh
else
  git show "${1:-HEAD}:kernels/attention_tc.cuh" | rename > build-attn-lab/attn_old.cuh
  if git cat-file -e "${1:-HEAD}:kernels/attention_tiles.cuh" 2>/dev/null; then
    git show "${1:-HEAD}:kernels/attention_tiles.cuh" | rename > build-attn-lab/attn_old_tiles.cuh
  fi
fi
PATH=/usr/local/cuda/bin:$PATH nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 \
  -Ikernels -Icore -Ibuild-attn-lab $NVCC_FLAGS tools/attn_lab/attn_lab.cu -o build-attn-lab/attn_lab
build-attn-lab/attn_lab
