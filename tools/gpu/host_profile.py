"""Host time of one `bench train` GPT step and where it goes (cProfile), on whatever library
AETHERCL_LIBRARY names: the do-nothing library (build/driver_null.so) gives the frontend's own
cost, the real one adds the driver's. PRESET (default small), PREC (tf32), SORT (tottime), TOP."""
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tools" / "bench"), str(ROOT / "python_harness")]

import train_ours  # noqa: E402
from ocl_llm.runtime import ocl_initialize, set_matmul_precision  # noqa: E402
from train_common import GPT_PRESETS, gpt_batches  # noqa: E402

device = ocl_initialize(0, verbose=False)
set_matmul_precision(os.environ.get("PREC", "tf32"))
sizes = dict(GPT_PRESETS[os.environ.get("PRESET", "small")])
run = train_ours._Run("gpt", sizes)
batches = gpt_batches(sizes, 4, seed=2)
for i in range(3):
    run.step(batches[i % 4])
device.synchronize()
steps = 10
start = time.perf_counter()
for i in range(steps):
    run.step(batches[i % 4])
device.synchronize()
print(f"ms per step: {(time.perf_counter() - start) / steps * 1e3:.2f}")
profile = cProfile.Profile()
profile.enable()
for i in range(steps):
    run.step(batches[i % 4])
profile.disable()
device.synchronize()
pstats.Stats(profile).sort_stats(os.environ.get("SORT", "tottime")).print_stats(
    int(os.environ.get("TOP", "25")))
