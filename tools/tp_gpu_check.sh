#!/bin/bash
# tools/tp_gpu_check.sh: tensor parallelism (dist.tp, issue 38) and the staged MPI transport on the
# GPU machine's one GPU, run from the repo root with $OUT set. Carry .peer (peer_torch.py from
# ../shared/bench) for the PyTorch strict load. Builds trainlab-cli, the CUDA module and the GPU
# tests it runs, then:
#   1. test_cuda_staged (DDP over two ranks on the GPU through MPI staging against one rank),
#      test_cuda_tensor_parallel (tp 2, tp 2 with sequence parallelism, fp32 and bf16, against one
#      rank; the gathered weights file on one rank), test_cuda_dist (NCCL at tp 1, as before) and
#      test_cuda_transformer (the dropout kernel's first-element offset among the transformer ops);
#   2. PyTorch loads a tp 2 run's weights file (gathered from the shards) strict into the peer's
#      CharGPT;
#   3. the step time of the small preset in bf16 on one rank and at tp 2 (two ranks on the one GPU,
#      staged through host memory: a correctness setup, not a speed result) for BENCHMARKS.md.
# Logs under $OUT/tp/.
set -u
OUT=${OUT:-/tmp/tp_gpu_out}
LOG=$OUT/tp
mkdir -p "$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources/data
MPI=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1
     -x NVSHMEM_DISABLE_NVLS=1 -x TRAINLAB_DATA_DIR -x LD_LIBRARY_PATH)
TESTS=(test_cuda_staged test_cuda_tensor_parallel test_cuda_dist test_cuda_transformer)
if [ -n "${BIN:-}" ]; then
  # Binaries built elsewhere (tools/carry_bin.sh): the CLI, the core library, the CUDA module and
  # the tests, all in $BIN; no build here.
  BIN=$(cd "$BIN" && pwd)
  export LD_LIBRARY_PATH=$BIN:$LD_LIBRARY_PATH TRAINLAB_CUDA_MODULE=$BIN/libtrainlab_cuda.so
  C=$BIN/trainlab-cli
  export TRAINLAB_CLI=$C
  MPI+=(-x TRAINLAB_CUDA_MODULE -x TRAINLAB_CLI)
  T=$BIN
else
  B=/tmp/b-tp
  start=$(date +%s)
  (cmake -S "${SRC:-.}" -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && ninja -C $B -j16 trainlab-cli trainlab_cuda "${TESTS[@]}") > "$LOG/build.log" 2>&1 \
    || { tail -40 "$LOG/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
  C=$B/core/trainlab-cli
  T=$B/tests
fi
for t in "${TESTS[@]}"; do
  timeout 240 "$T/$t" > "$LOG/$t.log" 2>&1
  echo "$t exit=$?"
  grep -E "FAIL|largest|eval of|passed|SKIP" "$LOG/$t.log" | tail -12
done

# 2. The whole model in PyTorch's names: a tp 2 run's weights, loaded strict.
R=/tmp/tp-runs
rm -rf $R && mkdir -p $R
timeout 120 "${MPI[@]}" -np 2 "$C" train --device cuda --quiet --model char-gpt --steps 30 --batch 8 --seed 3 \
  --set dist.tp=2 --set dist.transport=mpi --set train.eval_windows=16 --out $R/tp2 > "$LOG/tp2_train.log" 2>&1
echo "tp2 train exit=$?"
python3 - $R/tp2 <<'PY' 2>&1 | tee "$LOG/torch_load.txt"
import json, sys
sys.path.insert(0, ".peer")
from safetensors import safe_open
from safetensors.torch import load_file
from peer_torch import CharGPT
path = sys.argv[1] + "/model.safetensors"
with safe_open(path, "pt") as f:
    arch = json.loads(f.metadata()["trainlab_architecture"])
sd = load_file(path)
m = CharGPT(sd["tok.weight"].shape[0], arch["layers"], arch["heads"], arch["dim"], arch["context"])
print("strict load:", m.load_state_dict(sd, strict=True), len(sd), "tensors, architecture", arch["layers"], "x",
      arch["heads"], "x", arch["dim"])
PY

# 3. Step time: one rank against tp 2 on the one GPU (staged), small preset, bf16.
for mode in one tp2 tp2-sp; do
  args=(train --device cuda --quiet --model char-gpt --set model.preset=small --precision bf16 --steps 20 --batch 16
        --seed 3 --set train.eval_windows=16 --set run.save_weights=false --out "$R/small-$mode")
  case $mode in
    one) timeout 120 "$C" "${args[@]}" > "$LOG/small_$mode.log" 2>&1 ;;
    tp2) timeout 150 "${MPI[@]}" -np 2 "$C" "${args[@]}" --set dist.tp=2 --set dist.transport=mpi > "$LOG/small_$mode.log" 2>&1 ;;
    tp2-sp) timeout 150 "${MPI[@]}" -np 2 "$C" "${args[@]}" --set dist.tp=2 --set dist.transport=mpi \
              --set dist.sequence_parallel=true > "$LOG/small_$mode.log" 2>&1 ;;
  esac
  echo "small $mode exit=$?"
done
python3 - $R <<'PY' 2>&1 | tee "$LOG/step_times.txt"
import sys
sys.path.insert(0, "tools")
from read_record import steps
R = sys.argv[1]
base = None
for mode in ("one", "tp2", "tp2-sp"):
    try:
        s = list(steps(f"{R}/small-{mode}"))
    except Exception as e:
        print(mode, "no record:", e); continue
    if len(s) < 5:
        print(mode, "only", len(s), "steps"); continue
    ms = sorted(x["step_ms"] for x in s[2:])
    med = ms[len(ms) // 2]
    base = base or med
    extra = ""
    if "ranks" in s[-1]:
        r0 = s[-1]["ranks"][0]
        extra = f" comm_ms {r0.get('comm_ms', 0):.1f} bytes {r0.get('bytes_sent')}"
    print(f"{mode}: median step {med:.1f} ms ({med / base:.2f}x one rank), loss {s[-1]['loss']:.5f}{extra}")
PY
