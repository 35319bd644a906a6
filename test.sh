#!/usr/bin/env bash
# ./test.sh: install what is missing (Debian packages, only when missing), build in Release in
# build/, run every test with CTest; exits non-zero when anything fails.
#   ./test.sh              the whole suite (unit, gui, slow; gpu tests skip without a GPU)
#   ./test.sh --sanitize   ASan + UBSan build of the core and the unit tests in build-asan/, unit label
#   ./test.sh -- ARGS      extra arguments for ctest (e.g. -- -L unit, -- -R test_cli)
# With CI=true (or TRAINLAB_WERROR=ON) warnings are errors. TRAINLAB_BUILD_DIR picks another build
# folder than build/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

source tools/setup.sh

sanitize=0
ctest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --sanitize) sanitize=1 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "usage: ./test.sh [--sanitize] [-- ctest arguments]" >&2; exit 2 ;;
  esac
  shift
done

werror=${TRAINLAB_WERROR:-OFF}
cuda_arch=()
if [ "${CI:-}" = "true" ]; then
  werror=ON
  # CI has no GPU: the CUDA code is compiled (and must compile without warnings) for one
  # architecture, the GPU machine's, instead of the default 80 and 90: half the kernels' build time.
  cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi

install_missing
start=$(date +%s)
if [ $sanitize -eq 1 ]; then
  # The core and the unit tests only (no app, no CUDA); the loops run instrumented, OpenBLAS not.
  configure_and_build build-asan -DCMAKE_BUILD_TYPE=Release -DTRAINLAB_SANITIZE=ON -DTRAINLAB_WERROR="$werror" \
    -DTRAINLAB_BUILD_APP=OFF -DTRAINLAB_WITH_CUDA=OFF
  # Leak checking is off by default (OpenBLAS's and Qt's process-lifetime buffers); turn it on
  # with ASAN_OPTIONS=detect_leaks=1. UBSan findings fail the test (halt_on_error).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # The unit label without the longer trainings (those run in the optimised build above) and
  # without the tests labelled no-asan: those start hundreds of processes (every option's bad
  # values, the planner's command line) or several ranks, where ASan's start-up is the cost and
  # the code they reach is already covered here by other tests and the fuzz corpora. Those tests
  # are not built in build-asan at all (tests/CMakeLists.txt).
  [ ${#ctest_args[@]} -eq 0 ] && ctest_args=(-L unit -LE "slow|no-asan")
  dir=build-asan
else
  dir=${TRAINLAB_BUILD_DIR:-build}
  configure_and_build "$dir" -DCMAKE_BUILD_TYPE=Release -DTRAINLAB_WERROR="$werror" "${cuda_arch[@]}"
fi
echo "build: $(( $(date +%s) - start )) s"
ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600 "${ctest_args[@]}"
