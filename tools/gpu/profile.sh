#!/bin/bash
# Nsight Compute on the lent NVIDIA machine. ncu does not attach to OpenCL launches, so the
# products are captured (AETHERCL_CAPTURE_DIR) and their launches replayed through the CUDA driver
# by tools/gpu/replay_launch.py under ncu. Setup as tools/gpu/tests.sh; reports go to $OUT.
# Arguments: "MODE MxNxK [--trans-b]" per product (default: the decode-like and square products
# short of their targets).
# KERNELS=part,...: capture and profile the kernels whose names contain one (default: gemm).
. "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
METRICS="==ERROR==|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy"
METRICS="$METRICS|Registers Per|Warp Cycles Per Issued|No Eligible|L2 Hit|DRAM Throughput"
[ $# -gt 0 ] || set -- "tf32 128x4096x4096" "bf16 128x4096x4096" "tf32 2048x2048x2048"
for product in "$@"; do
  set -- $product
  name=$(echo "$product" | tr ' ' '_' | tr -d -)
  capture=/tmp/capture/$name; rm -rf "$capture"
  AETHERCL_CAPTURE_DIR=$capture AETHERCL_CAPTURE_KERNELS=${KERNELS:-gemm} AETHERCL_CAPTURE_LIMIT=4 \
    timeout 120 python3 tools/bench/gemm.py --build $B --sizes --shapes $2 --modes $1 ${3:-} \
    --no-cublas --no-clblast --reps 1 --kernel-times > $OUT/bench_$name.txt 2>&1
  echo "=== $product: $(ls $capture | tr '\n' ' ')"
  # Each kernel's last captured launch: the first ones may be the tensor cores' probe products.
  for kernel in $(ls $capture/*.json | sed 's/-[0-9]*\.json$//' | sort -u); do
    launch=$(ls -v $kernel-*.json | tail -1)
    python3 tools/gpu/replay_launch.py "$launch" --reps 20
    timeout 150 $NCU --set full python3 tools/gpu/replay_launch.py "$launch" \
      > $OUT/ncu_${name}_$(basename $launch .json).txt 2>&1
    grep -E "$METRICS" $OUT/ncu_${name}_$(basename $launch .json).txt | head -14
  done
done
