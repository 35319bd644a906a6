#!/usr/bin/env bash
# Part of tools/screenshots.sh: every view and dialog other than the README's main ones.
# Usage: tools/screenshot_views.sh APP CLI WORK_DIR RUNS_DIR OUT_DIR
#   RUNS_DIR holds screenshots.sh's two digits runs (fp32, bf16); the runs these views need are
#   trained here into WORK_DIR. Runs under the clean profile screenshots.sh exported.
set -euo pipefail
app=$1 cli=$2 work=$3 runs=$4 out=$5
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
xvfb=(xvfb-run -a -s "-screen 0 1600x1000x24")
fp32=$runs/20260101-100000-digits-mlp-fp32
bf16=$runs/20260101-100500-digits-mlp-bf16

echo "  training a char-gpt run with kernel timing (kernels, roofline, text, system)..."
char=$work/runs-views/20260101-110000-char-gpt-fp32
"$cli" train --quiet --model char-gpt --set model.preset=tiny --set train.steps=120 --set train.eval_every=40 \
  --device cpu --set device.kernel_timing=true --set run.name="char-gpt tiny" --out "$char"
echo "  a third digits run (parallel coordinates)..."
"$cli" train --quiet --steps 1200 --precision fp16 --device cpu --set run.name="digits fp16" --set optim.lr=0.003 \
  --set train.batch=128 --set run.save_weights=false --out "$runs/20260101-101000-digits-mlp-fp16"
ranks=$work/runs-ranks/20260101-120000-digits-mlp-2-ranks
if command -v mpirun >/dev/null; then
  echo "  a 2-rank run (ranks dock)..."
  "$cli" train --quiet --steps 400 --device cpu --set dist.ranks=2 --set dist.strategy=zero1 \
    --set run.name="digits 2 ranks zero1" --set run.save_weights=false --out "$ranks"
fi

# shot NAME SIZE PALETTE ARGS...: one PNG of the app started with ARGS, in a settings profile of
# its own: the window state the 1600x1000 shot before it saved made a 1280x800 one 1007 px tall.
shot() {
  local name=$1 size=$2 palette=$3
  shift 3
  XDG_CONFIG_HOME=$work/config-$name "${xvfb[@]}" "$app" --size "$size" --palette "$palette" \
    --screenshot "$out/$name.png" "$@"
}
both() {  # NAME ARGS...: at 1600x1000 light and at 1280x800 dark
  local name=$1
  shift
  shot "$name" 1600x1000 system "$@"
  shot "$name-1280-dark" 1280x800 dark "$@"
}
views=$work/runs-views
both kernels --runs-dir "$views" --reopen "$char" --view kernels --screenshot-after-ms 2000
both roofline --runs-dir "$views" --reopen "$char" --view roofline --screenshot-after-ms 2000
both text-generation --runs-dir "$views" --reopen "$char" --view text --screenshot-after-ms 8000
both system-metrics --runs-dir "$views" --reopen "$char" --view system --screenshot-after-ms 2000
[[ -d "$ranks" ]] && both ranks --runs-dir "$(dirname "$ranks")" --reopen "$ranks" --view ranks --screenshot-after-ms 2000
both planner --runs-dir "$views" --view planner --screenshot-after-ms 2000
both sweep --runs-dir "$views" --view sweep="$root/docs/compression/digits-mlp-cpu.csv" --screenshot-after-ms 2000
both parallel-coordinates --runs-dir "$runs" --overlay "$fp32" --overlay "$bf16" \
  --overlay "$runs/20260101-101000-digits-mlp-fp16" --view parallel --screenshot-after-ms 2000
# A copy: the view writes its measurement (sensitivity.json) beside the weights.
mkdir -p "$work/weights" && cp "$root/docs/compression/digits-mlp-baseline.safetensors" "$work/weights/"
both sensitivity --runs-dir "$views" --sensitivity "$work/weights/digits-mlp-baseline.safetensors" \
  --screenshot-after-ms 15000
for d in about export open-config; do
  shot "dialog-$d" 1600x1000 system --runs-dir "$runs" --reopen "$fp32" --dialog "$d" --screenshot-after-ms 1500
done
for d in tags rename; do
  shot "dialog-$d" 1600x1000 system --runs-dir "$runs" --reopen "$bf16" --dialog "$d" --screenshot-after-ms 1500
done
