#!/bin/bash
# BF16/FP16 products of float32 operands on the lent NVIDIA machine (setup as tools/gpu/tests.sh):
# rounded in the mma.sync kernel's registers (AETHERCL_GEMM_NARROWING=registers, the default)
# against 16-bit copies (copies): the GEMM suites' 16-bit cases, per-product times on the GPT's
# shapes (tools/gpu/mode_probe.py) and `bench train` small in BF16 with each, PyTorch beside the
# first. SKIP_TESTS=1 skips the suites; LIMIT (seconds, default 585).
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== suites ($(left)s left)"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/python/test_gemm.py \
    tests/python/test_gemm_tensor_cores.py -k "bf16 or fp16 or narrow" > $OUT/suites.txt 2>&1
  echo "rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/suites.txt | head -20; tail -2 $OUT/suites.txt
fi
# The GPT small's products (4096 rows = batch 16 x context 256; width 512, feed-forward 2048):
# forward x W, backward dY W^T and X^T dY.
SHAPES="4096,512,512,0,0 4096,2048,512,0,0 4096,512,2048,0,0 4096,512,512,0,1 4096,2048,512,0,1
4096,512,2048,0,1 512,512,4096,1,0 512,2048,4096,1,0 2048,512,4096,1,0"
for narrowing in registers copies; do
  echo "=== per product, AETHERCL_GEMM_NARROWING=$narrowing ($(left)s left)"
  AETHERCL_GEMM_NARROWING=$narrowing MODES="tf32 bf16" REPS=100 timeout 90 \
    python3 tools/gpu/mode_probe.py $SHAPES 2>&1 | sed -e 's/; host us since.*//' | tee -a $OUT/probe.txt
done
for narrowing in registers copies; do
  echo "=== train small, AETHERCL_GEMM_NARROWING=$narrowing ($(left)s left)"
  torch=$([ $narrowing = registers ] && echo auto || echo off)
  AETHERCL_GEMM_NARROWING=$narrowing timeout $(( $(left) - 10 )) python3 tools/bench/train.py \
    --model gpt --preset small --precisions ${PRECISIONS:-tf32 bf16} --torch $torch --graph both \
    --json $OUT/train_$narrowing.json > $OUT/train_$narrowing.txt 2>&1
  echo "rc=$?"; tail -${TAIL:-22} $OUT/train_$narrowing.txt
done
