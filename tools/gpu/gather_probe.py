"""Probe on the lent NVIDIA machine: does the index family's source (fastmath.cl + index.cl, with
the family's build options) build as a user program, as it is and with its `index` names renamed,
and does aethercl_gather run? Each step in its own process (a compiler fault kills it)."""
import sys, faulthandler, numpy as np
faulthandler.enable()
sys.path.insert(0, 'python_harness')
import aethercl
from aethercl import train as ops
dev = aethercl.Device(0)
mode = sys.argv[1]
options = "-cl-std=CL1.2 -DAETHERCL_FP64=1 -DAETHERCL_MAX_WG=1024 -DAETHERCL_FAST_MATH=0"
src = open('kernels/fastmath.cl').read() + "\n" + open('kernels/index.cl').read()
if mode == "family":
    print("family source built:", dev.compile(src, options))
elif mode == "renamed":
    print("renamed source built:", dev.compile(src.replace("index", "idxbuf"), options))
else:
    x = np.arange(7, dtype=np.float32); idx = np.array([1, 0, 6, 2, 9], np.int32)
    bx, bi, by = dev.buffer(x), dev.buffer(idx), dev.buffer(size=5)
    ops.gather(dev.index, ops.index_desc((7,), (5,), 0, bx.handle, bi.handle, by.handle))
    print("gather:", by.read())
