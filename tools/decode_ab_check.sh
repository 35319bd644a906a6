#!/bin/bash
# tools/decode_ab_check.sh PATCH: on the GPU machine, the decoder's CUDA module of the working tree
# (A) against the same module with PATCH applied (B: a kernel change to measure before it lands,
# e.g. tools/decode_what_if/ln-one-reduction.patch), in one command so that both are timed on one
# card at one time. Run from the repo root with $OUT set; every stage has its own timeout, cut so
# that the whole run ends by $END seconds (default 540):
#   build    trainlab-cli, trainlab_cuda, test_cuda_decode (sm_90, no app), then the module again
#            with PATCH applied (only the translation units it touches rebuild), then the tree put
#            back; meanwhile tools/sync_floor/sync_floor.cu on its own (nvcc)
#   order    tools/pdl_order_check.sh on both modules
#   test     test_cuda_decode with A and with B (TRAINLAB_CUDA_MODULE picks the module)
#   sync     sync_floor: the cost of one dependent hand-off (kernels, grid barriers, clusters)
#   bench    trainlab-cli bench --case decode, batch 1, A B A B at gpt2 (bf16, int8, int4, fp32
#            graphs), A B at xl (bf16, int8); B at gpt2 batch 4 and 16 and xl int4
#   peer     .peer/peer_torch_decode.py (carried from shared/bench) at gpt2 (1, 4, 16) and xl (1)
# Results: $OUT/ab.tgz (every log) and $OUT/summary.txt (the stages, one line a JSON row).
# Written without device time left to run it (2026-12-07): its first run is also its test.
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
PATCH=${1:?usage: tools/decode_ab_check.sh PATCH (the change that module B adds to the tree)}
[ -f "$PATCH" ] || { echo "decode_ab_check: no patch file $PATCH" >&2; exit 2; }
# git apply needs no repository; patch(1) where git is missing.
apply() { if command -v git > /dev/null; then git apply "$@" "$PATCH"; else patch -p1 --silent "${@/--check/--dry-run}" < "$PATCH"; fi; }
apply --check || { echo "decode_ab_check: $PATCH does not apply to this tree" >&2; exit 2; }
OUT=${OUT:-/tmp/decode_ab_out}
D="$OUT/ab"
mkdir -p "$D"
S="$OUT/summary.txt"
B=/tmp/b-ab
T0=$(date +%s)
END=${END:-540}
# shellcheck source=tools/gpu_stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_stages.sh"  # stamp, budget
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv > "$D/device.txt" 2>&1
git log --oneline -3 > "$D/commit.txt" 2>&1 && cat "$D/commit.txt" >> "$S"

# One line a JSON row (tools/decode_summary.py).
summary() { python3 "$(dirname "${BASH_SOURCE[0]}")/decode_summary.py" "$@"; }

stamp "build start"
(timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 tools/sync_floor/sync_floor.cu -o /tmp/sync_floor > "$D/sync-build.log" 2>&1
 echo "rc=$?" >> "$D/sync-build.log") &
SYNC_BUILD=$!
(cmake -S . -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && timeout "$(budget 200)" ninja -C $B -j16 trainlab-cli trainlab_cuda test_cuda_decode) > "$D/build.log" 2>&1
stamp "build A rc=$?"
grep -E "error|FAILED" -A3 "$D/build.log" | head -20 | tee -a "$S"
CLI=$(find $B -name trainlab-cli -type f -perm -u+x | head -1)
TEST=$(find $B -name test_cuda_decode -type f -perm -u+x | head -1)
MODULE=$(find $B -name libtrainlab_cuda.so -type f | head -1)
[ -n "$MODULE" ] && cp "$MODULE" /tmp/module-A.so
# Module B: the patch applied, the module rebuilt, the patch taken out again.
if apply; then
  timeout "$(budget 120)" ninja -C $B -j16 trainlab_cuda > "$D/build-B.log" 2>&1
  RC=$?
  apply -R
else
  RC=2
fi
stamp "build B rc=$RC"
[ -n "$MODULE" ] && [ "$RC" -eq 0 ] && cp "$MODULE" /tmp/module-B.so

for m in A B; do
  [ -f /tmp/module-$m.so ] || continue
  bash tools/pdl_order_check.sh /tmp/module-$m.so > "$D/pdl_order-$m.log" 2>&1
  stamp "pdl_order_check $m rc=$? ($(grep -c '^ok' "$D/pdl_order-$m.log") ok)"
  grep -v '^ok' "$D/pdl_order-$m.log" | head -5 | tee -a "$S"
done

for m in A B; do
  [ -n "$TEST" ] && [ -f /tmp/module-$m.so ] || continue
  TRAINLAB_CUDA_MODULE=/tmp/module-$m.so timeout "$(budget 60)" "$TEST" > "$D/test_cuda_decode-$m.log" 2>&1
  stamp "test_cuda_decode ($m) rc=$?"
  grep -E "FAIL|passed" "$D/test_cuda_decode-$m.log" | head -10 | tee -a "$S"
done

wait $SYNC_BUILD
stamp "sync_floor build: $(tail -1 "$D/sync-build.log")"
if [ -x /tmp/sync_floor ]; then
  timeout "$(budget 60)" /tmp/sync_floor > "$D/sync_floor.jsonl" 2>&1
  stamp "sync_floor rc=$?"
  cat "$D/sync_floor.jsonl" | tee -a "$S"
fi

bench() {  # module preset modes batches label timeout
  [ -z "$CLI" ] && { stamp "$5: no trainlab-cli"; return; }
  local t; t=$(budget "$6"); [ "$t" -eq 0 ] && { stamp "$5 skipped: out of time"; return; }
  TRAINLAB_CUDA_MODULE=/tmp/module-$1.so timeout "$t" "$CLI" bench --case decode --device cuda --preset "$2" \
    --modes "$3" --batch "$4" --steps 128 > "$D/bench-$5.jsonl" 2> "$D/bench-$5.err"
  stamp "bench $5 rc=$? (timeout $t)"
  summary "$D/bench-$5.jsonl" "$1" | tee -a "$S"
}
G=bf16-graph,int8-graph,int4-graph,fp32-graph
bench A gpt2 $G 1 gpt2-A1 45
bench B gpt2 $G 1 gpt2-B1 45
bench A gpt2 $G 1 gpt2-A2 45
bench B gpt2 $G 1 gpt2-B2 45
bench A xl bf16-graph,int8-graph 1 xl-A 60
bench B xl bf16-graph,int8-graph 1 xl-B 60

peer() {  # preset batches timeout
  [ -f .peer/peer_torch_decode.py ] || { stamp "peer: .peer/peer_torch_decode.py not carried"; return; }
  local t; t=$(budget "$3"); [ "$t" -eq 0 ] && { stamp "peer $1 skipped: out of time"; return; }
  timeout "$t" python3 .peer/peer_torch_decode.py --preset "$1" --batches "$2" --tokens 128 > "$D/peer-$1.jsonl" 2> "$D/peer-$1.err"
  stamp "peer $1 rc=$? (timeout $t)"
  summary "$D/peer-$1.jsonl" peer | tee -a "$S"
}
peer gpt2 1,4,16 40
peer xl 1 50
bench B gpt2 $G 4,16 gpt2-B-batched 45
bench B xl int4-graph 1 xl-B-int4 70

stamp "done"
cd "$OUT" && tar czf ab.tgz ab && rm -rf ab
