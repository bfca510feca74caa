#!/bin/bash
# The version-4 functions on the lent NVIDIA machine (setup as tools/gpu/tests.sh): their suites,
# the fused-GEMM and graph-replay benchmarks, and `bench train` small with the fused paths on and
# off (OCL_LLM_FUSED, each value of FUSED; PyTorch beside the TORCH_WITH one). SUITES_ONLY=1
# stops after the suites, TRAIN_ONLY=1 runs only bench train, TRACE=1 adds its step profiles.
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
if [ -z "${TRAIN_ONLY:-}" ]; then
echo "=== suites ($(left)s left)"
timeout $(( $(left) - 400 )) python3 -m pytest -q -p no:cacheprovider -x \
  tests/python/test_attention.py tests/python/test_gemm_fused.py \
  tests/python/test_gemm_fused_paths.py tests/python/test_optimizer_multi.py \
  tests/python/test_graph.py tests/python/test_fused_model.py tests/python/test_reduce.py \
  > $OUT/suites.txt 2>&1
echo "rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/suites.txt | head -20; tail -2 $OUT/suites.txt
[ -n "${SUITES_ONLY:-}" ] && exit 0
echo "=== bench gemm-fused ($(left)s left)"
timeout 120 python3 tools/bench/gemm_fused.py --out $OUT > $OUT/gemm_fused.txt 2>&1; echo "rc=$?"
tail -30 $OUT/gemm_fused.txt
echo "=== bench graphs ($(left)s left)"
timeout 90 python3 tools/bench/graph_replay.py --build $B --json $OUT/graphs.json > $OUT/graphs.txt 2>&1
echo "rc=$?"; tail -15 $OUT/graphs.txt
fi
for fused in ${FUSED:-0 1}; do
  echo "=== train small, OCL_LLM_FUSED=$fused ($(left)s left)"
  torch=$([ $fused = "${TORCH_WITH:-1}" ] && echo auto || echo off)
  OCL_LLM_FUSED=$fused timeout $(( $(left) - 10 )) python3 tools/bench/train.py --model gpt \
    --preset small --precisions ${PRECISIONS:-tf32 bf16} --torch $torch \
    --json $OUT/train_fused$fused.json ${TRACE:+--trace $OUT/trace_fused$fused} > $OUT/train_fused$fused.txt 2>&1
  echo "rc=$?"; tail -${TAIL:-25} $OUT/train_fused$fused.txt
done
