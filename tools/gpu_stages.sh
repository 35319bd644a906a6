# shellcheck shell=bash
# tools/gpu_stages.sh: sourced by the GPU check scripts (decode_gpu_check.sh, decode_ab_check.sh,
# samples_gpu_check.sh, speculative_gpu_check.sh) for their stage lines and time limits. The caller
# sets T0 (the start, date +%s), S (the summary file) and, for budget, END (seconds the whole run
# may take).
# stamp TEXT: "[seconds since T0] TEXT" to stdout and the summary.
stamp() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$S"; }
# budget SECONDS: a stage's timeout, its own cut to what is left before END (0: skip the stage).
budget() {
  local left=$((END - ($(date +%s) - T0)))
  [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
