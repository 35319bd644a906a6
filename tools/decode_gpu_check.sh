#!/bin/bash
# tools/decode_gpu_check.sh: GPU decode at the memory-bandwidth ceiling (issue 20), run from the
# repo root on the GPU machine with $OUT set. Every stage is independent (its own timeout and
# log under $OUT/decode/), so one failure does not hide the others:
#   build   trainlab-cli, trainlab_cuda, test_cuda_decode (sm_90, no app)
#   test    test_cuda_decode (parity against the CPU decoder, batched and split attention)
#   xl      trainlab-cli bench --case decode --preset xl: bf16/int8/int4, one kernel and a kernel
#           per operation as a graph, batch 1; per-kernel timings (one kernel: its phases by block
#           0's clock; graph: each kernel alone, graph-replayed) and each GEMV's GB/s; the copy
#           bandwidth in the same run
#   gpt2    the same at gpt2
#   peer    .peer/peer_torch_decode.py (carried by the lead from shared/bench) at gpt2 and xl
#   sparse  whether cuSPARSELt is present (for the 2:4 comparison)
# After each bench a summary line per (preset, format) on stdout. The whole run fits about 170 s
# (timeouts per stage; most important first).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/decode_gpu_out}
D="$OUT/decode"
mkdir -p "$D"
B=/tmp/b-decode
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$D/stages.txt"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv > "$D/device.txt" 2>&1
git log --oneline -3 > "$D/commit.txt" 2>&1

# One line per (preset, format) of a bench JSON file, with the per-kernel times and GB/s.
summary() {
python3 - "$1" <<'EOF'
import json, sys
f = sys.argv[1]
for line in open(f):
    line = line.strip()
    if not line.startswith("{"): continue
    r = json.loads(line)
    if r.get("case") == "bandwidth":
        print(f"{f.split('/')[-1]}: copy {r['copy_bytes_per_s']/1e9:.0f} GB/s"); continue
    if "error" in r:
        print(f"  {r.get('model')} {r.get('format')}: ERROR {r['error']}"); continue
    k = r.get("kernel_us", {})
    ks = " ".join(f"{n}={v:.0f}" for n, v in k.items())
    print(f"  {r['model'][:5]} {r['format']:<10} graph={int(r['cuda_graph'])} one={int(r['one_kernel'])} "
          f"tok/s={r['tokens_per_s']:9.0f} weightGB/s={r['weight_bytes_per_s']/1e9:6.0f} "
          f"ceil%={100*r['weight_bytes_per_s']/r['copy_bytes_per_s']:5.1f} dev_us={r['device_us_per_token']:.0f} "
          f"prep_s={r.get('prepare_s', 0):.1f} | us: {ks}")
    g = r.get("kernel_gb_per_s", {})
    if g: print("      GB/s: " + " ".join(f"{n}={v:.0f}" for n, v in g.items()))
EOF
}

stamp "build start"
(cmake -S ${SRC:-.} -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && ninja -C $B -j16 trainlab-cli trainlab_cuda test_cuda_decode) > "$D/build.log" 2>&1
stamp "build rc=$?"
grep -E "error|FAILED" -A3 "$D/build.log" | head -40
CLI=$(find $B -name trainlab-cli -type f -perm -u+x | head -1)
TEST=$(find $B -name test_cuda_decode -type f -perm -u+x | head -1)

if [ -n "$TEST" ]; then
  timeout 30 "$TEST" > "$D/test_cuda_decode.log" 2>&1
  stamp "test_cuda_decode rc=$?"
  grep -E "FAIL|fail|passed|[0-9]+ of 100|speculative" "$D/test_cuda_decode.log" | head -30
else
  stamp "test_cuda_decode not built"
fi

bench() {  # preset modes label timeout
  [ -z "$CLI" ] && { stamp "$3: no trainlab-cli"; return; }
  timeout "$4" "$CLI" bench --case decode --device cuda --preset "$1" --modes "$2" --steps 128 \
    > "$D/bench-$3.jsonl" 2> "$D/bench-$3.err"
  stamp "bench $3 rc=$?"
  tail -3 "$D/bench-$3.err"
  summary "$D/bench-$3.jsonl"
}
# xl: one command (the random model is made once; each format takes seconds to quantize and
# upload), rows printed as they come, the most important first.
bench xl bf16-graph,int4-graph,bf16,int4,int8-graph,int8 xl 100
bench gpt2 bf16,int8,int4,bf16-graph,int8-graph,int4-graph gpt2 20

if [ -f .peer/peer_torch_decode.py ]; then
  for p in xl; do  # (gpt2's peer: round 1)
    timeout 35 python3 .peer/peer_torch_decode.py --preset $p --batches 1,4,16 --tokens 128 > "$D/peer-$p.jsonl" 2> "$D/peer-$p.err"
    stamp "peer $p rc=$?"
    cat "$D/peer-$p.jsonl"
  done
else
  stamp "peer: .peer/peer_torch_decode.py not carried"
fi

{ ls /usr/lib/x86_64-linux-gnu | grep -i cusparselt; find / -name "*cusparseLt*" 2>/dev/null | head; } > "$D/cusparselt.txt" 2>&1
stamp "cusparselt: $(wc -l < "$D/cusparselt.txt") hits"

stamp "done"
