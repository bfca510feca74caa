#!/bin/bash
# The GPU-side suites under compute-sanitizer (issue 37): a probe first says whether the tool sees
# OpenCL kernels at all (a user kernel storing far past its buffer), then unit tests, thread
# stress, the fuzzer and pytest suites under memcheck, and a racecheck pass. Each line gives the
# suite's own result and the tool's verdict. Setup as tools/gpu/tests.sh; SECONDS_FUZZ (60) and
# SUITES (a pytest selection) override; logs in $OUT.
. "$(dirname "$0")/env.sh"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -x "$CS" ] || { echo "compute-sanitizer not found"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
"$CS" --version | tail -1

# checked TOOL NAME TIMEOUT COMMAND...: runs COMMAND under compute-sanitizer's TOOL; prints the
# command's exit status and what the tool said.
checked() {
  local tool=$1 name=$2 limit=$3; shift 3
  timeout "$limit" "$CS" --tool "$tool" --target-processes all --print-limit 20 \
    bash -c '"$@"; echo "suite-rc=$?"' _ "$@" > "$OUT/$name.txt" 2>&1
  local suite verdict
  suite=$(grep -o "suite-rc=[0-9]*" "$OUT/$name.txt" | tail -1)
  if grep -q "before first instrumented API call" "$OUT/$name.txt"; then
    verdict="not instrumented (no CUDA API call: OpenCL kernels are invisible to it)"
  else
    verdict=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$name.txt" | tail -1)
  fi
  echo "$name: ${suite:-suite-rc=timeout}; $tool: ${verdict:-no summary}"
  grep -E " passed| failed|test cases:|iterations:|accepted" "$OUT/$name.txt" | tail -1
}

cat > /tmp/oob.py <<'PY'
import numpy as np, aethercl
dev = aethercl.Device(0)
out = dev.zeros((16,), np.float32)
dev.compile("__kernel void past(__global float* o) { o[get_global_id(0) + (1 << 26)] = 1.0f; }"
            ).kernel("past")(64, None, out)
try:
    dev.synchronize()
    print("probe: the store went unreported by the device")
except Exception as error:
    print(f"probe: the device reported {error}")
PY
echo "=== probe: a store 256 MiB past a 64-byte buffer"
checked memcheck probe 120 python3 /tmp/oob.py
grep "^probe:" $OUT/probe.txt
echo "=== memcheck: unit tests, thread stress, fuzzer ${SECONDS_FUZZ:-60} s, pytest"
checked memcheck unit 240 $B/unit_tests
AETHERCL_SUBMIT_THREAD=1 checked memcheck threads 120 $B/thread_stress 50
checked memcheck fuzz $(( ${SECONDS_FUZZ:-60} + 120 )) $B/fuzz_entry_points \
  --seconds=${SECONDS_FUZZ:-60} tests/fuzz/corpus tests/fuzz/regressions
SUITES=${SUITES:-"tests/python/test_hostile.py tests/python/test_programs.py tests/python/test_train_elementwise.py tests/python/test_train_norm.py tests/python/test_attention.py tests/python/test_graph.py"}
AETHERCL_TEST_STRENGTH=1 checked memcheck pytest $(( $(left) - 150 )) python3 -m pytest -q -p no:cacheprovider $SUITES
echo "=== racecheck ($(left)s left)"
AETHERCL_TEST_STRENGTH=1 checked racecheck racecheck $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/python/test_attention.py tests/python/test_rowwise.py
