# Sourced by every tools/gpu/*.sh: NVIDIA's OpenCL through the carried ICD loader (.devcarry/debs)
# and the carried build (.devcarry/build); WITH_POCL=1 shows PoCL too; left() is the seconds left
# of LIMIT (default 585) since the script started.
START=$(date +%s)
P=/tmp/pfx; mkdir -p $P /tmp/vendors; for f in .devcarry/debs/*.deb; do dpkg -x $f $P; done
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
[ -n "${WITH_POCL:-}" ] && cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/
D=$PWD; B=$D/.devcarry/build
export OCL_ICD_VENDORS=/tmp/vendors LD_LIBRARY_PATH=$B:$P/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
export AETHERCL_CACHE_DIR=/tmp/kcache AETHERCL_LIBRARY=$B/driver.so AETHERCL_BUILD_DIR=$B
export PYTHONPATH=$D/python_harness
left() { echo $(( ${LIMIT:-585} - ($(date +%s) - START) )); }
