#!/bin/bash
# Row kernels and GELU on the lent NVIDIA machine: the rowwise suite, then bench bandwidth with the
# defaults and with the variants selectable by environment (register-group minimum, fast math), all
# in one call so every figure has the same-run copy beside it. Setup as tools/gpu/tests.sh.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/test_rowwise.py tests/python/test_elementwise.py tests/python/test_framework.py 2>&1 | tail -1
bw() { timeout 90 env "$@" python3 tools/bench/bandwidth.py --mib 256 --reps 10 2>&1 | grep -E "^(clone|gelu|softmax|layernorm)"; }
echo "=== defaults"; bw A=1
[ -n "${ROWS_VARIANTS:-}" ] || exit 0
for m in 128 256; do echo "=== AETHERCL_ROW_GROUP_MIN=$m"; bw AETHERCL_ROW_GROUP_MIN=$m | grep -E "clone|softmax |layernorm" | grep -v loop; done
echo "=== AETHERCL_FAST_MATH=1"; bw AETHERCL_FAST_MATH=1 | grep -E "clone|gelu"
