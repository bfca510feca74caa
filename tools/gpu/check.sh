#!/bin/bash
# A short check on the lent NVIDIA machine: unit tests, the elementwise / axis-reduction / hostile
# suites, bandwidth and the llm.py step. Setup as tools/gpu/tests.sh.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
timeout 90 $B/unit_tests > $OUT/unit.txt 2>&1; tail -2 $OUT/unit.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python/test_elementwise.py tests/python/test_train_reduce.py tests/python/test_train_elementwise.py tests/python/test_hostile.py 2>&1 | tail -3
echo "=== bandwidth"; timeout 90 python3 tools/bench/bandwidth.py --mib 256 --reps 10 > $OUT/bandwidth.txt 2>&1; cat $OUT/bandwidth.txt
echo "=== step"; timeout 170 python3 tools/bench/step.py --build $B --steps 40 --warmup 5 --json $OUT/step.json > $OUT/step.txt 2>&1; head -6 $OUT/step.txt; grep -A3 "PyTorch" $OUT/step.txt | head -5
