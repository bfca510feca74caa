"""Many machines through MPI, on loopback: `mpirun --oversubscribe -n 2` runs the data-parallel
demo (python_harness/mpi_train_demo.py, one device per rank) over TCP on 127.0.0.1 and the ranks
end with identical parameters; a rank that dies ends the whole job quickly with a message instead
of a hang. Needs Open MPI and mpi4py (tools/aethercl setup installs both; under CI=true their
absence fails instead of skipping)."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "python_harness" / "mpi_train_demo.py"
LOOPBACK = ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
            "--mca", "oob_tcp_if_include", "lo"]


def mpirun():
    path = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mpirun or mpi4py missing: tools/aethercl setup installs them")
        pytest.skip("mpirun or mpi4py missing (tools/aethercl setup installs them)")
    return path


def run(extra, timeout):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    command = [mpirun(), "--oversubscribe", "-n", "2", *LOOPBACK, sys.executable, str(DEMO),
               "--embed_dim", "16", "--num_layers", "1", "--num_heads", "2", "--d_ff", "32",
               "--max_len", "16", "--batch_size", "4", *extra]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return result, time.perf_counter() - start


def test_mpirun_two_ranks_train_identically():
    result, _ = run(["--steps", "3", "--timeout", "120"], timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "[mpi] 2 ranks" in output and "step 3: loss" in output, output
    assert "parameters identical on every rank" in output, output


def test_a_dying_rank_ends_the_job():
    result, seconds = run(["--steps", "5", "--timeout", "30", "--die-rank", "1",
                           "--die-step", "1"], timeout=240)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "rank 1 exits abruptly at step 1" in output, output
    assert seconds < 180, f"the job took {seconds:.0f} s to end"
