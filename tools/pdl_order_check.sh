#!/bin/bash
# tools/pdl_order_check.sh [libtrainlab_cuda.so]: checks in the SASS that the decoder's GEMV
# (tile, batched, tensor-core) and attention kernels issue their first global load before
# griddepcontrol.wait (ACQBULK), which is what programmatic dependent launch buys
# (decode_gemv.cuh: ptxas moves the wait to a kernel's first instruction unless a loop ends the
# basic block before it). Needs cuobjdump (the GPU machine's CUDA toolkit, or CUOBJDUMP=path);
# prints one line a kernel; exits 1 when any kernel waits first, 2 when it finds none.
# tests/tools/test_pdl_order_check.sh (CTest, label unit) runs it on SASS fixtures.
set -euo pipefail
lib=${1:-$(find build* -name libtrainlab_cuda.so 2>/dev/null | head -1)}
[ -f "$lib" ] || { echo "pdl_order_check: no libtrainlab_cuda.so (give its path)" >&2; exit 2; }
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
"$cuobjdump" -sass "$lib" | awk '
  function report() {
    if (f !~ /decode_gemv_tile_kernel|decode_gemv_batch_kernel|decode_gemv_tc_kernel|decode_attention_kernel/) return
    ok = a > 0 && l > 0 && l < a
    printf "%s  %s  first load @%d, wait @%d\n", ok ? "ok  " : "FAIL", f, l, a
    if (!ok) bad++
    seen++
  }
  /Function : / { report(); f = $3; n = 0; a = -1; l = -1 }
  { n++ }
  /ACQBULK/ { if (a < 0) a = n }
  /LDG/ { if (l < 0) l = n }
  END { report(); if (!seen) { print "pdl_order_check: no decode kernels in the SASS"; exit 2 } exit bad ? 1 : 0 }'
