#!/bin/bash
# The whole test suite on the lent NVIDIA machine: unit tests, thread stress, every pytest suite.
# Run from the checkout there; .devcarry/ carries the ICD loader and CLBlast debs and a Release build
# (docs/DEVICES.md). Logs go to $OUT.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
echo "=== unit + threads"
timeout 90 $B/unit_tests > $OUT/unit.txt 2>&1; tail -2 $OUT/unit.txt
AETHERCL_SUBMIT_THREAD=1 timeout 30 $B/thread_stress 200 2>&1 | tail -1
AETHERCL_SUBMIT_THREAD=0 timeout 30 $B/thread_stress 200 2>&1 | tail -1
echo "=== pytest ($(left)s left)"
timeout $(( $(left) - 20 )) python3 -m pytest -v -p no:cacheprovider tests/python ${PYTEST_ARGS:-} --ignore=tests/python/test_packaging.py --ignore=tests/python/test_inspect.py > $OUT/pytest.txt 2>&1; echo "rc=$?"
grep -c " PASSED" $OUT/pytest.txt; grep -c " SKIPPED" $OUT/pytest.txt; grep -E " FAILED| ERROR" $OUT/pytest.txt | head -30; tail -3 $OUT/pytest.txt
