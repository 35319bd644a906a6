#!/bin/bash
# tools/samples_gpu_check.sh: `trainlab-cli generate --samples B` on the GPU (issue 20's batched
# decoder as a user feature). Run from the repo root on the GPU machine with $OUT set; ends within
# about 4 minutes (build included). Stages, each with its own timeout and log under $OUT/samples/:
#   build    trainlab-cli and trainlab_cuda (sm_90, no app)
#   train    a tiny char-gpt on the GPU (300 steps) -> $B/cg/model.safetensors; its int4 copy
#   greedy   --temperature 0: --samples 1 (the one-sequence kernels) and --samples 4 and 16 (the
#            batched decoder): every sample must be the same text; whether it is also the --samples 1
#            text is printed (the batched GEMVs may round differently from the one-sequence GEMV)
#   speed    --samples 1, 4, 16 at temperature 1 (fp32 file and the int4 copy): tokens/s of all
#            samples, and 4 and 16 over 1
# Results: $OUT/samples/*.log and $OUT/summary.txt (one line a check).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/samples_gpu_out}
D="$OUT/samples"
mkdir -p "$D"
S="$OUT/summary.txt"
B=/tmp/b-samples
T0=$(date +%s)
# shellcheck source=tools/gpu_stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_stages.sh"  # stamp, budget
git log --oneline -3 > "$D/commit.txt" 2>&1
cat "$D/commit.txt" >> "$S"

(cmake -S ${SRC:-.} -B $B -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && timeout 170 ninja -C $B -j16 trainlab-cli trainlab_cuda) > "$D/build.log" 2>&1
stamp "build rc=$?"
CLI=$(find -L $B -name trainlab-cli -type f -perm -u+x | head -1)
[ -z "$CLI" ] && { grep -E "error|FAILED" -A3 "$D/build.log" | head -30 | tee -a "$S"; exit 1; }

W=$B/cg/model.safetensors Q=$B/cg/q4.safetensors
rm -rf $B/cg
timeout 40 "$CLI" train --model char-gpt --set model.preset=tiny --steps 300 --device cuda --out $B/cg --quiet \
  > "$D/train.log" 2>&1
stamp "train rc=$? $(tail -1 "$D/train.log")"
timeout 20 "$CLI" quantize --weights $W --bits 4 --granularity group --group 32 --out $Q > "$D/quantize.log" 2>&1
stamp "quantize rc=$?"

gen() {  # gen NAME ARGS...: one generate --json run, its JSON line kept in $D/NAME.json
  local name=$1; shift
  timeout 20 "$CLI" generate --device cuda --prompt "ROMEO:" --json "$@" > "$D/$name.json" 2> "$D/$name.log"
  local rc=$?
  [ $rc -ne 0 ] && stamp "$name rc=$rc $(tail -2 "$D/$name.log" | tr '\n' ' ')"
  return $rc
}

gen greedy1 --weights $W --tokens 200 --temperature 0
for b in 4 16; do
  gen greedy$b --weights $W --tokens 200 --temperature 0 --samples $b
done
python3 - "$D" <<'EOF' | tee -a "$S"
import json, sys
d = sys.argv[1]
try:
    one = json.load(open(f"{d}/greedy1.json"))["text"]
except Exception as e:
    print(f"greedy: no --samples 1 text ({e})"); sys.exit(0)
for b in (4, 16):
    try:
        texts = json.load(open(f"{d}/greedy{b}.json"))["texts"]
    except Exception as e:
        print(f"greedy --samples {b}: no output ({e})"); continue
    same = all(t == texts[0] for t in texts)
    print(f"greedy --samples {b}: {len(texts)} texts, all equal: {same} (MUST be True); "
          f"equal to --samples 1: {texts[0] == one}; first 60 chars: {texts[0][:60]!r}")
EOF

for f in fp32 int4; do
  F=$W; [ $f = int4 ] && F=$Q
  for b in 1 4 16; do gen speed-$f-$b --weights $F --tokens 500 --temperature 1 --samples $b; done
done
python3 - "$D" <<'EOF' | tee -a "$S"
import json, sys
d = sys.argv[1]
for f in ("fp32", "int4"):
    tps = {}
    for b in (1, 4, 16):
        try:
            r = json.load(open(f"{d}/speed-{f}-{b}.json"))
            tps[b] = r["tokens_per_s"]
            assert len(r["texts"]) == b
        except Exception as e:
            print(f"speed {f} --samples {b}: no output ({e})")
    if 1 in tps:
        print(f"speed {f}: " + ", ".join(f"--samples {b}: {v:.0f} tok/s ({v / tps[1]:.2f}x)" for b, v in tps.items()))
EOF
stamp "done"
