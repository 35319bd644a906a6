#!/bin/bash
# tools/issue_gpu_check.sh: the GPU points of the pipeline (issue 39) and fine-tuning and
# quantization (issue 40) issues on the GPU machine's one GPU, run from the repo root with $OUT set.
# With BIN=DIR (tools/carry_bin.sh build test_cuda_pipeline) it runs carried binaries, else it
# builds trainlab-cli, trainlab_cuda and test_cuda_pipeline in /tmp/b-iss first. Then:
#   1. test_cuda_pipeline: pp 2 (gpipe, 1f1b; fp32 and bf16) with two ranks on the one GPU through
#      MPI staging against one rank accumulating the same 4 micro-batches;
#   2. GPTQ and AWQ of a gpt2-preset model (trained 2 steps here) on the GPU, timed (issue 40:
#      GPTQ of gpt2 in under 60 s), beside round-to-nearest;
#   3. full fine-tuning on the GPU from a run's weights (train --init-from) and the MFU it reports.
# Logs under $OUT/iss/.
set -u
OUT=${OUT:-/tmp/iss_gpu_out}
LOG=$OUT/iss
mkdir -p "$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources/data
if [ -n "${BIN:-}" ]; then
  BIN=$(cd "$BIN" && pwd)
  export LD_LIBRARY_PATH=$BIN:$LD_LIBRARY_PATH TRAINLAB_CUDA_MODULE=$BIN/libtrainlab_cuda.so TRAINLAB_CLI=$BIN/trainlab-cli
  C=$BIN/trainlab-cli
  T=$BIN
else
  B=/tmp/b-iss
  start=$(date +%s)
  (cmake -S . -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && ninja -C $B -j16 trainlab-cli trainlab_cuda test_cuda_pipeline) > "$LOG/build.log" 2>&1 \
    || { tail -40 "$LOG/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
  C=$B/core/trainlab-cli
  T=$B/tests
fi
timeout 120 "$T/test_cuda_pipeline" > "$LOG/test_cuda_pipeline.log" 2>&1
echo "test_cuda_pipeline exit=$?"
grep -E "FAIL|largest|passed|SKIP" "$LOG/test_cuda_pipeline.log" | tail -12

R=/tmp/iss-runs
rm -rf $R && mkdir -p $R
# 2. A gpt2-preset model (weights of 2 steps: the time of GPTQ does not depend on them), then the
#    three methods at 4 bits, groups of 32, on the GPU.
timeout 120 "$C" train --device cuda --quiet --model char-gpt --set model.preset=gpt2 --precision bf16 --steps 2 \
  --batch 2 --set train.eval_windows=4 --out $R/gpt2 > "$LOG/gpt2_train.log" 2>&1
echo "gpt2 train exit=$?"
for m in gptq rtn awq; do
  s=$(date +%s%N)
  timeout "${QUANT_TIMEOUT:-150}" "$C" quantize --device cuda --weights $R/gpt2/model.safetensors --bits 4 --granularity group --group 32 \
    --method $m --calibration 16 --val-windows 16 --out $R/gpt2-$m.safetensors > "$LOG/quant_$m.json" 2> "$LOG/quant_$m.err"
  rc=$?
  echo "quantize gpt2 $m exit=$rc wall $(( ($(date +%s%N) - s) / 1000000 )) ms"
  [ $rc -eq 0 ] || tail -3 "$LOG/quant_$m.err"
done
# 3. Full fine-tuning on the GPU from the tiny preset's weights, on the second text.
timeout 60 "$C" train --device cuda --quiet --model char-gpt --steps 60 --batch 8 --out $R/base > "$LOG/base.log" 2>&1
echo "base train exit=$?"
timeout 60 "$C" train --device cuda --quiet --model char-gpt --steps 60 --batch 8 --init-from $R/base \
  --set data.name=kjv --out $R/ft > "$LOG/ft.log" 2>&1
echo "full fine-tune exit=$?"; tail -2 "$LOG/ft.log"
python3 - $R <<'PY' 2>&1 | tee "$LOG/mfu.txt"
import json, sys
for run in ("base", "ft", "gpt2"):
    try:
        s = json.load(open(f"{sys.argv[1]}/{run}/summary.json"))
        print(run, {k: s[k] for k in s if "mfu" in k or k in ("test_loss", "val_loss")})
    except Exception as e:
        print(run, "no summary:", e)
PY
