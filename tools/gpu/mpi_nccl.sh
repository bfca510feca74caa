#!/bin/bash
# Issue 35 item 4 on a machine with two NVIDIA GPUs: communicators across processes through NCCL.
# One command, from the checkout there (setup as tools/gpu/tests.sh):  tools/gpu/mpi_nccl.sh
#  1. finds the libnccl.so.2 PyTorch ships under /opt/torch (as tools/gpu/nccl.sh does) and names
#     it with AETHERCL_LIBNCCL; checks mpirun and mpi4py (the test needs both);
#  2. unless TESTS=0: runs tests/multi/test_mpi_nccl.py with the real engines: mpirun -n 2, local
#     rank r on GPU r;
#  3. unless SCALING=0: tokens/s of 2 processes x 1 GPU (mpirun -n 2, aethercl.distributed's NCCL
#     path: tools/bench/scaling_mpi.py) against one process driving both GPUs
#     (ocl_llm.DataParallel: tools/bench/scaling.py), same model (PRESET, default gemm), global
#     batch and batches, and prints the ratio. MPI_PATH=mpi measures the host path instead.
# mpirun runs with --allow-run-as-root --oversubscribe; NCCL_DEBUG=INFO shows NCCL's transport
# (NCCL_DEBUG=INFO tools/gpu/mpi_nccl.sh). Logs go to $OUT.
. "$(dirname "$0")/env.sh"
. "$(dirname "$0")/nccl_env.sh"
export AETHERCL_LIBCUDA=${AETHERCL_LIBCUDA:-libcuda.so.1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=$(command -v mpirun)
if [ -z "$MPIRUN" ] || ! python3 -c "import mpi4py" 2>/dev/null; then
  echo "mpirun ($MPIRUN) or mpi4py missing: apt-get install openmpi-bin libopenmpi-dev and pip" \
       "install mpi4py, then run again"
  exit 1
fi
MPI="$MPIRUN --allow-run-as-root --oversubscribe -n 2 -x AETHERCL_LIBNCCL -x AETHERCL_LIBCUDA -x PYTHONPATH -x LD_LIBRARY_PATH -x OCL_ICD_VENDORS -x AETHERCL_LIBRARY -x AETHERCL_CACHE_DIR ${NCCL_DEBUG:+-x NCCL_DEBUG}"

if [ "${TESTS:-1}" != 0 ]; then
echo "=== tests/multi/test_mpi_nccl.py, real engines ($(left)s left)"
timeout $(( $(left) / 2 )) python3 -m pytest -q -p no:cacheprovider -rs tests/multi/test_mpi_nccl.py \
  > $OUT/mpi_nccl_tests.txt 2>&1; echo "rc=$?"
grep -E "passed|failed|error" $OUT/mpi_nccl_tests.txt | tail -2
grep -E "^FAILED|^ERROR|SKIPPED" $OUT/mpi_nccl_tests.txt | head -12
fi

if [ "${SCALING:-1}" != 0 ]; then
  PRESET=${PRESET:-gemm}
  echo "=== 2 processes x 1 GPU (mpirun, ${MPI_PATH:-nccl} path), preset $PRESET ($(left)s left)"
  # The interpreter by its full path: mpirun's PATH may find another python3 (without NumPy).
  timeout $(( $(left) / 2 )) $MPI "$(command -v python3)" tools/bench/scaling_mpi.py --preset $PRESET --steps 6 \
    --path ${MPI_PATH:-nccl} --json $OUT/scaling_mpi.json > $OUT/scaling_mpi.txt 2>&1
  echo "rc=$?"; grep -v "^\[aethercl warning\]" $OUT/scaling_mpi.txt | grep -m2 -A14 Traceback
  tail -3 $OUT/scaling_mpi.txt
  echo "=== 1 process x 2 GPUs (ocl_llm.DataParallel), preset $PRESET ($(left)s left)"
  timeout $(( $(left) - 10 )) python3 tools/bench/scaling.py --preset $PRESET --steps 6 \
    --devices 0,1 --json $OUT/scaling_dp.json 2>&1 | tail -4
  python3 - "$OUT/scaling_mpi.json" "$OUT/scaling_dp.json" <<'PY'
import json, sys
try:
    mpi, dp = (json.load(open(p)) for p in sys.argv[1:3])
except (OSError, ValueError) as error:
    sys.exit(f"no ratio: {error}")
ratio = mpi["tokens_per_s"] / dp["parallel_tokens_per_s"]
print(f"2 processes ({mpi['path']}): {mpi['tokens_per_s']:.0f} tokens/s; 1 process x 2 GPUs: "
      f"{dp['parallel_tokens_per_s']:.0f} tokens/s; ratio {ratio:.2f} (one GPU alone: "
      f"{dp['single_tokens_per_s']:.0f})")
PY
fi
