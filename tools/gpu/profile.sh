#!/bin/bash
# Nsight Compute on the lent NVIDIA machine: one FP32 GEMM 4096^3 and one BF16 8192^3 product
# (the warpgroup-MMA kernel), to see which limit stops them. Setup as tools/gpu/tests.sh.
P=/tmp/pfx; mkdir -p $P /tmp/vendors; for f in .devcarry/debs/*.deb; do dpkg -x $f $P; done
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
D=$PWD; B=$D/.devcarry/build
export OCL_ICD_VENDORS=/tmp/vendors LD_LIBRARY_PATH=$B:$P/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
export AETHERCL_CACHE_DIR=/tmp/kcache AETHERCL_LIBRARY=$B/driver.so AETHERCL_BUILD_DIR=$B
export PYTHONPATH=$D/python_harness
which ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for mode in "fp32 4096" "bf16 8192"; do
  set -- $mode
  timeout 150 $NCU --target-processes all -k regex:gemm -c 1 --section SpeedOfLight --section Occupancy \
    --section MemoryWorkloadAnalysis python3 tools/bench/gemm.py --build $B --sizes $2 --modes $1 \
    --no-cublas --no-clblast --reps 1 > $OUT/ncu_$1.txt 2>&1
  grep -E "==PROF==|==WARNING==|==ERROR==|Throughput|Occupancy|Registers|Shared Memory|Duration|Block Size|Elapsed|Memory \[%\]|Compute \(SM\)" $OUT/ncu_$1.txt | head -30
done
