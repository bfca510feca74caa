#!/bin/bash
# Reductions, RNG and dropout on the lent NVIDIA machine (issue 36): their suites, bench bandwidth
# with rows of 1024 and of 16384 (column sums of the GPT shapes against a same-bytes copy in its
# second table), then column sums and first-axis reductions with AETHERCL_REDUCE_LANE_ROWS swept
# (rows each lane along the axis sums per chunk; default 16). Setup as tools/gpu/tests.sh.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/python/test_reduce.py tests/python/test_train_reduce.py tests/python/test_train_rng.py 2>&1 | tail -1
# bw VAR=VALUE [bench arguments...]
bw() {
  local setting=$1; shift
  timeout 120 env "$setting" python3 tools/bench/bandwidth.py --mib 256 --reps 10 "$@" 2>&1
}
echo "=== rows of 1024 ($(left)s left)"; bw A=1 --row 1024
echo "=== rows of 16384 ($(left)s left)"; bw A=1 --row 16384 | grep -E "^(clone|rng|dropout|reduce|[0-9])"
[ -n "${LANE_ROWS:-}" ] || exit 0
for r in 4 8 32 64; do
  echo "=== AETHERCL_REDUCE_LANE_ROWS=$r ($(left)s left)"
  bw AETHERCL_REDUCE_LANE_ROWS=$r --row 1024 | grep -E "^(clone|reduce .*(first|middle)|[0-9])"
done
