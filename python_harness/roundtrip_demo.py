"""A matrix round trip through the driver on the default device, verified against NumPy."""
import json
import sys

import numpy as np

from aethercl import AetherCLError, Library


def main() -> int:
    lib = Library()
    gpu = 0
    lib.check("initialize_gpu", gpu)
    info = json.loads(lib.json_call("aethercl_device_info", gpu))
    print(f"device {gpu}: {info['name']} ({info['platform']}, {info['type']}, "
          f"{info['compute_units']} compute units)")
    rng = np.random.default_rng(2026)
    a = rng.standard_normal((61, 37)).astype(np.float32)
    b = rng.standard_normal((61, 37)).astype(np.float32)
    handles = [lib.check_handle("allocate_gpu_memory", gpu, a.nbytes) for _ in range(3)]
    try:
        lib.check("write_host_to_gpu_blocking", gpu, handles[0], 0, a.nbytes, a.ctypes.data)
        lib.check("write_host_to_gpu_blocking", gpu, handles[1], 0, b.nbytes, b.ctypes.data)
        lib.check("execute_add_on_gpu", gpu, handles[0], handles[1], handles[2], a.size)
        back = np.empty_like(a)
        total = np.empty_like(a)
        lib.check("read_gpu_to_host_blocking", gpu, handles[0], 0, a.nbytes, back.ctypes.data)
        lib.check("read_gpu_to_host_blocking", gpu, handles[2], 0, a.nbytes, total.ctypes.data)
    except AetherCLError as error:
        print(f"driver call failed: {error}", file=sys.stderr)
        return 1
    finally:
        for handle in handles:
            lib.free_gpu_memory(gpu, handle)
        lib.shutdown_driver()
    round_trip_ok = np.array_equal(back, a)
    add_ok = np.array_equal(total, (a.astype(np.float64) + b).astype(np.float32))
    print(f"round trip of a {a.shape[0]}x{a.shape[1]} float32 matrix: "
          f"{'verified' if round_trip_ok else 'MISMATCH'}")
    print(f"A + B on the device vs NumPy: {'verified' if add_ok else 'MISMATCH'}")
    return 0 if round_trip_ok and add_ok else 1


if __name__ == "__main__":
    sys.exit(main())
