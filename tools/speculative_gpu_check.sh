#!/bin/bash
# tools/speculative_gpu_check.sh: speculative decoding on the GPU (issue 20; docs/SPECULATIVE.md,
# "Measured on the H200"). Run from the repo root on the GPU machine with $OUT set; about 2 minutes
# after the build. Builds trainlab-cli (sm_90, no app), trains on the GPU a target of gpt2's shape
# (12 x 12 x 768, context 256, 800 steps) and two drafts on tinyshakespeare (tiny: 2 x 128, 1,500
# steps; 4 x 256, 1,000 steps), quantizes the target to int4-g32, then runs
#   trainlab-cli generate --device cuda --weights target --weight-format bf16 --draft D
#                         --speculate K --tokens N --temperature T --prompt "ROMEO:" --json
# over drafts, K, T and target formats, one line each in $OUT/summary.txt: acceptance, tokens a
# target pass, speculative and target-alone tokens/s, the speed-up, the draft's and the target's
# wall time. Logs and JSON under $OUT/spec/. CLI=path/to/trainlab-cli skips the build.
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRAINLAB_DATA_DIR=$PWD/resources/data
S="$OUT/summary.txt"; B=${BUILD:-/tmp/b-spec}; D=$OUT/spec; W=/tmp/spec-models; T0=$(date +%s)
mkdir -p "$D"; rm -rf $W; mkdir -p $W/q4
# shellcheck source=tools/gpu_stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_stages.sh"  # stamp, budget
if [ -n "${CLI:-}" ]; then  # a trainlab-cli built already (with trainlab_cuda beside it or on LD_LIBRARY_PATH)
  C=$CLI
else
  (cmake -S . -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    && timeout 300 ninja -C $B -j16 trainlab-cli trainlab_cuda) > "$D/build.log" 2>&1
  stamp "build rc=$?"
  C=$(find $B -name trainlab-cli -type f -perm -u+x | head -1)
fi
[ -z "$C" ] && { tail -30 "$D/build.log"; exit 1; }
P=resources/presets/char-small-shakespeare.json
train_run() { # name steps lr sets...
  local n=$1 s=$2 lr=$3; shift 3
  timeout 120 $C train --config $P --set model.dropout=0 --set model.context=256 --set train.eval_every=0 --steps $s --lr $lr \
    --device cuda --out $W/$n --quiet "$@" > $D/train-$n.log 2>&1
  stamp "train $n rc=$? $(tail -2 $D/train-$n.log | head -1)"; }
train_run target 800 0.0006 --set model.preset=gpt2
train_run tiny 1500 0.002 --set model.preset=tiny
train_run mid 1000 0.001 --set model.layers=4 --set model.heads=4 --set model.dim=256
timeout 60 $C quantize --weights $W/target/model.safetensors --bits 4 --granularity group --out $W/q4/model.safetensors \
  --device cuda > $D/q4.log 2>&1
stamp "quantize rc=$?"
n=0
gen() { # draft K T tokens extra-options...
  local d=$1 k=$2 t=$3 tok=$4; shift 4
  n=$((n + 1)); local o=$D/gen$n
  echo "draft=$d k=$k T=$t tokens=$tok $*" > $o.cmd
  timeout 60 $C generate --device cuda --weights $W/target/model.safetensors --draft $W/$d/model.safetensors --speculate $k \
    --tokens $tok --temperature $t --prompt "ROMEO:" --json "$@" > $o.json 2> $o.err
  python3 - $o <<'PY' | tee -a "$S"
import json, sys
o = sys.argv[1]
cmd = open(o + ".cmd").read().strip()
try:
    j = json.load(open(o + ".json")); s = j["speculative"]
    print(f"{cmd}: acceptance {100*s['acceptance_rate']:.1f}% tokens/pass {s['tokens_per_target_pass']:.2f} "
          f"speculative {j['tokens_per_s']:.0f} alone {s['baseline_tokens_per_s']:.0f} speed-up {s['speedup']:.2f}x "
          f"draft {1e3*s['draft_seconds']:.1f} ms target {1e3*s['target_seconds']:.1f} ms passes {s['target_passes']}")
except Exception:
    print(cmd, "FAILED:", open(o + ".err").read()[-600:])
PY
}
for k in 2 3 4; do gen tiny $k 0 240 --weight-format bf16; done
gen tiny 3 0.8 240 --weight-format bf16
for k in 2 3; do gen mid $k 0 240 --weight-format bf16; done
gen q4 4 0 240 --weight-format bf16
gen tiny 3 0 1000 --weight-format bf16
gen tiny 3 0 240
gen tiny 3 0 240 --weight-format bf16 --one-kernel
gen tiny 3 0 240 --weight-format int4
stamp done
