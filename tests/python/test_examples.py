"""Every example in python_harness/examples/ runs on the test device and reports a correct result
(each example checks itself against NumPy and exits non-zero otherwise)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "python_harness" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py"))


def test_the_examples_are_the_documented_set():
    assert {"vector_add", "tiled_matmul", "reduction", "spirv_kernel", "typed_memory"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_and_is_correct(name, gpu_index):
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--device",
                             str(gpu_index)], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "correct" in result.stdout and "WRONG" not in result.stdout
