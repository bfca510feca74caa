"""pytest fixtures: the driver loaded through the shim, one initialised device per session."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python_harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aethercl import Library  # noqa: E402
from support.helpers import Device  # noqa: E402
from support.sampling import full_matrix_requested, pairwise_cover, strength_cap  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "matrix(strength=2): a parameter matrix whose cases are sampled (every value, "
        "and with strength 2 every pair of values of two parameters, kept) unless "
        "AETHERCL_TEST_FULL=1 (tools/aethercl test --full); AETHERCL_TEST_STRENGTH=1 lowers every "
        "matrix to strength 1, 0 to one case")


def pytest_collection_modifyitems(config, items):
    """Samples the cases of tests marked `matrix`; test ids named on the command line run as
    named."""
    if full_matrix_requested() or any("::" in str(arg) for arg in config.args):
        return
    groups = {}
    for item in items:
        if item.get_closest_marker("matrix") and hasattr(item, "callspec"):
            groups.setdefault((item.module.__name__, item.originalname), []).append(item)
    dropped = []
    cap = strength_cap()
    for group in groups.values():
        cases = [{name: repr(value) for name, value in item.callspec.params.items()}
                 for item in group]
        strength = group[0].get_closest_marker("matrix").kwargs.get("strength", 2)
        kept = set(pairwise_cover(cases, strength if cap is None else min(strength, cap)))
        dropped += [item for index, item in enumerate(group) if index not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        dropped_ids = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in dropped_ids]


@pytest.fixture(scope="session")
def lib():
    return Library()


@pytest.fixture(scope="session")
def gpu_index():
    return int(os.environ.get("AETHERCL_TEST_DEVICE", "0"))


@pytest.fixture(scope="session")
def device(lib, gpu_index):
    """The initialised test device; tests that shut the driver down run in child processes."""
    lib.check("initialize_gpu", gpu_index)
    return Device(lib, gpu_index)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name, so a failure reproduces."""
    import zlib
    import numpy as np
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(params=["device-default", "64"])
def row_group(request, monkeypatch):
    """Runs a row-wise test with the device's own work-group size (one item per row on CPUs) and
    with groups of up to 64 items (the multi-item tree reductions GPUs use)."""
    if request.param != "device-default":
        monkeypatch.setenv("AETHERCL_ROW_GROUP", request.param)
    return request.param


@pytest.fixture(params=["device-default", "gpu-forms"])
def kernel_forms(request, monkeypatch):
    """Runs a test with the device's own kernel forms (the float8 CPU forms on PoCL) and with
    AETHERCL_CPU_KERNELS=0, the GPU forms (local-memory tiles, one element per item)."""
    if request.param == "gpu-forms":
        monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
    return request.param


@pytest.fixture
def scope(device):
    """Tensors of a training-op test: guard bytes checked and buffers freed at the end."""
    from support.train_helpers import Scope
    s = Scope(device)
    yield s
    s.close()


@pytest.fixture
def fp32_precision(lib, device):
    """The GEMM suites' matmul precision: DEFAULT means FP32, restored whatever a test set."""
    from aethercl import gemm
    lib.check("aethercl_set_matmul_precision", device.index, gemm.COMPUTE_FP32)
    yield
    lib.check("aethercl_set_matmul_precision", device.index, gemm.COMPUTE_FP32)
