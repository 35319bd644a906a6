#!/usr/bin/env bash
# Renders the README screenshots into docs/screenshots/ under Xvfb:
#   main-window.png      the window during a digits run that flips fp32 -> bf16 mid-run
#   main-window-dark.png the same window under a dark palette, during a run that prunes gradually
#                        with 4-bit QAT (the sparsity and bits plot)
#   runs-comparison.png  two finished runs (fp32, bf16) overlaid, differences highlighted
#   report-page.png      pages of a PDF report exported headless (trainlab report ... -o x.pdf)
#   lessons.png          Help > Lessons on the accumulate lesson (trainlab --lesson accumulate)
#   *-1280.png           the same views at 1280x800 (a laptop's screen): the first start before
#                        any run, the main window light and dark, the runs comparison, and the
#                        quant-outlier lesson (its legend below the axes)
#   views/VIEW.png, views/VIEW-1280-dark.png
#                        every other view (trainlab --view NAME: the kernels, roofline, text,
#                        ranks and system docks, the planner, sweep and parallel coordinates
#                        windows; --sensitivity) at 1600x1000 under the light palette and at
#                        1280x800 under the dark one, from runs trained here (a char-gpt run with
#                        kernel timing, a 2-rank run where mpirun is installed)
#   views/dialog-NAME.png  the dialogs (trainlab --dialog NAME: about, export, tags, rename,
#                        open-config); a dialog's size does not follow the window's, so one each
# Each PNG is reduced to 256 colours without dithering (ImageMagick), a third of its size.
# Usage: tools/screenshots.sh [BUILD_DIR]   (default: build-app, else build)
# Needs xvfb-run, pdftoppm (poppler-utils) and ImageMagick's convert.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}
if [[ -z "$build" ]]; then
  for b in "$root/build-app" "$root/build"; do [[ -x "$b/app/trainlab" ]] && build=$b && break; done
fi
app=$build/app/trainlab
cli=$build/core/trainlab-cli
[[ -x "$app" && -x "$cli" ]] || { echo "build trainlab and trainlab-cli first (looked in '$build')" >&2; exit 1; }
out=$root/docs/screenshots
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
touch "$work/started"  # the PNGs newer than this are this run's
# A clean profile: no remembered window state, runs folder or overlays.
export XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data XDG_CACHE_HOME=$work/cache
export TRAINLAB_DATA_DIR=${TRAINLAB_DATA_DIR:-$root/resources}
xvfb=(xvfb-run -a -s "-screen 0 1600x1000x24")
runs=$work/runs

echo "training two short runs for the comparison..."
"$cli" train --quiet --steps 1200 --precision fp32 --device cpu --set run.name="digits fp32" \
  --set run.save_weights=false --out "$runs/20260101-100000-digits-mlp-fp32"
"$cli" train --quiet --steps 1200 --precision bf16 --device cpu --set run.name="digits bf16" --set optim.lr=0.002 \
  --set run.save_weights=false --out "$runs/20260101-100500-digits-mlp-bf16"

echo "main window during a run..."
"${xvfb[@]}" "$app" --runs-dir "$runs" --size 1600x1000 --set device.name=cpu --set train.steps=4000 \
  --set train.eval_every=100 --set run.name="live digits" --start --change-at 3500:precision.dtype=bf16 \
  --screenshot "$out/main-window.png" --screenshot-after-ms 6000 --screenshot-after-steps 3000

echo "dark palette, pruning + QAT..."
"${xvfb[@]}" "$app" --runs-dir "$work/runs-dark" --size 1600x1000 --palette dark --set device.name=cpu \
  --set train.steps=3000 --set train.eval_every=100 --set run.name="pruned int4" --set prune.method=gradual \
  --set prune.sparsity=0.8 --set prune.start_step=100 --set prune.interval=100 --set prune.n_steps=8 \
  --set quant.mode=qat --set quant.bits=4 --start --screenshot "$out/main-window-dark.png" --screenshot-after-ms 9000 \
  --screenshot-after-steps 1000

echo "runs comparison..."
"${xvfb[@]}" "$app" --runs-dir "$runs" --size 1600x1000 --reopen "$runs/20260101-100000-digits-mlp-fp32" \
  --overlay "$runs/20260101-100000-digits-mlp-fp32" --overlay "$runs/20260101-100500-digits-mlp-bf16" \
  --screenshot "$out/runs-comparison.png" --screenshot-after-ms 1500

echo "lessons..."
"${xvfb[@]}" "$app" --runs-dir "$runs" --size 1600x1000 --lesson accumulate --screenshot "$out/lessons.png" \
  --screenshot-after-ms 1500

echo "the same at 1280x800..."
XDG_CONFIG_HOME=$work/config-first "${xvfb[@]}" "$app" --runs-dir "$work/runs-first" --size 1280x800 \
  --screenshot "$out/first-start-1280.png" --screenshot-after-ms 1500  # a profile of its own: a first start
"${xvfb[@]}" "$app" --runs-dir "$work/runs-1280" --size 1280x800 --set device.name=cpu --set train.steps=4000 \
  --set train.eval_every=100 --set run.name="live digits" --start --change-at 3500:precision.dtype=bf16 \
  --screenshot "$out/main-window-1280.png" --screenshot-after-ms 6000 --screenshot-after-steps 3000
"${xvfb[@]}" "$app" --runs-dir "$work/runs-dark-1280" --size 1280x800 --palette dark --set device.name=cpu \
  --set model.name=char-gpt --set train.steps=400 --set train.eval_every=50 --start \
  --screenshot "$out/main-window-dark-1280.png" --screenshot-after-ms 12000
"${xvfb[@]}" "$app" --runs-dir "$runs" --size 1280x800 --reopen "$runs/20260101-100000-digits-mlp-fp32" \
  --overlay "$runs/20260101-100000-digits-mlp-fp32" --overlay "$runs/20260101-100500-digits-mlp-bf16" \
  --screenshot "$out/runs-comparison-1280.png" --screenshot-after-ms 1500
"${xvfb[@]}" "$app" --runs-dir "$runs" --size 1280x800 --lesson quant-outlier \
  --screenshot "$out/lessons-quant-outlier-1280.png" --screenshot-after-ms 1500

echo "views and dialogs..."
"$root/tools/screenshot_views.sh" "$app" "$cli" "$work" "$runs" "$out/views"

echo "report..."
"$app" report "$runs/20260101-100000-digits-mlp-fp32" "$runs/20260101-100500-digits-mlp-bf16" -o "$work/report.pdf"
pdftoppm -png -r 80 -f 1 -l 2 "$work/report.pdf" "$work/page"
convert "$work"/page-*1.png "$work"/page-*2.png -background "#888" -splice 0x12 -append -chop 0x12 "$out/report-page.png"
# 256 colours, no dithering: the plots keep their look at a third of the bytes.
# Only the files rendered now (planner-pipeline.png is made by hand).
find "$out" -name '*.png' -newer "$work/started" -exec convert {} -dither None -colors 256 -define png:compression-level=9 PNG8:{} \;
ls -l "$out" "$out/views"
