#!/bin/bash
# Issue 35 on a machine with two NVIDIA GPUs: the vendor engines (CUDA + NCCL through dlopen).
# One command, from the checkout there (setup as tools/gpu/tests.sh):  tools/gpu/nccl.sh
#  1. finds the libnccl.so.2 PyTorch ships under /opt/torch and names it with AETHERCL_LIBNCCL;
#  2. says which path a communicator over devices 0 and 1 takes (the driver's log);
#  3. runs the many-device suites (tests/multi, with test_engine_collectives.py) with the engines
#     and again with AETHERCL_VENDOR_ENGINES=0 (PLAIN=0 leaves that out);
#  4. runs the all-reduce benchmark at 64/256/1024 MiB on the engine path (staged, and in place
#     on aethercl_comm_alloc buffers) and the host path, with NCCL's own all-reduce through
#     PyTorch as the same-run reference, and prints the ratios;
#  5. unless SCALING=0: data-parallel scaling (tools/bench/scaling.py) of the gemm preset and of
#     bench train's GPT medium in bf16-mixed replayed from graphs, on devices 0,1.
# Logs go to $OUT.
. "$(dirname "$0")/env.sh"
. "$(dirname "$0")/nccl_env.sh"

echo "=== path of a communicator over devices 0 and 1 ($(left)s left)"
AETHERCL_LOG_LEVEL=debug timeout 60 python3 - <<'PY' 2>&1 | grep -E "vendor|communicator|NCCL|CUDA" | tee $OUT/path.txt
import ctypes
from aethercl import Library
lib = Library()
for i in (0, 1):
    lib.check("initialize_gpu", i)
comm = lib.aethercl_comm_create(2, (ctypes.c_int * 2)(0, 1))
print("communicator:", "created" if comm else lib.last_error())
PY

echo "=== tests/multi, vendor engines on ($(left)s left)"
timeout $(( $(left) * 2 / 5 )) python3 -m pytest -q -p no:cacheprovider -rs tests/multi ${PYTEST_ARGS:-} > $OUT/multi_engines.txt 2>&1; echo "rc=$?"
grep -E "passed|failed|error" $OUT/multi_engines.txt | tail -2; grep -E "^FAILED|^ERROR|SKIPPED.*engine" $OUT/multi_engines.txt | head -12

if [ "${PLAIN:-1}" != 0 ]; then
echo "=== tests/multi, AETHERCL_VENDOR_ENGINES=0 ($(left)s left)"
AETHERCL_VENDOR_ENGINES=0 timeout $(( $(left) * 2 / 3 )) python3 -m pytest -q -p no:cacheprovider -rs tests/multi ${PYTEST_ARGS:-} > $OUT/multi_plain.txt 2>&1; echo "rc=$?"
grep -E "passed|failed|error" $OUT/multi_plain.txt | tail -2; grep -E "^FAILED|^ERROR" $OUT/multi_plain.txt | head -12
fi

echo "=== all-reduce: engine and host paths against NCCL through PyTorch ($(left)s left)"
timeout $(( $(left) - 5 )) $TORCH_PY tools/bench/collectives.py --mib ${MIB:-64,256,1024} --reps 10 \
  --devices 0,1 --paths ${PATHS:-engine,engine-buffers,host} --json $OUT/collectives.json > $OUT/collectives.txt 2>&1
echo "rc=$?"; cat $OUT/collectives.txt

if [ "${SCALING:-1}" != 0 ]; then
  echo "=== data-parallel scaling, gemm preset ($(left)s left)"
  timeout $(( $(left) / 2 )) python3 tools/bench/scaling.py --preset gemm --steps 6 \
    --json $OUT/scaling_gemm.json 2>&1 | tail -4
  echo "=== data-parallel scaling, GPT medium bf16-mixed replayed ($(left)s left)"
  timeout $(( $(left) - 5 )) python3 tools/bench/scaling.py --preset medium --steps 10 \
    --precision bf16-mixed --graph --json $OUT/scaling_medium.json 2>&1 | tail -4
fi
