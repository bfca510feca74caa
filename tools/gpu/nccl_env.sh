# Sourced by tools/gpu/nccl.sh and mpi_nccl.sh after env.sh: finds the libnccl.so.2 PyTorch ships
# under /opt/torch (the GPU machine has no other) and names it with AETHERCL_LIBNCCL; TORCH_PY is
# the interpreter that has PyTorch (NCCL's own figures are taken through it).
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
TORCH_PY=python3
[ -x /opt/torch/bin/python3 ] && TORCH_PY=/opt/torch/bin/python3
NCCL=$(find -L /opt/torch \( -path '*nvidia/nccl/lib/*' -o -path '*torch/lib/*' \) \
       -name 'libnccl.so.2*' -type f 2>/dev/null | head -1)
if [ -z "$NCCL" ]; then
  NCCL=$($TORCH_PY -c "import glob, os, torch; d = os.path.dirname(os.path.dirname(torch.__file__)); print((glob.glob(d + '/nvidia/nccl/lib/libnccl.so.2*') + glob.glob(d + '/torch/lib/libnccl.so.2*') + [''])[0])" 2>/dev/null)
fi
echo "libnccl: ${NCCL:-not found under /opt/torch}" | tee $OUT/nccl_path.txt
[ -n "$NCCL" ] && export AETHERCL_LIBNCCL=$NCCL
