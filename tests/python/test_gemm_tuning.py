"""GEMM tuning database end to end: a tuning file written by tools/tune_gemm.py is read by the
library for the matching device only, and the tuner evaluates, checks and stores candidates.
Numerics use the bound of test_matmul.py (float32 accumulation against float64 NumPy)."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from support.helpers import run_child

ROOT = Path(__file__).resolve().parents[2]
TUNER = ROOT / "tools" / "tune_gemm.py"
spec = importlib.util.spec_from_file_location("tune_gemm", TUNER)
tune_gemm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tune_gemm)

# Parameters the matmul variant tests build too (their programs are in the kernel cache).
DIRECT = "tile_m=16,tile_n=32,tile_k=1,wpt_m=2,wpt_n=16,pad=0,vec=8,a_kmajor=1,direct=1,dbuf=0"
TILED = "tile_m=32,tile_n=16,tile_k=5,wpt_m=2,wpt_n=4,pad=0,vec=1,a_kmajor=1,direct=0,dbuf=0"
PREFETCHED = TILED.replace("dbuf=0", "dbuf=1")


def device_key(lib, index):
    size = lib.aethercl_device_info(index, None, 0)
    import ctypes
    text = ctypes.create_string_buffer(size + 1)
    lib.aethercl_device_info(index, text, size + 1)
    info = json.loads(text.value.decode())
    version = lib.aethercl_version()
    return info["name"], info["driver_version"], (version.decode() if isinstance(version, bytes)
                                                  else version)


MATMUL_CHILD = """
    import os
    from support.helpers import Device
    lib.check("initialize_gpu", 0)
    device = Device(lib, 0)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 37, 41)).astype(np.float32)
    w = rng.standard_normal((41, 29)).astype(np.float32)
    ta, tw, tc = device.upload(a), device.upload(w), device.empty((3, 37, 29))
    lib.check("execute_matmul_on_gpu", 0, ta.handle, tw.handle, tc.handle, 3, 37, 29, 41)
    ref = np.matmul(a.astype(np.float64), w.astype(np.float64))
    bound = 8 * 2.0 ** -24 * np.sqrt(41) * np.matmul(np.abs(a.astype(np.float64)),
                                                     np.abs(w.astype(np.float64)))
    assert (np.abs(tc.numpy() - ref) <= bound).all() and tc.guard_intact()
    print("ok")
