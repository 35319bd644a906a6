#!/bin/bash
# tools/emul3_gpu_check.sh: the CPU's emulated number formats against fp32 (issue 19) on the GPU
# machine's CPU, 2 threads with the other cores idle; run from the repo root with $OUT set (logs
# under $OUT/emul3/). Builds trainlab-cli of ${SRC:-.}, and of $BEFORE_SRC too when set (a
# checkout of the tree to compare with, e.g. main): only the CLI, not trainlab_cuda, which it loads
# for CUDA devices alone (the two builds stay short). Then it runs, 3 rounds,
# the builds taking turns, at TRAINLAB_THREADS=2 pinned to cores 0-1:
#   trainlab-cli bench --case digits --device cpu --modes fp32,bf16,fp16,fp8
#   trainlab-cli bench --case char-tiny --device cpu --modes fp32,bf16,fp16,fp8 --steps 20
# and prints the median ms a step of each mode and its ratio to fp32 (target: within 1.5x).
# Whole script: about 1 minute after the build (each run has its own timeout).
set -u
OUT=${OUT:-/tmp/emul3_gpu_out}
L="$OUT/emul3"
mkdir -p "$L"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources/data
start=$(date +%s)
build() {  # build NAME SRC
  local b=/tmp/b-emul3-$1
  (cmake -S "$2" -B $b -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && ninja -C $b -j16 trainlab-cli) > "$L/build-$1.log" 2>&1 || { tail -40 "$L/build-$1.log"; exit 1; }
}
build after "${SRC:-.}"
builds=(after)
if [ -n "${BEFORE_SRC:-}" ]; then
  build before "$BEFORE_SRC"
  builds=(before after)
fi
echo "build: $(( $(date +%s) - start )) s"
lscpu | grep -E "Model name|^CPU\(s\)" > "$L/cpu.txt" 2>&1
pin=()
command -v taskset > /dev/null && pin=(taskset -c 0,1)
export TRAINLAB_THREADS=2
for round in 1 2 3; do
  for b in "${builds[@]}"; do
    C=/tmp/b-emul3-$b/core/trainlab-cli
    uptime >> "$L/uptime.txt"
    timeout 60 "${pin[@]}" $C bench --case digits --device cpu --modes fp32,bf16,fp16,fp8 >> "$L/$b-digits.jsonl" 2>&1
    echo "$b digits round $round exit=$?"
    timeout 90 "${pin[@]}" $C bench --case char-tiny --device cpu --modes fp32,bf16,fp16,fp8 --steps 20 >> "$L/$b-char.jsonl" 2>&1
    echo "$b char-tiny round $round exit=$?"
  done
done
unset TRAINLAB_THREADS
python3 - "$L" <<'EOF' | tee "$L/summary.txt"
import json, sys, os, statistics, collections
d = sys.argv[1]
for case in ("digits", "char"):
    for b in ("before", "after"):
        f = os.path.join(d, f"{b}-{case}.jsonl")
        if not os.path.exists(f):
            continue
        runs = collections.defaultdict(list)
        for line in open(f):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if "ms_per_step" in j:
                runs[j["mode"]].append(j["ms_per_step"])
        med = {m: statistics.median(v) for m, v in runs.items()}
        fp32 = med.get("fp32")
        print(case, b, " ".join(f"{m}={med[m]:.3f}" + (f" ({med[m] / fp32:.2f}x)" if fp32 and m != "fp32" else "")
                                + " [" + "/".join(f"{x:.3f}" for x in runs[m]) + "]" for m in med))
EOF
echo "total: $(( $(date +%s) - start )) s"
