#!/bin/bash
# tools/gpu_check.sh: the CUDA backend's check on the GPU machine (issue 3). Run from the repo root
# by the device tool, with $OUT set; writes its logs under $OUT.
#   1. builds the lab there (no Qt: -DTRAINLAB_BUILD_APP=OFF, sm_90) when the build's dependencies
#      are present; otherwise uses binaries built on the development machine and carried in
#      .gpubin/ (with the libraries they need);
#   2. runs the GPU parity tests;
#   3. trains the digits MLP on cuda in each precision (run records under $OUT/runs);
#   4. runs `trainlab-cli bench --case digits --device cuda --modes fp32,bf16` and the PyTorch peer
#      (.peer/peer_torch.py, carried) in the same command, for BENCHMARKS.md;
#   5. (stage char) the character-GPT benchmark, char-small and char-gpt2, lab and peer;
#   6. (stage small) trains the `small` character GPT in bf16 with dropout 0.2 (the preset
#      resources/presets/char-small-shakespeare.json), samples text from it, quantizes it to 4 bits
#      per group of 32 and benchmarks decoding bf16 / int8 / int4 (stage decode runs that part alone);
#   7. (stage sweep) the digits compression sweep on --device cuda, from the CPU table's baseline
#      weights (docs/compression/digits-mlp-baseline.safetensors) so the two tables differ by the device only.
set -o pipefail
# NVLink multicast stays off in every process (the device tool's KINDS.md says why).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export TRAINLAB_DATA_DIR=$PWD/resources/data
STAGES=${STAGES:-build,test,train,bench}
# SRC: the source tree to build (default the checkout; a committed snapshot unpacked into an
# ignored folder keeps half-edited files of the working tree out of the build).
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/device.txt" 2>&1
BIN=""
if [[ $STAGES == *build* ]] && [ -f /usr/include/cblas.h -o -d /usr/include/openblas -o -d /usr/include/x86_64-linux-gnu/openblas-pthread ] \
   && [ -d /usr/include/nlohmann ] && [ -d /usr/include/CLI ]; then
  (cmake -S ${SRC:-.} -B build-gpu -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && ninja -C build-gpu -j16) > "$OUT/build.log" 2>&1 && BIN=build-gpu
  [ -z "$BIN" ] && grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40
fi
if [ -z "$BIN" ]; then
  echo "building there skipped or failed: using the carried .gpubin" | tee -a "$OUT/build.log"
  mkdir -p /tmp/tlbin && cp -a .gpubin/. /tmp/tlbin/
  export LD_LIBRARY_PATH=/tmp/tlbin:$LD_LIBRARY_PATH
  CLI=/tmp/tlbin/trainlab-cli; TESTDIR=/tmp/tlbin
else
  CLI=$BIN/core/trainlab-cli; TESTDIR=$BIN/tests
fi
echo "binaries: $CLI" | tee -a "$OUT/build.log"
if [[ $STAGES == *test* ]]; then
  for t in $TESTDIR/test_cuda_*; do
    n=$(basename $t)
    timeout ${TEST_TIMEOUT:-240} $t > "$OUT/$n.log" 2>&1; echo "$n exit $?" | tee -a "$OUT/$n.log"
    grep -E "FAIL|passed|SKIP" "$OUT/$n.log" | tail -25
  done
fi
if [[ $STAGES == *train* ]]; then
  for p in ${PRECISIONS:-fp32 tf32 bf16 fp16 fp8}; do
    timeout 120 $CLI train --device cuda --precision $p --out /tmp/runs/$p --quiet > /tmp/train_$p.log 2>&1
    echo "$p exit=$? $(python3 -c "import json;s=json.load(open('/tmp/runs/$p/summary.json'));print('test_accuracy',s.get('test_accuracy'),'status',s.get('status'),'steps',s.get('steps'),'samples_per_s',round(s.get('samples_per_s',0)))" 2>&1)" | tee -a "$OUT/train.log"
    grep -v "cublasLt\]\[" /tmp/train_$p.log | tail -4 >> "$OUT/train.log"
  done
  # The last line with the slow fields (memory, precision...) carried forward from where they were written.
  python3 -c "import json;L=[json.loads(l) for l in open('/tmp/runs/bf16/metrics.jsonl') if l.strip()];c={};[c.update({k:v for k,v in l.items() if k in ('precision','mem','mem_peak','mem_predicted','device_used_bytes','device_total_bytes','runtime_context_bytes','loss_scale','skipped_steps','lr')}) for l in L];print(json.dumps({**c,**L[-1]}))" > "$OUT/last_metrics_bf16.json" 2>/dev/null
