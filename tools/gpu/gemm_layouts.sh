#!/bin/bash
# tools/gpu/gemm_layouts.py for the GPT small and medium widths: defaults beside PyTorch, then
# each AETHERCL_MMA_PARAMS in CONFIGS (";"-separated) on the products named by ONLY (default dW).
. "$(dirname "$0")/env.sh"
PY=/opt/torch/.venv/bin/python3; [ -x $PY ] || PY=python3
IFS=';' read -ra configs <<< "${CONFIGS:-wgmma=1,bulk=1;wgmma=0,bm=128,bn=128,wm=64,wn=64,stages=3,row_bytes=64;wgmma=0,bm=64,bn=64,wm=32,wn=32,stages=3,row_bytes=128}"
for size in "--width 768 --ff 3072" "--width 512 --ff 2048"; do
  echo "=== $size default"; $PY tools/gpu/gemm_layouts.py $size --torch --only "${ONLY:-dW}"
  for cfg in "${configs[@]}"; do
    echo "=== $size $cfg"
    AETHERCL_MMA_PARAMS=$cfg python3 tools/gpu/gemm_layouts.py $size --only "${ONLY:-dW}" 2>&1 | cut -c1-150
  done
done
