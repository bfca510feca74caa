#!/bin/bash
# The session-15 tensor-core paths on the lent NVIDIA machine (setup as tools/gpu/tests.sh), in two
# calls of under ten minutes. PART=1: the suites that run the real instructions (BF16/FP16 products
# of float32 operands rounded in registers, AETHERCL_GEMM_NARROWING; fused attention on tensor
# cores), `bench attention`-style timings against PyTorch SDPA (tools/bench/attention.py), and
# per-product times with the narrowing in registers and as copies (tools/gpu/mode_probe.py).
# PART=2: `bench train` small in BF16 with attention unfused (OCL_LLM_FUSED=linear,scores) and
# fused (linear,attention, now the default there), PyTorch beside the first, then the copies
# narrowing.
# LIMIT (seconds, default 585).
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
if [ "${PART:-1}" = 1 ]; then
  echo "=== suites ($(left)s left)"
  # Products of float32 operands in BF16/FP16 mode on the real kernels: test_gemm's modes, shapes
  # and split-K with the default narrowing, then the attention suites.
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python/test_gemm.py \
    -k "bf16 or fp16" > $OUT/suites_gemm.txt 2>&1
  echo "rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/suites_gemm.txt | head -20; tail -2 $OUT/suites_gemm.txt
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/test_attention_tensor_cores.py \
    tests/python/test_attention.py tests/python/test_fused_model.py -k "not emulate" \
    > $OUT/suites.txt 2>&1
  echo "rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/suites.txt | head -20; tail -2 $OUT/suites.txt
  echo "=== attention ($(left)s left)"
  timeout 150 python3 tools/bench/attention.py --modes fp32 bf16 --json $OUT/attention.json \
    2>&1 | tee $OUT/attention.txt | tail -12
  # The GPT small's products (4096 rows = batch 16 x context 256; width 512, feed-forward 2048):
  # forward x W, backward dY W^T and X^T dY.
  SHAPES="4096,512,512,0,0 4096,2048,512,0,0 4096,512,2048,0,0 4096,512,512,0,1 4096,2048,512,0,1
  4096,512,2048,0,1 512,512,4096,1,0 512,2048,4096,1,0 2048,512,4096,1,0"
  for narrowing in registers copies; do
    echo "=== per product, AETHERCL_GEMM_NARROWING=$narrowing ($(left)s left)"
    AETHERCL_GEMM_NARROWING=$narrowing MODES="tf32 bf16" REPS=100 timeout 90 \
      python3 tools/gpu/mode_probe.py $SHAPES 2>&1 | sed -e 's/; host us since.*//' | tee -a $OUT/probe.txt
  done
else
  run_train() {  # name, OCL_LLM_FUSED, AETHERCL_GEMM_NARROWING, --torch
    echo "=== train small $1 ($(left)s left)"
    OCL_LLM_FUSED=$2 AETHERCL_GEMM_NARROWING=$3 timeout $(( $(left) - 10 )) python3 \
      tools/bench/train.py --model gpt --preset small --precisions bf16 --torch $4 --graph both \
      --json $OUT/train_$1.json > $OUT/train_$1.txt 2>&1
    echo "rc=$?"; tail -${TAIL:-16} $OUT/train_$1.txt
  }
  run_train unfused linear,scores registers auto
  run_train flash linear,attention registers off
  run_train copies linear,scores copies off
fi
