#!/usr/bin/env bash
# tools/behaviour_check.sh CLI OUT: runs a fixed set of short CPU trainings with the trainlab-cli
# binary CLI and writes OUT/NAME.losses (per step: loss, accuracy, lr, loss scale, validation,
# memory by category; then the summary's test figures). Two builds give bit-identical files when a
# change keeps behaviour (a refactor): `diff -r OUT_BEFORE OUT_AFTER`.
set -euo pipefail
cli=$1
out=$2
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  local name=$1; shift
  "$cli" train --device cpu --quiet --out "$work/$name" "$@" >/dev/null
  python3 - "$work/$name" "$(dirname "$0")" > "$out/$name.losses" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import read_record  # steps.bin merged with metrics.jsonl, slow fields carried (core/train/run_reader.cpp)
d = sys.argv[1]
keys = ["step", "loss", "train_accuracy", "lr", "loss_scale", "skipped_steps", "val_loss", "val_accuracy",
        "mem", "mem_predicted", "sparsity", "bits_per_weight", "event"]
for m in read_record.steps(d):
    print(json.dumps({k: m[k] for k in keys if k in m}, sort_keys=True))
s = json.load(open(d + "/summary.json"))
print(json.dumps({k: s.get(k) for k in ["status", "steps", "test_loss", "test_accuracy", "final_train_loss", "skipped_steps"]}, sort_keys=True))
PY
}
run digits-fp32 --model digits-mlp --epochs 2 --seed 1
cp "$work/digits-fp32/model.safetensors" "$work/teacher.safetensors"
run digits-bf16 --model digits-mlp --epochs 1 --seed 2 --precision bf16
run digits-fp16-acc --model digits-mlp --steps 40 --seed 3 --precision fp16 --accumulate 4 --batch 16
run mlp-sgd-gelu --model mlp --set model.hidden=[96,48] --set model.activation=gelu --optimizer sgd \
  --set schedule.name=warmup-cosine --set schedule.warmup_steps=5 --steps 50 --seed 4
run digits-qat-prune --model digits-mlp --steps 60 --seed 5 --set quant.mode=qat --set quant.bits=4 \
  --set prune.method=gradual --set prune.sparsity=0.7 --set prune.start_step=5 --set prune.interval=5 --set prune.n_steps=6
run digits-distill --model mlp --set model.hidden=[32] --steps 40 --seed 6 \
  --set distill.teacher="$work/teacher.safetensors" --set distill.alpha=0.5 --set distill.temperature=4
run gpt-tiny-fp32 --model char-gpt --set model.preset=tiny --steps 12 --seed 7 --set train.eval_every=6
run gpt-tiny-bf16-ckpt --model char-gpt --set model.preset=tiny --steps 8 --seed 8 --precision bf16 \
  --set checkpoint.policy=every-block --set model.dropout=0.1 --set train.eval_every=4
echo "behaviour_check: $(ls "$out" | wc -l) runs in $out"
