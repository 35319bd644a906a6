#!/usr/bin/env bash
# ./run.sh: install what is missing (Debian packages, only when missing), build TrainLab in Release
# in build/, then start the desktop app on the digits MLP; without the app (or without a display)
# train the digits MLP with the CLI instead. Safe to run again: nothing is redone that is done.
#   ./run.sh [extra arguments for the app, or for `trainlab-cli train` when there is no app]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

source tools/setup.sh

install_missing
configure_and_build build -DCMAKE_BUILD_TYPE=Release

if [ -x build/app/trainlab ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  exec build/app/trainlab --set model.name=digits-mlp "$@"
fi
if [ -x build/app/trainlab ]; then
  echo "(no display: training the digits MLP with the CLI instead of opening the app)"
fi
exec build/core/trainlab-cli train --model digits-mlp --epochs 30 --seed 1 --device auto "$@"
