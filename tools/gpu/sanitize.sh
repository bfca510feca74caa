#!/bin/bash
# The GPU-side suites under compute-sanitizer (issue 37): first a probe that says whether the tool
# sees OpenCL kernels at all (a user kernel writing past its buffer), then unit tests, thread
# stress, the fuzzer and pytest suites under memcheck, and a racecheck pass. Setup as
# tools/gpu/tests.sh; SECONDS_FUZZ (60) and SUITES (a pytest selection) override; logs in $OUT.
. "$(dirname "$0")/env.sh"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
[ -x "$CS" ] || { echo "compute-sanitizer not found"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
"$CS" --version | tail -1
MC=("$CS" --tool memcheck --target-processes all --error-exitcode 99 --print-limit 20)
echo "=== probe: an out-of-bounds store in a user kernel, under memcheck"
cat > /tmp/oob.py <<'PY'
import numpy as np, aethercl
dev = aethercl.Device(0)
out = dev.zeros((16,), np.float32)
k = dev.compile("__kernel void past(__global float* o) { o[get_global_id(0) + (1 << 26)] = 1.0f; }").kernel("past")
k(64, None, out)
dev.synchronize()
print("probe kernel ran")
PY
timeout 120 "${MC[@]}" python3 /tmp/oob.py > $OUT/probe.txt 2>&1; echo "probe rc=$? (99: memcheck saw the store)"
grep -E "Invalid|ERROR SUMMARY|probe kernel ran|No CUDA|not supported|Target application" $OUT/probe.txt | head -5
echo "=== unit tests + thread stress under memcheck"
timeout 240 "${MC[@]}" $B/unit_tests > $OUT/unit.txt 2>&1; echo "unit rc=$?"; grep -E "ERROR SUMMARY|test cases" $OUT/unit.txt | tail -2
AETHERCL_SUBMIT_THREAD=1 timeout 120 "${MC[@]}" $B/thread_stress 50 > $OUT/threads.txt 2>&1; echo "threads rc=$?"; grep -E "ERROR SUMMARY" $OUT/threads.txt | tail -1; tail -1 $OUT/threads.txt
echo "=== fuzzer ${SECONDS_FUZZ:-60} s under memcheck"
timeout $(( ${SECONDS_FUZZ:-60} + 120 )) "${MC[@]}" $B/fuzz_entry_points --seconds=${SECONDS_FUZZ:-60} tests/fuzz/corpus tests/fuzz/regressions > $OUT/fuzz.txt 2>&1; echo "fuzz rc=$?"; grep -E "ERROR SUMMARY" $OUT/fuzz.txt | tail -1; tail -2 $OUT/fuzz.txt
echo "=== pytest under memcheck ($(left)s left)"
SUITES=${SUITES:-"tests/python/test_hostile.py tests/python/test_programs.py tests/python/test_train_elementwise.py tests/python/test_train_norm.py tests/python/test_attention.py tests/python/test_graph.py"}
AETHERCL_TEST_STRENGTH=1 timeout $(( $(left) - 150 )) "${MC[@]}" python3 -m pytest -q -x -p no:cacheprovider $SUITES > $OUT/pytest.txt 2>&1; echo "pytest rc=$?"
grep -E "ERROR SUMMARY|passed|failed" $OUT/pytest.txt | tail -3
echo "=== racecheck: the attention and row-kernel suites ($(left)s left)"
AETHERCL_TEST_STRENGTH=1 timeout $(( $(left) - 10 )) "$CS" --tool racecheck --target-processes all --error-exitcode 99 --print-limit 20 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_attention.py tests/python/test_rowwise.py > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|passed|failed" $OUT/racecheck.txt | tail -4
