#!/bin/bash
# tools/offload_gpu_check.sh: optimizer offload (optim.offload cpu, issue 19) on the GPU machine,
# run from the repo root with $OUT set. Builds trainlab-cli, the CUDA module and test_cuda_offload
# only; runs the parity/ledger test (cuda+offload against cuda, fp32 and bf16), then the char-gpt2
# step benchmark in bf16 with and without offload: step time, the ledger's device bytes of masters
# and optimizer state, the host bytes, and the device's peak. Logs under $OUT/offload/.
set -u
OUT=${OUT:-/tmp/offload_gpu_out}
LOG=$OUT/offload
mkdir -p "$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources
B=/tmp/b-offload
start=$(date +%s)
(cmake -S "${SRC:-.}" -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && ninja -C $B -j16 trainlab-cli trainlab_cuda test_cuda_offload) > "$LOG/build.log" 2>&1 \
  || { tail -40 "$LOG/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
T=$(find $B -name test_cuda_offload -type f -executable | head -1)
C=$(find $B -name trainlab-cli -type f -executable | head -1)
timeout 90 "$T" > "$LOG/test_cuda_offload.log" 2>&1
echo "test_cuda_offload exit=$?"
cat "$LOG/test_cuda_offload.log"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$LOG/nvidia-smi.txt" 2>&1
timeout 100 "$C" bench --case char-gpt2 --device cuda --modes bf16,bf16-offload,fp32,fp32-offload --steps 10 --warmup 3 \
  > "$LOG/bench_char_gpt2.jsonl" 2> "$LOG/bench_char_gpt2.err"
echo "bench exit=$?"
tail -5 "$LOG/bench_char_gpt2.err"
python3 - "$LOG/bench_char_gpt2.jsonl" <<'PY' | tee "$LOG/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
by = {r.get("mode"): r for r in rows}
keys = ["ms_per_step", "tokens_per_s", "device_optimizer_and_master_mib", "host_mib", "device_peak_mib",
        "peak_mib", "device_used_mib", "final_loss", "error"]
for r in rows:
    print(r.get("mode"), {k: r[k] for k in keys if k in r})
for p in ("bf16", "fp32"):
  a, b = by.get(p), by.get(p + "-offload")
  if a and b and "error" not in a and "error" not in b:
    print(p + ":")
    saved = 1 - b["device_optimizer_and_master_mib"] / a["device_optimizer_and_master_mib"]
    print("  masters+state on the device: %.1f MiB -> %.1f MiB (%.1f %% less; acceptance >= 60 %%)" %
          (a["device_optimizer_and_master_mib"], b["device_optimizer_and_master_mib"], 100 * saved))
    print("  device peak: %.1f MiB -> %.1f MiB" % (a["device_peak_mib"], b["device_peak_mib"]))
    print("  step: %.2f ms -> %.2f ms (x%.2f)" % (a["ms_per_step"], b["ms_per_step"], b["ms_per_step"] / a["ms_per_step"]))
PY
echo "total: $(( $(date +%s) - start )) s"
