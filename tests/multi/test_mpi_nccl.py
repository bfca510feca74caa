"""Communicators across processes through NCCL (aethercl_comm_create_rank) under `mpirun -n 2`:
every collective in f32/f16/bf16 on odd counts against float64 with NCCL's bound (outputs
poisoned, guard bytes checked) on ordinary and aethercl_comm_alloc buffers, MAX refused,
aethercl.distributed's NCCL path equal to its MPI path within that bound, and the MPI training
demo on the NCCL path (mpi_nccl_worker.py is one rank).

The engines are the files AETHERCL_LIBCUDA / AETHERCL_LIBNCCL name: on CPU CI the ctest
multi_device_mpi_nccl points them at the fake engines of tests/vendor/ (their NCCL meets across
processes through a shared file, each rank using its own PoCL CPU device: POCL_DEVICES gives every
rank two, local rank r takes device r); tools/gpu/mpi_nccl.sh points them at a real libnccl.so.2
on a 2-GPU machine. Without them the mpirun tests skip; the refusal without engines always runs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_mpi import LOOPBACK, mpirun

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "mpi_nccl_worker.py"
DEMO = ROOT / "python_harness" / "mpi_train_demo.py"


def engines_env():
    if not (os.environ.get("AETHERCL_LIBCUDA") or os.environ.get("AETHERCL_LIBNCCL")):
        pytest.skip("AETHERCL_LIBCUDA / AETHERCL_LIBNCCL unset (ctest multi_device_mpi_nccl sets "
                    "them to the fake engines; tools/gpu/mpi_nccl.sh to the real ones)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", AETHERCL_VENDOR_ENGINES="1",
               FAKE_NCCL_TIMEOUT="60")
    if "fake" in env.get("AETHERCL_LIBNCCL", "") and "POCL_DEVICES" not in os.environ:
        env["POCL_DEVICES"] = "pthread pthread"
    return env


def run_ranks(arguments, timeout=240):
    env = engines_env()
    command = [mpirun(), "--oversubscribe", "-n", "2", *LOOPBACK, sys.executable, *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return result, result.stdout + result.stderr


def test_collectives_across_two_processes():
    result, output = run_ranks([str(WORKER), "collectives"])
    assert result.returncode == 0, output
    for rank in (0, 1):
        for what in ("collectives ordinary", "collectives comm_alloc", "max refused"):
            assert f"RANK {rank} OK {what}" in output, output


def test_distributed_nccl_path_matches_mpi_path():
    result, output = run_ranks([str(WORKER), "distributed"])
    assert result.returncode == 0, output
    assert "RANK 0 OK distributed nccl == mpi" in output, output
    assert "RANK 1 OK distributed nccl == mpi" in output, output


def test_mpi_demo_trains_on_the_nccl_path():
    result, output = run_ranks([str(DEMO), "--embed_dim", "16", "--num_layers", "1",
                                "--num_heads", "2", "--d_ff", "32", "--max_len", "16",
                                "--batch_size", "4", "--steps", "2", "--timeout", "120"])
    assert result.returncode == 0, output
    assert "nccl path" in output and "step 2: loss" in output, output
    assert "parameters identical on every rank" in output, output


REFUSAL = """
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from aethercl import Library
lib = Library()
lib.check("initialize_gpu", 0)
uid = ctypes.create_string_buffer(128)
assert lib.aethercl_comm_unique_id(uid, 128) == 0
print("unique_id", lib.last_error_code(), lib.last_error())
assert not lib.aethercl_comm_create_rank(2, 0, uid, 128, 0)
print("create_rank", lib.last_error_code(), lib.last_error())
"""


def test_without_engines_both_functions_answer_not_implemented():
    env = dict(os.environ, AETHERCL_VENDOR_ENGINES="0")
    result = subprocess.run([sys.executable, "-c", REFUSAL, str(ROOT / "python_harness")],
                            capture_output=True, text=True, timeout=120, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for function in ("unique_id", "create_rank"):
        line = next(l for l in output.splitlines() if l.startswith(function + " "))
        assert line.split()[1] == "9", line   # AETHERCL_NOT_IMPLEMENTED
        assert "the vendor engines are not loaded (AETHERCL_VENDOR_ENGINES=0)" in line, line
