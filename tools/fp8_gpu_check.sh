#!/bin/bash
# tools/fp8_gpu_check.sh: exact fp8 on the CPU against the GPU (issue 19), run from the repo root on
# the GPU machine with $OUT set (logs under $OUT/fp8/). Builds only what it needs, then:
#   1. test_cuda_fp8: the CPU's fp8 casts, delayed-scaling history and fp8 linear layers against
#      kernels/fp8.cu and the CUDA backend (bit for bit where stated);
#   2. test_cuda_parity: every op, and 10 training steps with fp8 on both backends;
#   3. the CPU emulation speed on this machine's CPU: trainlab-cli bench (digits step, digits
#      30 epochs, char-tiny step) in fp32, bf16, fp16 and fp8, and the PyTorch CPU peer
#      (.peer/peer_torch_cpu.py, carried by the lead from ../shared/bench) at the same thread
#      counts (16: the machine, 2: the development machine's cores).
# Whole script: about 3 minutes after the build (each step has its own timeout).
set -u
OUT=${OUT:-/tmp/fp8_gpu_out}
L="$OUT/fp8"
mkdir -p "$L"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources/data
B=/tmp/b-fp8
start=$(date +%s)
(cmake -S "${SRC:-.}" -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && ninja -C $B -j16 test_cuda_fp8 test_cuda_parity trainlab-cli trainlab_cuda) > "$L/build.log" 2>&1 \
  || { tail -40 "$L/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" > "$L/cpu.txt" 2>&1

timeout 120 $B/tests/test_cuda_fp8 > "$L/test_cuda_fp8.log" 2>&1
echo "test_cuda_fp8 exit=$?"
grep -E "FAIL|SKIP|passed|cuda 0x" "$L/test_cuda_fp8.log" | head -40
timeout 150 $B/tests/test_cuda_parity > "$L/test_cuda_parity.log" 2>&1
echo "test_cuda_parity exit=$?"
grep -E "FAIL|training steps|passed" "$L/test_cuda_parity.log" | head -30

C=$B/core/trainlab-cli
for th in 16 2; do
  export TRAINLAB_THREADS=$th
  timeout 60 $C bench --case digits,digits-train --device cpu --modes fp32,bf16,fp16,fp8 > "$L/cpu-bench-digits-t$th.jsonl" 2>&1
  echo "cpu bench digits threads=$th exit=$?"
  timeout 60 $C bench --case char-tiny --device cpu --modes fp32,bf16,fp16,fp8 --steps 20 > "$L/cpu-bench-char-t$th.jsonl" 2>&1
  echo "cpu bench char-tiny threads=$th exit=$?"
  if [ -f .peer/peer_torch_cpu.py ]; then
    timeout 90 python3 .peer/peer_torch_cpu.py --data resources/data --threads $th > "$L/peer-cpu-t$th.jsonl" 2>&1
    echo "peer_torch_cpu threads=$th exit=$?"
  else
    echo "no .peer/peer_torch_cpu.py: the PyTorch CPU peer was not run"
  fi
done
unset TRAINLAB_THREADS
python3 - "$L" <<'EOF' | tee "$L/summary.txt"
import json, sys, glob, os
d = sys.argv[1]
for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
    for line in open(f):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        keys = ("case", "mode", "threads", "ms_per_step", "train_s", "wall_s", "tokens_per_s", "test_accuracy", "final_loss", "error")
        print(os.path.basename(f), {k: (round(v, 4) if isinstance(v, float) else v) for k, v in j.items() if k in keys})
EOF
echo "total: $(( $(date +%s) - start )) s"
