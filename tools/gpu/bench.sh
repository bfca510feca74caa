#!/bin/bash
# The benchmarks on the lent NVIDIA machine, each against its same-run reference (calls, llm.py step,
# bandwidth, GEMM), then a rerun of the launch/SPIR-V suites with PoCL as a second device. Setup as
# tools/gpu/tests.sh.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
echo "=== calls"; timeout 90 python3 tools/bench/call_overhead.py --build $B --calls 20000 > $OUT/calls.txt 2>&1; grep -v "^C " $OUT/calls.txt | head -12
echo "=== step ($(left)s)"; timeout 170 python3 tools/bench/step.py --build $B --steps 40 --warmup 5 --json $OUT/step.json > $OUT/step.txt 2>&1; head -14 $OUT/step.txt; grep -A3 "PyTorch" $OUT/step.txt | head -6
echo "=== bandwidth ($(left)s)"; timeout 90 python3 tools/bench/bandwidth.py --mib 256 --reps 10 > $OUT/bandwidth.txt 2>&1; head -40 $OUT/bandwidth.txt
echo "=== gemm ($(left)s)"; timeout $(( $(left) - 10 )) python3 tools/bench/gemm.py --build $B --sizes 1024 4096 8192 --modes ${GEMM_MODES:-fp32 3xtf32 tf32 bf16 fp16} > $OUT/gemm.txt 2>&1; tail -40 $OUT/gemm.txt
echo "=== refit ($(left)s): the four environment failures of call A, PoCL visible as a second device"
export WITH_POCL=1; cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/
timeout $(( $(left) - 3 )) python3 -m pytest -q -p no:cacheprovider tests/python/test_launch.py tests/python/test_examples.py tests/python/test_programs.py tests/python/test_runtime_api.py 2>&1 | tail -6
