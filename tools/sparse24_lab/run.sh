#!/bin/bash
# tools/sparse24_lab/run.sh [--build-only | --run-only]: builds and runs sparse24_lab.cu (a 2:4
# sparse product with cuSPARSELt against cuBLAS dense) on a CUDA machine. cuSPARSELt is found
# wherever it is installed (a system package, or the nvidia-cusparselt wheel inside a Python
# environment, whose sibling nvidia/*/lib folders go on the library path); $BUILD (default
# build-sparse24-lab) receives the binary. Prints the lab's JSON lines; exits 2 without cuSPARSELt.
set -e
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-sparse24-lab}
HDR=$(find /opt /usr /root -name cusparseLt.h 2>/dev/null | head -1)
LIB=$(find /opt /usr /root \( -name "libcusparseLt.so" -o -name "libcusparseLt.so.0" \) 2>/dev/null | head -1)
if [ -z "$HDR" ] || [ -z "$LIB" ]; then
  echo '{"case": "sparse24", "error": "cuSPARSELt not found (cusparseLt.h and libcusparseLt.so)"}'
  exit 2
fi
LIBDIR=$(dirname "$LIB")
export LD_LIBRARY_PATH=$(ls -d "$LIBDIR"/../../*/lib 2>/dev/null | tr '\n' ':')$LIBDIR:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if [ "$1" != "--run-only" ]; then
  echo "cuSPARSELt: $HDR $LIB"
  mkdir -p "$BUILD"
  PATH=/usr/local/cuda/bin:$PATH nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 -I"$(dirname "$HDR")" \
    tools/sparse24_lab/sparse24_lab.cu -lcublas -Xlinker "$LIB" -Xlinker -rpath -Xlinker "$LIBDIR" -o "$BUILD/sparse24_lab"
fi
[ "$1" = "--build-only" ] && exit 0
"$BUILD/sparse24_lab"
