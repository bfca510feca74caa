#!/bin/bash
# bench train on the lent NVIDIA machine (setup as tools/gpu/tests.sh): the GPT presets and the CNN,
# ours in every precision next to PyTorch where it is installed there; then the GEMM suites and the
# Python-layer suites on the GPU. PRESETS (default "small medium"), LIMIT (seconds, default 585).
. "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $OUT/gpu.txt
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" 2>&1 | tail -1
for preset in ${PRESETS:-small medium}; do
  echo "=== gpt $preset ($(left)s left)"
  timeout $(( $(left) - 30 )) python3 tools/bench/train.py --model gpt --preset $preset \
    --json $OUT/train_$preset.json --plot $OUT/train_$preset.png > $OUT/train_$preset.txt 2>&1
  echo "rc=$?"; tail -${TAIL:-30} $OUT/train_$preset.txt
done
if [ -n "${CNN:-}" ]; then
  echo "=== cnn ($(left)s left)"
  timeout $(( $(left) - 30 )) python3 tools/bench/train.py --model cnn --json $OUT/train_cnn.json \
    --plot $OUT/train_cnn.png > $OUT/train_cnn.txt 2>&1; echo "rc=$?"; tail -25 $OUT/train_cnn.txt
fi
if [ -n "${SUITES:-}" ]; then
  echo "=== suites ($(left)s left): $SUITES"
  timeout $(( $(left) - 5 )) python3 -m pytest -q -p no:cacheprovider $SUITES > $OUT/suites.txt 2>&1
  echo "rc=$?"; grep -E "FAILED|ERROR" $OUT/suites.txt | head -20; tail -2 $OUT/suites.txt
fi
