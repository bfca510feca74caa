"""The runtime examples of python_harness/examples/ (your own kernels: vector add, tiled matmul,
reduction, SPIR-V, typed memory) run on the test device and report a correct result (each checks
itself against NumPy and exits non-zero otherwise). The training examples there have their own
tests."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "python_harness" / "examples"
NAMES = ["reduction", "spirv_kernel", "tiled_matmul", "typed_memory", "vector_add"]


def test_the_examples_exist():
    assert {p.stem for p in EXAMPLES.glob("*.py")} >= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_and_is_correct(name, gpu_index):
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--device",
                             str(gpu_index)], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "correct" in result.stdout and "WRONG" not in result.stdout
