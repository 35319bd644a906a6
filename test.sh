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

PACKAGES=(build-essential cmake ninja-build pkg-config qt6-base-dev qt6-svg-dev qt6-base-dev-tools
          libqcustomplot-dev libqcustomplot2.1-qt6 libopenblas-dev zlib1g-dev nlohmann-json3-dev
          libcli11-dev xvfb xauth
          desktop-file-utils appstream poppler-utils)

install_missing() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "Installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

configure_and_build() {
  local dir=$1; shift
  local need=0 opt key value
  [ -f "$dir/build.ninja" ] || need=1
  for opt in "$@"; do
    key=${opt#-D}; key=${key%%=*}; value=${opt#*=}
    grep -Eq "^${key}:[A-Z]+=${value}\$" "$dir/CMakeCache.txt" 2>/dev/null || need=1
  done
  if [ $need -eq 1 ]; then
    cmake -S . -B "$dir" -G Ninja "$@"
  fi
  ninja -C "$dir" -j "$(nproc)"
}

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
[ "${CI:-}" = "true" ] && werror=ON

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
  # The unit label without the longer trainings (those run in the optimised build above).
  [ ${#ctest_args[@]} -eq 0 ] && ctest_args=(-L unit -LE slow)
  dir=build-asan
else
  dir=${TRAINLAB_BUILD_DIR:-build}
  configure_and_build "$dir" -DCMAKE_BUILD_TYPE=Release -DTRAINLAB_WERROR="$werror"
fi
echo "build: $(( $(date +%s) - start )) s"
ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600 "${ctest_args[@]}"
