#!/bin/bash
# tools/roofline_gpu_check.sh: the measured roofline on the GPU machine (issue 19), run from the
# repo root with $OUT set; logs under $OUT/roofline/. Builds trainlab-cli and the CUDA module, then:
#   1. trainlab-cli calibrate on cuda (measured: the table of peak TFLOP/s per precision and the
#      bandwidth, the cache file) and again (read from the cache), and --force (measured again);
#   2. a short char-small bf16 run and a digits fp32 run with device.kernel_timing on cuda: the
#      roofline table `train` prints at the end, MFU against the measured peak and the datasheet;
#   3. trainlab-cli roofline on the char run's record (must print the same table).
# Whole script well under 4 minutes (the build is most of it).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/roofline_gpu_out}
L=$OUT/roofline
mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export TRAINLAB_DATA_DIR=$PWD/resources/data
export XDG_CACHE_HOME=$L/xdg  # the calibration cache the runs read: calibrate writes it first
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$L/device.txt" 2>&1
B=/tmp/b-roofline
(cmake -S ${SRC:-.} -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && ninja -C $B -j16 trainlab-cli trainlab_cuda) > "$L/build.log" 2>&1 || { tail -40 "$L/build.log"; exit 1; }
C=$B/core/trainlab-cli
echo "== calibrate (measured)"; timeout 60 $C calibrate --device cuda 2>&1 | tee "$L/calibrate-1.txt"
echo "== calibrate (cached)"; timeout 60 $C calibrate --device cuda 2>&1 | tee "$L/calibrate-2.txt"
echo "== calibrate --force"; timeout 60 $C calibrate --device cuda --force 2>&1 | tee "$L/calibrate-3.txt"
cp -r "$XDG_CACHE_HOME/trainlab" "$L/cache" 2>/dev/null
echo "== char-small bf16, kernel timing"
timeout 90 $C train --config resources/presets/char-small-shakespeare.json --device cuda --steps 40 --quiet \
  --out /tmp/r-roof-char --overwrite --set device.kernel_timing=true --set train.eval_every=0 2>&1 | tee "$L/train-char.txt"
echo "== digits fp32, kernel timing"
timeout 60 $C train --device cuda --precision fp32 --steps 200 --quiet --out /tmp/r-roof-digits --overwrite \
  --set device.kernel_timing=true 2>&1 | tee "$L/train-digits.txt"
echo "== digits fp8 (does cuBLASLt take the fp8 products at training shapes?)"
timeout 60 $C train --device cuda --precision fp8 --steps 50 --quiet --out /tmp/r-roof-fp8 --overwrite \
  --set device.kernel_timing=true 2>&1 | tee "$L/train-fp8.txt"
echo "== roofline of the char run's record"; timeout 30 $C roofline /tmp/r-roof-char 2>&1 | tee "$L/roofline-char.txt"
for r in char digits; do
  python3 - "$r" <<'PY' 2>&1 | tee -a "$L/mfu.txt"
import json, sys
r = sys.argv[1]
rows = [json.loads(l) for l in open(f"/tmp/r-roof-{r}/metrics.jsonl")]
last = rows[-1]
print(r, "mfu (measured peak)", last.get("mfu"), "mfu (datasheet)", last.get("mfu_datasheet"),
      "roofline on", sum(1 for x in rows if "roofline" in x), "of", len(rows), "lines")
PY
done
head -c 3000 /tmp/r-roof-char/metrics.jsonl > "$L/char-metrics-head.jsonl"