"""


def run_matmul_child(monkeypatch, tuning_file):
    monkeypatch.setenv("AETHERCL_TUNING_FILE", str(tuning_file))
    monkeypatch.setenv("AETHERCL_LOG_LEVEL", "trace")
    monkeypatch.delenv("AETHERCL_GEMM_PARAMS", raising=False)
    result = run_child(MATMUL_CHILD)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]
    return result.stderr


def test_tuning_file_is_used_for_its_device_only(lib, device, tmp_path, monkeypatch):
    name, driver, library = device_key(lib, device.index)
    path = tmp_path / "tuning.tsv"
    # The child multiplies 111 x 41 by 41 x 29: "small" for a tuned large tile of 128 rows.
    tune_gemm.store(path, ("Some Other Device", driver, library), DIRECT, DIRECT)
    tune_gemm.store(path, (name, driver + " (older)", library), TILED, TILED)
    log = run_matmul_child(monkeypatch, path)
    assert "(tuning file)" not in log and "GEMM tuning for" not in log
    tune_gemm.store(path, (name, driver, library), DIRECT.replace("tile_m=16", "tile_m=128"),
                    TILED)
    log = run_matmul_child(monkeypatch, path)
    assert "GEMM tuning for" in log
    assert f"{TILED} (tuning file)" in log  # 111 x 29 is smaller than the large tile
    assert path.read_text().count(name) == 2  # the older driver's entry is kept


def test_unusable_tuning_entries_fall_back(lib, device, tmp_path, monkeypatch):
    name, driver, library = device_key(lib, device.index)
    path = tmp_path / "tuning.tsv"
    path.write_text(f"{name}\t{driver}\t{library}\ttile_m=8,wpt_m=3\n")  # malformed entry
    log = run_matmul_child(monkeypatch, path)
    assert "GEMM tuning entry ignored" in log or "5 tab-separated fields" in log
    assert "(tuning file)" not in log


def test_tuner_space_holds_the_gpu_configurations():
    space = tune_gemm.first_sweep("gpu", "large")
    texts = [tune_gemm.params_text(p) for p in space]
    for wanted in ("tile_m=128,tile_n=128,tile_k=16,wpt_m=8,wpt_n=8",
                   "tile_m=128,tile_n=128,tile_k=8,wpt_m=8,wpt_n=8",
                   "tile_m=128,tile_n=64,tile_k=16,wpt_m=8,wpt_n=4"):
        assert any(t.startswith(wanted) and "vec=4" in t and "a_kmajor=1" in t for t in texts)
    # The H100's best single-buffer shape and 128x128 / 8x8 / K16 are swept with prefetching too,
    # and the second stage toggles prefetching of every tiled seed.
    for wanted in ("tile_m=64,tile_n=64,tile_k=16,wpt_m=8,wpt_n=8,pad=4,vec=4,a_kmajor=1,"
                   "direct=0,dbuf=1",
                   "tile_m=128,tile_n=128,tile_k=16,wpt_m=8,wpt_n=8,pad=4,vec=4,a_kmajor=1,"
                   "direct=0,dbuf=1"):
        assert wanted in texts[:16]  # within the default --max-candidates
    seed = tune_gemm.parse_params(TILED)
    assert [q["dbuf"] for q in tune_gemm.neighbours(seed)].count(1) == 1
    assert tune_gemm.neighbours(dict(seed, dbuf=1))[0] == seed
    # fits() mirrors gemm_params_problem: two buffers of local memory, none for the direct kernel.
    large = tune_gemm.parse_params("tile_m=128,tile_n=128,tile_k=32,wpt_m=8,wpt_n=8,pad=4")
    assert tune_gemm.fits(large, 1024, 48 * 1024)  # 33792 bytes
    assert not tune_gemm.fits(dict(large, dbuf=1), 1024, 48 * 1024)  # 67584 bytes
    assert tune_gemm.fits(dict(large, dbuf=1), 1024, 67584)
    assert not tune_gemm.fits(dict(tune_gemm.parse_params(DIRECT), dbuf=1), 1024, 48 * 1024)
    # Every first-sweep candidate fits an H100 (1024 items, 48 KiB local memory) and the
    # second stage keeps to valid parameters.
    for kind in ("gpu", "cpu"):
        for role in ("large", "small"):
            for p in tune_gemm.first_sweep(kind, role):
                assert tune_gemm.fits(p, 1024, 48 * 1024), (kind, role, p)
                for q in tune_gemm.neighbours(p):
                    assert q["wpt_n"] % q["vec"] == 0 and q["tile_n"] % q["wpt_n"] == 0


def test_tuner_evaluates_checks_and_stores(lib, device, tmp_path):
    out = tmp_path / "tuned.tsv"
    env = dict(os.environ)
    env.pop("AETHERCL_GEMM_PARAMS", None)
    build = Path(env.get("AETHERCL_BUILD_DIR", ROOT / "build"))
    bogus = TILED.replace("wpt_m=2", "wpt_m=3")  # refused by the library: must be skipped
    result = subprocess.run(
        [sys.executable, str(TUNER), "--build", str(build), "--out", str(out), "--sizes", "64",
         "--reps", "1", "--candidates", DIRECT, TILED, PREFETCHED, bogus],
        capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "failed" in result.stdout and "multiples" in result.stdout  # the bogus candidate
    name, driver, library = device_key(lib, device.index)
    fields = [line.split("\t") for line in out.read_text().splitlines()
              if not line.startswith("#")]
    assert len(fields) == 1 and fields[0][:3] == [name, driver, library]
    assert {fields[0][3], fields[0][4]} <= {DIRECT, TILED, PREFETCHED}
    # The prefetching candidate ran and was scored in both roles.
    rows = [line for line in result.stdout.splitlines() if f" {PREFETCHED}  [" in line]
    assert len(rows) == 2 and not any("failed" in row.split(PREFETCHED)[0] for row in rows)
    assert "built-in table line" in result.stdout
