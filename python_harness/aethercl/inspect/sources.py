"""What the inspector reads from the driver: device list, per-device memory state, labelled
allocations and the kernel log, all through read-only JSON entry points."""
from __future__ import annotations

import ctypes
import json
import threading
import time
from typing import Any, Dict, List, Optional

from ..library import Library

NOT_AVAILABLE = "not available in this library build"


def read_json_text(function, index: int) -> Optional[str]:
    """Calls a (gpu_index, char* buffer, size_t capacity) JSON entry point; None when it fails.
    The text may grow between sizing and reading (another thread allocates or launches), so a
    read that did not fit is repeated with more room."""
    size = function(index, None, 0)
    while size:
        capacity = size + size // 4 + 1024
        buffer = ctypes.create_string_buffer(capacity)
        size = function(index, buffer, capacity)
        if 0 < size < capacity:
            return buffer.value.decode("utf-8", "replace")
    return None


class DriverSources:
    """Read-only views of one loaded library. Every method may run on a server thread while the
    program runs; the entry points used here only read (none initialises a device)."""

    def __init__(self, library: Library):
        self.lib = library
        # Indexing a CDLL returns a fresh function object: our prototypes stay ours.
        self._kernel_log = self._optional("aethercl_kernel_log",
                                          [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t])
        self._kernel_log_cache: Dict[int, Any] = {}
        self._kernel_log_lock = threading.Lock()

    def _optional(self, name: str, argtypes):
        try:
            function = self.lib.cdll[name]
        except AttributeError:
            return None
        function.argtypes = argtypes
        function.restype = ctypes.c_size_t
        return function

    @property
    def kernel_log_available(self) -> bool:
        return self._kernel_log is not None

    def device_count(self) -> int:
        return int(self.lib.cdll.aethercl_device_count())

    def device_info(self, index: int) -> Dict[str, Any]:
        return json.loads(self.lib.json_call("aethercl_device_info", index))

    def devices(self) -> List[Dict[str, Any]]:
        return [dict(self.device_info(i), index=i) for i in range(self.device_count())]

    def memory_stats(self, index: int) -> Optional[Dict[str, Any]]:
        """The device's memory statistics, or None while it is not initialised."""
        text = read_json_text(self.lib.cdll.aethercl_memory_stats, index)
        return None if text is None else json.loads(text)

    def kernel_log(self, index: int, max_age_s: float = 0.5) -> Optional[List[Dict[str, Any]]]:
        """The device's kernel log (oldest first), None when the build lacks it. Reads are cached
        for max_age_s so that several viewers cost one read of the (up to 4,096-entry) log."""
        if self._kernel_log is None:
            return None
        with self._kernel_log_lock:
            cached = self._kernel_log_cache.get(index)
            now = time.monotonic()
            if cached is not None and now - cached[0] < max_age_s:
                return cached[1]
            text = read_json_text(self._kernel_log, index)
            entries: List[Dict[str, Any]] = json.loads(text) if text else []
            self._kernel_log_cache[index] = (now, entries)
            return entries
