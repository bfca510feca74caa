"""Memory exhaustion under AETHERCL_MEMORY_LIMIT (in a child): allocations are refused cleanly
(NULL, AETHERCL_OUT_OF_MEMORY, a message), the pool releases its cache and retries before it
refuses, and after freeing the driver works normally."""
import json
import os

from support.helpers import run_child

EXHAUST = r"""
import json
from support.hostile_cases import Harness
MiB = 1 << 20
def stats():
    return json.loads(lib.json_call("aethercl_memory_stats", 0))
assert lib.initialize_gpu(0) == 1
h = Harness(lib, 0)
report = {"limit": stats()["limit_bytes"]}
# 1. fill the pool's cache: 40 x 1 MiB allocated, then freed (cached, not released)
small = [lib.allocate_gpu_memory(0, MiB) for _ in range(40)]
assert all(small), lib.last_error()
for handle in small:
    lib.free_gpu_memory(0, handle)
report["cached_before"] = stats()["bytes_cached"]
trims_before = stats()["pool_trims"]
# 2. allocate 3 MiB blocks (another size class) until refused: the cache must be released first
big = []
while len(big) < 1000:
    handle = lib.allocate_gpu_memory(0, 3 * MiB)
    if not handle:
        break
    big.append(handle)
report["big_blocks"] = len(big)
report["refusal"] = [lib.last_error(), lib.last_error_code()]
after = stats()
report["trims"] = after["pool_trims"] - trims_before
report["cached_at_refusal"] = after["bytes_cached"]
report["reserved_at_refusal"] = after["bytes_reserved"]
# 3. a refused allocation changed nothing: the live blocks still work; a compute call still runs
ok = lib.write_host_to_gpu_blocking(0, big[0], 0, 16, b"0123456789abcdef") == 1
out = bytes(16)
import ctypes
buf = ctypes.create_string_buffer(16)
ok = (ok and lib.read_gpu_to_host_blocking(0, big[0], 0, 16, buf) == 1
      and buf.raw == b"0123456789abcdef")
report["live_blocks_work"] = ok
# 4. a transfer staging buffer or a kernel must not fail just because the pool is full
h.roundtrip_ok = True
try:
    lib.free_gpu_memory(0, big.pop())   # room for the round trip's three small buffers
    h.roundtrip()
except Exception as error:
    h.roundtrip_ok = repr(error)
report["roundtrip_when_nearly_full"] = h.roundtrip_ok
# 5. free everything: back to normal, the whole limit usable again
for handle in big:
    lib.free_gpu_memory(0, handle)
again = [lib.allocate_gpu_memory(0, 3 * MiB) for _ in range(len(big))]
report["reallocated"] = sum(1 for a in again if a)
for handle in again:
    lib.free_gpu_memory(0, handle)
h.roundtrip()
report["live_buffers_end"] = stats()["live_buffers"]
print(json.dumps(report))
"""


def test_allocation_until_refused_is_clean_and_recoverable():
    here = os.path.dirname(os.path.abspath(__file__))
    backup = dict(os.environ)
    os.environ["AETHERCL_MEMORY_LIMIT"] = "64M"
    try:
        result = run_child(f"import sys; sys.path.insert(0, {here!r})\n" + EXHAUST, timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(backup)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["limit"] == 64 << 20
    assert report["cached_before"] >= 40 << 20
    # 3 MiB blocks: at most 21 fit in 64 MiB; the 40 MiB cache must not have stood in the way
    assert 18 <= report["big_blocks"] <= 21, report
    message, code = report["refusal"]
    assert code == 4, report  # AETHERCL_OUT_OF_MEMORY
    assert message.startswith("allocate_gpu_memory: ") and "exhausted" in message, message
    assert report["trims"] >= 1, "the pool did not release its cache before refusing"
    assert report["cached_at_refusal"] == 0
    assert report["reserved_at_refusal"] <= 64 << 20
    assert report["live_blocks_work"] is True
    assert report["roundtrip_when_nearly_full"] is True, report
    assert report["reallocated"] == report["big_blocks"] - 1
    assert report["live_buffers_end"] == 0
