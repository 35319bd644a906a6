#!/bin/bash
# tools/bench_char_gpt2.sh: the char-gpt2 bf16 ratio on its own, run by the device tool from the repo root
# with $OUT set: builds the CLI and the CUDA module from SRC (default .), then the lab's bf16 step,
# the PyTorch peer (.peer/peer_torch.py, carried) on char-gpt2, and the lab again, in one command.
export PATH=/usr/local/cuda/bin:$PATH
export TRAINLAB_DATA_DIR=$PWD/resources/data
T0=$(date +%s)
cmake -S ${SRC:-.} -B build-gpu -G Ninja -DTRAINLAB_BUILD_APP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > $OUT/cfg.log 2>&1
ninja -C build-gpu -j16 trainlab-cli trainlab_cuda > $OUT/build.log 2>&1 || { grep -E "error|FAILED" -A3 $OUT/build.log | head -30; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
CLI=build-gpu/core/trainlab-cli
$CLI bench --case char-gpt2 --device cuda --modes bf16 2>/dev/null | grep '^{' | tee $OUT/lab1.jsonl | python3 -c "import sys,json;[print('lab1',json.loads(l)['ms_per_step']) for l in sys.stdin]"
PYTHONUNBUFFERED=1 timeout 300 python3 .peer/peer_torch.py --data resources/data --cases char-gpt2 2>&1 | tee $OUT/peer.txt | grep '^{' | python3 -c "import sys,json;[print('peer',json.loads(l)['mode'],round(json.loads(l)['ms_per_step'],2)) for l in sys.stdin]"
$CLI bench --case char-gpt2 --device cuda --modes bf16 2>/dev/null | grep '^{' | tee $OUT/lab2.jsonl | python3 -c "import sys,json;[print('lab2',json.loads(l)['ms_per_step']) for l in sys.stdin]"
echo "total $(( $(date +%s) - T0 )) s"
