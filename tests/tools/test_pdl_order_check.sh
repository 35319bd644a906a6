#!/bin/bash
# tests/tools/test_pdl_order_check.sh: tools/pdl_order_check.sh on SASS fixtures, through a stand-in
# cuobjdump (CUOBJDUMP) that prints the fixture: a GEMV that waits before its first load fails
# (exit 1, its line FAIL), kernels that load first pass (exit 0), other kernels (a LayerNorm that
# must wait first) are not judged, and SASS without decode kernels is an error (exit 2).
set -u
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
touch "$tmp/libtrainlab_cuda.so"
fails=0
check() {  # fixture expected-exit expected-text
  printf '#!/bin/bash\ncat "%s"\n' "$here/fixtures/$1" > "$tmp/cuobjdump"; chmod +x "$tmp/cuobjdump"
  out=$(CUOBJDUMP="$tmp/cuobjdump" bash "$root/tools/pdl_order_check.sh" "$tmp/libtrainlab_cuda.so" 2>&1); rc=$?
  if [ "$rc" -ne "$2" ] || ! grep -q -- "$3" <<< "$out"; then
    echo "FAIL: $1: exit $rc (expected $2), output:"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok: $1 (exit $rc)"
  fi
}
check sass_wait_first.txt 1 "FAIL  _ZN8trainlab4kern10decode_dev23decode_gemv_tile_kernel.*first load @6, wait @4"
check sass_loads_first.txt 0 "ok    _ZN8trainlab4kern12_GLOBAL__N_123decode_attention_kernel"
printf '\t\tFunction : _ZN8trainlab4kern12layer_norm_kernelEv\n        /*0000*/ ACQBULK ;\n' > "$tmp/none.txt"
printf '#!/bin/bash\ncat "%s"\n' "$tmp/none.txt" > "$tmp/cuobjdump"
out=$(CUOBJDUMP="$tmp/cuobjdump" bash "$root/tools/pdl_order_check.sh" "$tmp/libtrainlab_cuda.so" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "no decode kernels" <<< "$out"; then echo "ok: no decode kernels (exit 2)"; else echo "FAIL: no decode kernels: exit $rc: $out"; fails=$((fails + 1)); fi
out=$(bash "$root/tools/pdl_order_check.sh" "$tmp/missing.so" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "no libtrainlab_cuda.so" <<< "$out"; then echo "ok: missing module (exit 2)"; else echo "FAIL: missing module: exit $rc: $out"; fails=$((fails + 1)); fi
exit $fails
