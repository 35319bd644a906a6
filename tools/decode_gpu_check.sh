#!/bin/bash
# tools/decode_gpu_check.sh: GPU decode (issue 20), round 3: batched decode and 2:4 sparsity. Run
# from the repo root on the GPU machine with $OUT set. Every stage is independent (its own
# timeout and log), the stages ordered by importance, and each timeout cut so that the whole
# run ends by 285 s after the start (build included):
#   build    trainlab-cli, trainlab_cuda, test_cuda_decode (sm_90, no app); meanwhile, on other
#            cores, tools/sparse24_lab (nvcc, cuSPARSELt from wherever it is installed)
#   order    tools/pdl_order_check.sh: in the SASS, the decode kernels load before they wait
#   test     test_cuda_decode (parity against the CPU decoder; batched decode at 4 and 16)
#   gpt2     trainlab-cli bench --case decode --preset gpt2 --batch 1,4,16 (bf16/int8/int4 as a
#            graph, and the one-kernel step at batch 1); per-kernel timings and GB/s
#   xl       the same at xl for bf16 and int8 (int4 takes ~30 s a batch to quantize on the host)
#   peer     .peer/peer_torch_decode.py (the lead carries it from shared/bench) --batches 1,4,16
#            at gpt2, then at xl if time is left
#   sparse   sparse24_lab: 2:4 (cuSPARSELt) against dense (cuBLAS) at the char-gpt sizes and 4096^2
# Results: $OUT/decode.tgz (every log) and $OUT/summary.txt (the stages and one line a row).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/decode_gpu_out}
D="$OUT/decode"
mkdir -p "$D"
S="$OUT/summary.txt"
B=/tmp/b-decode
T0=$(date +%s)
END=285
# shellcheck source=tools/gpu_stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_stages.sh"  # stamp, budget
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv > "$D/device.txt" 2>&1
git log --oneline -3 > "$D/commit.txt" 2>&1
cat "$D/commit.txt" >> "$S"

# One line a JSON row (tools/decode_summary.py).
summary() { python3 "$(dirname "${BASH_SOURCE[0]}")/decode_summary.py" "$@"; }

stamp "build start"
# The sparse lab on its own (nvcc, a few cores) while the project builds.
(BUILD=/tmp/b-sparse24 timeout 200 bash tools/sparse24_lab/run.sh --build-only > "$D/sparse24-build.log" 2>&1; echo "rc=$?" >> "$D/sparse24-build.log") &
SPARSE_BUILD=$!
(cmake -S ${SRC:-.} -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && timeout "$(budget 170)" ninja -C $B -j16 trainlab-cli trainlab_cuda test_cuda_decode) > "$D/build.log" 2>&1
stamp "build rc=$?"
grep -E "error|FAILED" -A3 "$D/build.log" | head -40 | tee -a "$S"
CLI=$(find $B -name trainlab-cli -type f -perm -u+x | head -1)
TEST=$(find $B -name test_cuda_decode -type f -perm -u+x | head -1)
MODULE=$(find $B -name libtrainlab_cuda.so -type f | head -1)
if [ -n "$MODULE" ]; then  # the kernels load before they wait for the previous one (PDL)
  bash tools/pdl_order_check.sh "$MODULE" > "$D/pdl_order.log" 2>&1
  stamp "pdl_order_check rc=$? ($(grep -c '^ok' "$D/pdl_order.log") ok)"
  grep -v '^ok' "$D/pdl_order.log" | head -10 | tee -a "$S"
fi

if [ -n "$TEST" ]; then
  timeout "$(budget 45)" "$TEST" > "$D/test_cuda_decode.log" 2>&1
  stamp "test_cuda_decode rc=$?"
  grep -E "FAIL|fail|passed|[0-9]+ of 100|speculative|batch|sequences" "$D/test_cuda_decode.log" | head -40 | tee -a "$S"
else
  stamp "test_cuda_decode not built"
fi

bench() {  # preset modes batches label timeout
  [ -z "$CLI" ] && { stamp "$4: no trainlab-cli"; return; }
  local t; t=$(budget "$5"); [ "$t" -eq 0 ] && { stamp "$4 skipped: out of time"; return; }
  timeout "$t" "$CLI" bench --case decode --device cuda --preset "$1" --modes "$2" --batch "$3" --steps 128 \
    > "$D/bench-$4.jsonl" 2> "$D/bench-$4.err"
  stamp "bench $4 rc=$? (timeout $t)"
  tail -3 "$D/bench-$4.err" | tee -a "$S"
  summary "$D/bench-$4.jsonl" | tee -a "$S"
}
bench gpt2 bf16-graph,int8-graph,int4-graph 1,4,16 gpt2 40
bench gpt2 bf16 1 gpt2-onekernel 10
bench xl bf16-graph,int8-graph 1,4,16 xl 60

peer() {  # preset timeout
  [ -f .peer/peer_torch_decode.py ] || { stamp "peer: .peer/peer_torch_decode.py not carried"; return; }
  local t; t=$(budget "$2"); [ "$t" -eq 0 ] && { stamp "peer $1 skipped: out of time"; return; }
  timeout "$t" python3 .peer/peer_torch_decode.py --preset "$1" --batches 1,4,16 --tokens 128 > "$D/peer-$1.jsonl" 2> "$D/peer-$1.err"
  stamp "peer $1 rc=$? (timeout $t)"
  summary "$D/peer-$1.jsonl" | tee -a "$S"
}
peer gpt2 30

wait $SPARSE_BUILD
stamp "sparse24 build: $(tail -1 "$D/sparse24-build.log")"
grep -iE "error|cuSPARSELt" "$D/sparse24-build.log" | head -10 | tee -a "$S"
if [ -x /tmp/b-sparse24/sparse24_lab ]; then
  t=$(budget 40)
  [ "$t" -gt 0 ] && BUILD=/tmp/b-sparse24 timeout "$t" bash tools/sparse24_lab/run.sh --run-only > "$D/sparse24.jsonl" 2>&1
  stamp "sparse24 rc=$?"
  summary "$D/sparse24.jsonl" | tee -a "$S"
fi

peer xl 60

stamp "done"
cd "$OUT" && tar czf decode.tgz decode && rm -rf decode
