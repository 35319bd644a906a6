#!/usr/bin/env bash
# tools/fuzz.sh NAME [SECONDS] [JOBS]: runs the libFuzzer target fuzz_NAME (tests/fuzz/fuzz_NAME.cpp)
# for SECONDS (default 600) on JOBS processes (default 1), built with clang, ASan and UBSan in
# build-fuzz/. New inputs are merged (minimised) into tests/fuzz/corpus/NAME/; a crashing input is
# written to tests/fuzz/crashes/ and the run stops: fix it, then copy it into the corpus.
# Needs clang and libclang-rt-14-dev (tools/setup.sh installs both).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name=${1:?usage: tools/fuzz.sh NAME [SECONDS] [JOBS]}
seconds=${2:-600}
jobs=${3:-1}
corpus=tests/fuzz/corpus/$name
[ -d "$corpus" ] || { echo "error: no seed corpus $corpus" >&2; exit 2; }
if [ ! -f build-fuzz/build.ninja ]; then
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRAINLAB_FUZZ=ON -DTRAINLAB_BUILD_APP=OFF -DTRAINLAB_WITH_CUDA=OFF "${launcher[@]}" >/dev/null
fi
# The build shares the machine: niced, FUZZ_BUILD_JOBS (default 2) compiles at a time.
nice ninja -C build-fuzz -j "${FUZZ_BUILD_JOBS:-2}" "fuzz_$name"
work=$(mktemp -d)
mkdir -p tests/fuzz/crashes
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -jobs/-workers only for several processes: with them libFuzzer runs its jobs as child processes
# that log into fuzz-N.log in the current folder instead of the terminal.
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
# -rss_limit_mb: an input that makes a parser allocate gigabytes is a finding, not a machine to kill.
nice "build-fuzz/tests/fuzz/fuzz_$name" -max_total_time="$seconds" "${parallel[@]}" -rss_limit_mb=2048 \
  -artifact_prefix=tests/fuzz/crashes/ -print_final_stats=1 "$work" "$corpus"
"build-fuzz/tests/fuzz/fuzz_$name" -merge=1 "$corpus" "$work" >/dev/null 2>&1
rm -rf "$work"
echo "fuzz_$name: ran ${seconds} s on ${jobs} job(s); corpus now $(ls "$corpus" | wc -l) files"