fi
if [[ $STAGES == *bench* ]]; then
  $CLI bench --case digits --device cuda --modes ${MODES:-fp32,bf16,fp32-nograph} 2>&1 | tee "$OUT/bench_lab.jsonl"
  PYTHONUNBUFFERED=1 timeout 240 python3 .peer/peer_torch.py --data resources/data --cases digits 2>&1 | tee "$OUT/bench_peer.txt" | tail -15
fi
if [[ $STAGES == *char* ]]; then
  CASES=${CHAR_CASES:-char-small,char-gpt2}
  for c in ${CASES//,/ }; do
    timeout 300 $CLI bench --case $c --device cuda --modes ${CHAR_MODES:-bf16,bf16-ckpt,fp32,tf32} 2>&1 | tee -a "$OUT/bench_char_lab.jsonl"
  done
  PYTHONUNBUFFERED=1 timeout 400 python3 .peer/peer_torch.py --data resources/data --cases $CASES 2>&1 | tee "$OUT/bench_char_peer.txt" | tail -20
fi
if [[ $STAGES == *small* ]]; then
  timeout ${SMALL_TIMEOUT:-420} $CLI train --config resources/presets/char-small-shakespeare.json --device cuda \
    --out /tmp/runs/small ${SMALL_ARGS:-} > "$OUT/small_train.log" 2>&1
  echo "small train exit $?" | tee -a "$OUT/small_train.log"; tail -3 "$OUT/small_train.log"
  cp /tmp/runs/small/summary.json "$OUT/small_summary.json" 2>/dev/null
  grep -h '"val_loss"' /tmp/runs/small/metrics.jsonl | python3 -c "import sys,json;[print(json.loads(l).get('step'),json.loads(l).get('val_loss')) for l in sys.stdin]" | tail -25 | tee "$OUT/small_val.txt"
  $CLI generate --weights /tmp/runs/small/model.safetensors --prompt "ROMEO:" --tokens 600 --temperature 0.8 --top-k 40 \
    > "$OUT/small_sample.txt" 2>&1; head -c 1500 "$OUT/small_sample.txt"
fi
if [[ $STAGES == *small* || $STAGES == *decode* ]]; then
  W=${DECODE_WEIGHTS:-/tmp/runs/small/model.safetensors}
  $CLI quantize --weights $W --bits 4 --granularity group --group 32 --out /tmp/small_q4.safetensors 2>&1 | tail -3 | tee "$OUT/quantize.log"
  ls -l $W /tmp/small_q4.safetensors | tee -a "$OUT/quantize.log"
  timeout 120 $CLI generate --device cuda --weights /tmp/small_q4.safetensors --prompt "ROMEO:" --tokens 400 --temperature 0 \
    > "$OUT/small_q4_sample.txt" 2>&1; head -c 800 "$OUT/small_q4_sample.txt"
  timeout 240 $CLI bench --case decode --device cuda --weights $W 2>&1 | tee "$OUT/bench_decode.jsonl"
fi
if [[ $STAGES == *sweep* ]]; then
  # The compression sweep on the GPU (docs/compression/ holds the CPU table to compare with).
  timeout ${SWEEP_TIMEOUT:-420} $CLI sweep --model digits-mlp --device cuda --baseline ${SRC:-.}/docs/compression/digits-mlp-baseline.safetensors --steps 660 --out /tmp/sweep > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?" | tee -a "$OUT/sweep.log"
  cp /tmp/sweep/sweep.csv "$OUT/sweep_cuda.csv" 2>/dev/null; cp /tmp/sweep/sweep.json "$OUT/sweep_cuda.json" 2>/dev/null
fi
if [[ $STAGES == *profile* ]]; then
  # Per-kernel times from the lab's own CUDA-event timing (device.kernel_timing), last step's line.
  $CLI train --device cuda --precision bf16 --steps 60 --set device.kernel_timing=true --out /tmp/runs/kt --quiet > /dev/null 2>&1
  python3 -c "import json;m=json.loads(open('/tmp/runs/kt/metrics.jsonl').readlines()[-1]);print(json.dumps(m.get('kernels')))" | tee "$OUT/kernel_times.json"
  [ -n "$NCU" ] && timeout 120 ncu --clock-control none --launch-skip 300 --launch-count 14 --metrics gpu__time_duration.sum \
    $CLI bench --case digits --device cuda --modes bf16-nograph --steps 40 --warmup 20 > "$OUT/ncu.txt" 2>&1
  [ -n "$NCU" ] && grep -E "^\s+[a-z_].*\(|gpu__time_duration" "$OUT/ncu.txt" | paste - - | awk '{print $1, $(NF)}' | tail -16
fi
