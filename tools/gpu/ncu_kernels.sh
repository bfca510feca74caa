#!/bin/bash
# Nsight Compute on the kernels one command launches (setup as tools/gpu/tests.sh): the command
# runs with its launches of the kernels named in KERNELS (comma list of name parts) captured, then
# each captured kernel's last launch is replayed through the CUDA driver under ncu
# (tools/gpu/replay_launch.py). Reports: $OUT/ncu_<kernel>.txt. SOURCE=1 adds the per-line
# (SASS) hot spots of --set full's source page.
#   KERNELS=attention_mma bash tools/gpu/ncu_kernels.sh python3 tools/bench/attention.py ...
. "$(dirname "$0")/env.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
METRICS="==ERROR==|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy"
METRICS="$METRICS|Registers Per|Warp Cycles Per Issued|No Eligible|L2 Hit|DRAM Throughput"
METRICS="$METRICS|Theoretical Occupancy|Block Limit|Local Memory|Stall|Shared Memory Configuration"
capture=/tmp/capture/ncu; rm -rf "$capture"
AETHERCL_CAPTURE_DIR=$capture AETHERCL_CAPTURE_KERNELS=${KERNELS:?} AETHERCL_CAPTURE_LIMIT=${LIMIT_CAPTURES:-8} \
  timeout 150 "$@" > $OUT/command.txt 2>&1
echo "=== captured: $(ls $capture | tr '\n' ' ')"
for kernel in $(ls $capture/*.json | sed 's/-[0-9]*\.json$//' | sort -u); do
  launch=$(ls -v $kernel-*.json | tail -1)
  name=$(basename $launch .json)
  python3 tools/gpu/replay_launch.py "$launch" --reps 20
  timeout 150 $NCU --set full ${SOURCE:+--import-source yes} python3 tools/gpu/replay_launch.py \
    "$launch" > $OUT/ncu_$name.txt 2>&1
  echo "--- $name"; grep -E "$METRICS" $OUT/ncu_$name.txt | head -30
done
