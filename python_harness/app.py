"""AetherCL demo: a float64 matrix product through the host-memory ("simulated") driver API.

Follows the flow of the AetherCL README: a GPU manager with one GPU object; the GPU initialises the
driver, allocates two host blocks, writes A and B into them, multiplies them on the device, reads
the product back, verifies it against NumPy and frees the blocks (C, then B, then A). The driver is
loaded with plain ctypes as ./simulated_driver.so (./simulated_driver.dll on Windows) from the
current working directory, exactly as the original client does, and shut down at exit.

    cd build && venv/bin/python ../python_harness/app.py     # or: tools/aethercl demo
"""
import atexit
import ctypes
import json
import os
import sys

import numpy as np

LIBRARY_NAME = "simulated_driver.dll" if sys.platform == "win32" else "simulated_driver.so"
ROWS_A, INNER, COLS_B = 5, 4, 6


def load_driver():
    """The driver from the current directory with the app.py signatures, or None."""
    path = os.path.join(".", LIBRARY_NAME)
    print(f"Loading the simulated driver from {os.path.abspath(path)}")
    try:
        driver = ctypes.CDLL(path)
    except OSError as error:
        print(f"Error: cannot load {path}: {error}")
        return None
    c_int, c_size_t, c_void_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
    c_uint64 = ctypes.c_uint64
    int_ptr = ctypes.POINTER(ctypes.c_int)
    signatures = {
        "initialize_gpu": (c_int, [c_int]),
        "shutdown_driver": (None, []),
        "simulated_kernel_allocate": (c_uint64, [c_int, c_size_t]),
        "simulated_kernel_free": (None, [c_int, c_uint64, c_size_t]),
        "simulated_kernel_write": (None, [c_int, c_uint64, c_size_t, c_void_p]),
        "simulated_kernel_read": (None, [c_int, c_uint64, c_size_t, c_void_p]),
        "simulated_matrix_multiply": (c_uint64, [c_int, c_uint64, c_uint64, c_size_t, c_size_t,
                                                 int_ptr, int_ptr]),
        "simulated_get_compute_unit_count": (ctypes.c_uint, [c_int]),
    }
    try:
        for name, (restype, argtypes) in signatures.items():
            function = getattr(driver, name)
            function.restype = restype
            function.argtypes = argtypes
    except AttributeError as error:
        print(f"Error: the driver lacks a function: {error}")
        return None
    # Optional AetherCL extensions: a readable device description and the last error.
    if hasattr(driver, "aethercl_device_info"):
        driver.aethercl_device_info.restype = c_size_t
        driver.aethercl_device_info.argtypes = [c_int, ctypes.c_char_p, c_size_t]
    if hasattr(driver, "aethercl_last_error"):
        driver.aethercl_last_error.restype = ctypes.c_char_p
        driver.aethercl_last_error.argtypes = []
    atexit.register(driver.shutdown_driver)
    return driver


def last_error(driver) -> str:
    if hasattr(driver, "aethercl_last_error"):
        message = driver.aethercl_last_error()
        if message:
            return f" ({message.decode('utf-8', 'replace')})"
    return ""


