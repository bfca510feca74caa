#!/usr/bin/env bash
# Exhaustive ulp sweep of kernels/fastmath.cl: every float bit pattern through acl_erf, acl_exp and
# acl_tanh on the default device, against double std::erf/exp/tanh. Prints the max error of each.
# Usage: tools/bench/fastmath_ulp.sh [build-dir]   (minutes on 2 cores; the unit test is strided)
set -euo pipefail
build=${1:-build}
AETHERCL_ULP_STRIDE=1 "$build/unit_tests" -tc="fastmath*" 2>&1 | grep --line-buffered -E "stride|Status"
