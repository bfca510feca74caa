"""Graphs (ABI version 4): capture a stream's work once, replay it with one call.

    with aethercl.graph(dev) as g:      # captures the calling thread's current stream
        ...ops on dev...                # validated and recorded, not run
    g.replay()                          # enqueues the recorded work again (one C call)
    g.info()                            # {"device", "nodes", "kernels", "bytes_held"}
    g.close()                           # waits for its last replay, releases what it kept

Like torch.cuda.graph: the block records instead of running; each replay reads the current
contents of the buffers it names. A Graph is an OwnedHandle: closed once (close(), `with g:`, or
garbage collection)."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from .owned import OwnedHandle
from .streams import resolve


class Graph(OwnedHandle):
    """A captured graph of `device`; `handle` is its token once the capture has ended."""

    def __init__(self, device, stream=None):
        self.device = device
        self.handle: Optional[int] = None
        self._stream = resolve(device.lib, device.index, stream)  # fixed at construction
        self._capturing = False

    # ---- capture ------------------------------------------------------------------------------
    def begin(self) -> "Graph":
        if self.handle is not None or self._capturing:
            raise ValueError("this Graph has captured already; make a new one")
        self.device.lib.check("aethercl_graph_capture_begin", self.device.index, self._stream)
        self._capturing = True
        return self

    def end(self) -> "Graph":
        if not self._capturing:
            raise ValueError("this Graph is not capturing")
        self._capturing = False
        self.handle = self.device.lib.check_handle("aethercl_graph_capture_end",
                                                   self.device.index, self._stream)
        return self

    @property
    def capturing(self) -> bool:
        """Between begin() and end()."""
        return self._capturing

    def __enter__(self) -> "Graph":
        return self.begin() if not self._capturing else self

    def __exit__(self, exc_type, *exc) -> None:
        if not self._capturing:
            return
        self.end()
        if exc_type is not None:  # the block failed: what it recorded is not wanted
            self.close()

    # ---- use ----------------------------------------------------------------------------------
    def _require(self) -> int:
        if self._capturing:
            raise ValueError("the graph is still capturing (leave the with block first)")
        if self.handle is None:
            raise ValueError("the graph has been closed (or never captured)")
        return self.handle

    def replay(self, stream=None) -> None:
        """Enqueues the recorded work on stream (None: the calling thread's current stream of the
        graph's device) and returns; replays of one graph run one after another."""
        handle = self._require()
        self.device.lib.check("aethercl_graph_launch", handle,
                              resolve(self.device.lib, self.device.index, stream))

    launch = replay

    def info(self) -> Dict[str, Any]:
        """{"device", "nodes" (recorded operations), "kernels" (launches per replay),
        "bytes_held" (device memory kept for the graph alone)}."""
        return json.loads(self.device.lib.json_call("aethercl_graph_info", self._require()))

    def close(self) -> None:
        """Destroys the graph (after its last replay has run); idempotent."""
        self.destroy()

    def _release(self, handle: int) -> None:
        self.device.lib.check("aethercl_graph_destroy", handle)

    def __repr__(self) -> str:
        state = ("capturing" if self._capturing else
                 "closed" if self.handle is None else f"0x{self.handle:x}")
        return f"Graph({state}, device={self.device.index})"


def graph(device=None, stream=None) -> Graph:
    """A Graph that captures stream (None: the calling thread's current stream) of device (a
    Device or an index; None: the current device, else 0) while used as a `with` block."""
    from .device import _device_of
    return Graph(_device_of(device), stream)


__all__ = ["Graph", "graph"]
