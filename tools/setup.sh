# tools/setup.sh: what ./run.sh and ./test.sh share: the Debian packages TrainLab needs, installed
# only when missing, and a configure step that runs only when the build folder is new or an option
# differs from its cache. Sourced, not run.

PACKAGES=(build-essential cmake ninja-build pkg-config qt6-base-dev qt6-svg-dev qt6-base-dev-tools
          libqcustomplot-dev libqcustomplot2.1-qt6 libopenblas-dev zlib1g-dev nlohmann-json3-dev
          libcli11-dev xvfb xauth
          desktop-file-utils appstream poppler-utils
          openmpi-bin libopenmpi-dev clang libclang-rt-14-dev
          imagemagick)  # imagemagick: tools/screenshots.sh joins the report pages

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

# configure_and_build DIR [cmake -D options...]: configures only when DIR has no build yet or an
# option differs from its cache (ninja re-runs CMake by itself when a CMakeLists.txt changes).
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
