#!/bin/bash
# tools/carry_bin.sh [BUILD_DIR] [TARGET...]: copies trainlab-cli, the core library, the CUDA
# module and the named test executables of BUILD_DIR (default build) into .devbin/ (ignored by
# git), for a device command to carry instead of building there (see tools/tp_gpu_check.sh, BIN=).
# The GPU machine has no Qt: carry only Qt-free tests (tests/gpu). Build the targets first.
set -euo pipefail
B=${1:-build}
shift || true
rm -rf .devbin && mkdir -p .devbin
cp "$B/core/trainlab-cli" "$B/core/libtrainlab_core.so" "$B/core/libtrainlab_cuda.so" .devbin/
for t in "$@"; do cp "$B/tests/$t" .devbin/; done
du -sh .devbin