class GPU:
    """One device of the driver, addressed by its index in every call."""

    def __init__(self, driver, index: int):
        self.driver = driver
        self.index = index
        self.initialized = False

    def initialize(self) -> bool:
        if not self.initialized:
            self.initialized = self.driver.initialize_gpu(self.index) == 1
            if not self.initialized:
                print(f"GPU {self.index}: initialisation failed{last_error(self.driver)}")
        return self.initialized

    def describe(self) -> str:
        units = self.driver.simulated_get_compute_unit_count(self.index)
        if hasattr(self.driver, "aethercl_device_info"):
            size = self.driver.aethercl_device_info(self.index, None, 0)
            if size:
                text = ctypes.create_string_buffer(size + 1)
                self.driver.aethercl_device_info(self.index, text, size + 1)
                info = json.loads(text.value.decode("utf-8"))
                return f"{info['name']} ({info['platform']}, {info['type']}, {units} compute units)"
        return f"{units} compute units"

    def allocate(self, size: int) -> int:
        address = self.driver.simulated_kernel_allocate(self.index, size)
        if not address:
            raise MemoryError(f"allocation of {size} bytes failed{last_error(self.driver)}")
        return address

    def _check_void(self, function: str) -> None:
        """The void functions report a refusal only through the (optional) last error."""
        message = last_error(self.driver)
        if message:
            raise RuntimeError(f"{function} failed{message}")

    def free(self, address: int, size: int) -> None:
        self.driver.simulated_kernel_free(self.index, address, size)
        self._check_void("simulated_kernel_free")

    def write(self, address: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        self.driver.simulated_kernel_write(self.index, address, array.nbytes, array.ctypes.data)
        self._check_void("simulated_kernel_write")

    def read(self, address: int, shape, dtype=np.float64) -> np.ndarray:
        out = np.empty(shape, dtype)
        self.driver.simulated_kernel_read(self.index, address, out.nbytes, out.ctypes.data)
        self._check_void("simulated_kernel_read")
        return out

    def matrix_multiply(self, address_a: int, address_b: int, shape_a, shape_b) -> int:
        size_a = shape_a[0] * shape_a[1] * 8
        size_b = shape_b[0] * shape_b[1] * 8
        dims_a = (ctypes.c_int * 2)(*shape_a)
        dims_b = (ctypes.c_int * 2)(*shape_b)
        address_c = self.driver.simulated_matrix_multiply(self.index, address_a, address_b,
                                                          size_a, size_b, dims_a, dims_b)
        if not address_c:
            raise RuntimeError(f"simulated_matrix_multiply failed{last_error(self.driver)}")
        return address_c


class GPUManager:
    """The GPUs the demo uses: like the original client, exactly one, index 0."""

    def __init__(self, driver):
        self.gpus = [GPU(driver, 0)]

    def get_gpu(self, index: int) -> GPU:
        return self.gpus[index]


def run(driver) -> int:
    gpu = GPUManager(driver).get_gpu(0)
    if not gpu.initialize():
        return 1
    print(f"GPU {gpu.index}: {gpu.describe()}")

    a = np.random.rand(ROWS_A, INNER)
    b = np.random.rand(INNER, COLS_B)
    print(f"Matrix A: shape={a.shape}, dtype={a.dtype}")
    print(f"Matrix B: shape={b.shape}, dtype={b.dtype}")

    addresses = []  # freed in reverse order: C, then B, then A, as the original client does
    try:
        addresses.append((gpu.allocate(a.nbytes), a.nbytes))
        addresses.append((gpu.allocate(b.nbytes), b.nbytes))
        gpu.write(addresses[0][0], a)
        gpu.write(addresses[1][0], b)
        address_c = gpu.matrix_multiply(addresses[0][0], addresses[1][0], a.shape, b.shape)
        addresses.append((address_c, ROWS_A * COLS_B * 8))
        c = gpu.read(address_c, (ROWS_A, COLS_B))
        while addresses:
            gpu.free(*addresses.pop())
    except (MemoryError, RuntimeError) as error:
        print(f"Error: {error}")
        while addresses:
            gpu.driver.simulated_kernel_free(gpu.index, *addresses.pop())
        return 1

    print(f"Result C = A @ B: shape={c.shape}, dtype={c.dtype}")
    print(c)
    if np.allclose(c, a @ b):
        print("verified: the driver's product matches NumPy")
        return 0
    print(f"MISMATCH: largest difference {np.abs(c - a @ b).max():.3e}")
    return 1


def main() -> int:
    driver = load_driver()
    if driver is None:
        return 1
    return run(driver)


if __name__ == "__main__":
    sys.exit(main())
