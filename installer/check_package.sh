#!/usr/bin/env bash
# Builds the .deb and .tar.gz from a configured build tree, unpacks the .deb into a scratch root
# (dpkg -x: no system changes) and checks that the installed files work on their own:
# trainlab-cli --version, a short digits training that finds its data under share/trainlab,
# the desktop entry and AppStream metainfo validate, and dpkg-deb -c lists what must be there.
# Usage: check_package.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_package.sh BUILD_DIR}
cd "$build"
rm -f trainlab_*.deb trainlab_*.tar.gz
cpack -G "DEB;TGZ" >cpack.log 2>&1 || { cat cpack.log; echo "FAIL: cpack"; exit 1; }
deb=$(ls trainlab_*.deb | head -n1)
tgz=$(ls trainlab_*.tar.gz | head -n1)
echo "built $deb and $tgz"
listing=$(dpkg-deb -c "$deb")
fail=0
for want in ./usr/bin/trainlab-cli ./usr/lib/libtrainlab_core.so ./usr/share/applications/org.trainlab.TrainLab.desktop \
            ./usr/share/metainfo/org.trainlab.TrainLab.metainfo.xml \
            ./usr/share/icons/hicolor/scalable/apps/org.trainlab.TrainLab.svg \
            ./usr/share/icons/hicolor/48x48/apps/org.trainlab.TrainLab.png \
            ./usr/share/trainlab/data/digits.csv.gz ./usr/share/trainlab/data/tinyshakespeare.txt \
            ./usr/share/trainlab/data/kjv.txt \
            ./usr/share/doc/trainlab/LICENSE ./usr/share/doc/trainlab/ATTRIBUTION.md; do
  if ! grep -q " $want\$" <<<"$listing"; then echo "FAIL: $want missing from $deb"; fail=1; fi
done
if [ -x app/trainlab ] && ! grep -q ' ./usr/bin/trainlab$' <<<"$listing"; then echo "FAIL: the app is built but not packaged"; fail=1; fi
dpkg-deb -f "$deb" Depends | grep -q libopenblas || { echo "FAIL: Depends lacks OpenBLAS"; fail=1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
# The installed binary must find its libraries and data by itself (RPATH, ../share/trainlab).
env -u TRAINLAB_DATA_DIR "$root/usr/bin/trainlab-cli" --version
(cd "$root" && env -u TRAINLAB_DATA_DIR "$root/usr/bin/trainlab-cli" train --model digits-mlp --steps 30 --device cpu \
   --out "$root/run" --quiet) || { echo "FAIL: training from the installed files"; fail=1; }
python3 - "$root/run/summary.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "completed" and s["steps"] == 30, s
print("installed training:", s["steps"], "steps, test accuracy", round(s["test_accuracy"], 3))
PY
desktop-file-validate "$root/usr/share/applications/org.trainlab.TrainLab.desktop" || { echo "FAIL: desktop-file-validate"; fail=1; }
appstreamcli validate --no-net "$root/usr/share/metainfo/org.trainlab.TrainLab.metainfo.xml" || { echo "FAIL: appstreamcli"; fail=1; }
tar -tzf "$tgz" | grep -q 'bin/trainlab-cli$' || { echo "FAIL: tarball lacks bin/trainlab-cli"; fail=1; }
[ "$fail" -eq 0 ] && echo "package checks passed"
exit "$fail"
