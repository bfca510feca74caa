"""The inspector's bounded memory of the past: memory samples, first sightings of buffers and
kernels, the event feed and reported training losses, each a fixed-length ring."""
from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict, deque
from typing import Any, Deque, Dict, List, Optional, Tuple

MEMORY_SAMPLES = 2400        # 10 minutes at the default 0.25 s period
EVENTS = 500
LOSSES = 5000
SEEN_BUFFERS = 20000         # first-seen times of labelled buffers (oldest forgotten first)


class History:
    """Thread-safe rings. Each append is O(1) and the total memory is bounded by the constants
    above whatever the program does."""

    def __init__(self, memory_samples: int = MEMORY_SAMPLES, events: int = EVENTS,
                 losses: int = LOSSES):
        self.started = time.time()
        self._lock = threading.Lock()
        self._memory: Dict[int, Deque[Dict[str, Any]]] = {}
        self._memory_length = memory_samples
        self._events: Deque[Dict[str, Any]] = deque(maxlen=events)
        self._event_ids = itertools.count(1)
        self._losses: Deque[Dict[str, Any]] = deque(maxlen=losses)
        self._first_seen: "OrderedDict[Tuple[int, str], float]" = OrderedDict()
        self._kernels_seen: Dict[int, set] = {}
        self._peak: Dict[int, int] = {}

    # --- memory ---
    def add_memory_sample(self, index: int, stats: Dict[str, Any], when: float) -> None:
        sample = {"t": when, "bytes_in_use": stats.get("bytes_in_use", 0),
                  "bytes_reserved": stats.get("bytes_reserved", 0),
                  "bytes_cached": stats.get("bytes_cached", 0),
                  "peak_bytes_reserved": stats.get("peak_bytes_reserved", 0),
                  "live_buffers": stats.get("live_buffers", 0)}
        with self._lock:
            ring = self._memory.setdefault(index, deque(maxlen=self._memory_length))
            first = not ring
            ring.append(sample)
            previous_peak = self._peak.get(index, 0)
            self._peak[index] = sample["peak_bytes_reserved"]
        if first:
            self.add_event("device", f"device {index} initialised: sampling its memory", index)
        elif sample["peak_bytes_reserved"] > previous_peak * 1.05 + 1:
            self.add_event("memory", f"device {index}: new peak of "
                           f"{sample['peak_bytes_reserved']:,} bytes reserved", index)

    def memory(self, index: int) -> List[Dict[str, Any]]:
        with self._lock:
            return list(self._memory.get(index, ()))

    # --- allocations: when a labelled buffer was first seen ---
    def first_seen(self, index: int, handle: str, now: float) -> float:
        key = (index, handle)   # tokens are never reused
        with self._lock:
            seen = self._first_seen.get(key)
            if seen is None:
                seen = self._first_seen[key] = now
                while len(self._first_seen) > SEEN_BUFFERS:
                    self._first_seen.popitem(last=False)
            return seen

    # --- kernels: an event the first time each kernel name appears ---
    def note_kernels(self, index: int, names) -> None:
        with self._lock:
            seen = self._kernels_seen.setdefault(index, set())
            new = [n for n in names if n not in seen]
            seen.update(new)
        for name in new[:20]:
            self.add_event("kernel", f"device {index}: first launch of {name}", index)

    # --- events ---
    def add_event(self, kind: str, message: str, device: Optional[int] = None,
                  **fields: Any) -> Dict[str, Any]:
        event = dict(fields, id=next(self._event_ids), t=time.time(), kind=kind,
                     message=message, device=device)
        with self._lock:
            self._events.append(event)
        return event

    def events(self, since: int = 0) -> List[Dict[str, Any]]:
        with self._lock:
            return [e for e in self._events if e["id"] > since]

    # --- training loss ---
    def add_loss(self, step: int, loss: float, split: str) -> None:
        with self._lock:
            self._losses.append({"step": int(step), "split": split,
                                 "loss": float(loss) if math.isfinite(loss) else None,
                                 "t": time.time()})

    def losses(self) -> List[Dict[str, Any]]:
        with self._lock:
            return list(self._losses)
