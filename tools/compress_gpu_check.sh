#!/bin/bash
# tools/compress_gpu_check.sh: compression on the CUDA backend (issue 5), run from the repo root by
# the device tool with $OUT set. Builds the CLI with CUDA, then: pruning through CUDA AdamW with
# CUDA graphs (masked weights must stay exactly 0), the ops the CUDA backend does not have yet
# (QAT's fake_quantize, expected to fail with a clear message), and the sweep on --device cuda.
OUT=${OUT:-/tmp/compress_gpu_out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export TRAINLAB_DATA_DIR=$PWD/resources/data
(cmake -S . -B build-gpu -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && ninja -C build-gpu -j16 trainlab-cli trainlab_cuda) > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
C=build-gpu/core/trainlab-cli
for p in fp32 bf16; do
  timeout 120 $C train --device cuda --precision $p --quiet --out /tmp/r-$p --set prune.method=gradual --set prune.sparsity=0.9 \
    --set prune.interval=20 --set prune.n_steps=10 --set prune.start_step=50 --set optim.weight_decay=0.1 > "$OUT/train-$p.log" 2>&1
  echo "$p exit=$? $(tail -2 $OUT/train-$p.log | head -1)"
  python3 -c "
import json,struct
c=json.load(open('/tmp/r-$p/compression.json'));print('$p sparsity', [(l['name'], round(l['sparsity'],4)) for l in c['sparsity']['layers']])
"
done
timeout 60 $C train --device cuda --quiet --steps 20 --out /tmp/r-qat --set quant.mode=qat 2>&1 | tail -1
timeout 300 $C sweep --device cuda --out "$OUT/sweep" 2>&1 | tail -70
rm -rf "$OUT/sweep/runs"
