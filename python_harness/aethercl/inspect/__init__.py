"""The inspector: `aethercl.inspect.serve(port=...)` starts a background web server in this
process that shows the driver's devices, memory over time, labelled allocations, the kernel log,
an event feed and the training loss the frontend reports (report_loss/report_event).

Safe by default: it binds 127.0.0.1, every request needs the random token printed at start, every
endpoint only reads, its history is a set of fixed-length rings, and while nobody watches it costs
one memory-statistics read per sampling period (report_* are a global check when it is off)."""
from __future__ import annotations

import atexit
import ipaddress
import logging
import secrets
import sys
import threading
import time
from typing import Optional

from ..device import default_library
from ..library import Library
from .history import History
from .sources import NOT_AVAILABLE, DriverSources

__all__ = ["Inspector", "NOT_AVAILABLE", "active", "is_loopback", "report_event", "report_loss",
           "serve"]

log = logging.getLogger("aethercl.inspect")
_active: Optional["Inspector"] = None
_active_lock = threading.Lock()


class Inspector:
    """A running inspector: `url` (with the token), `token`, `port`; close() stops it."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", library: Optional[Library] = None,
                 sample_period_s: float = 0.5, token: Optional[str] = None):
        from werkzeug.serving import WSGIRequestHandler, make_server

        from .app import InspectorApp

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args, **kwargs):  # no line per request on the program's stderr
                pass

        self.library = library if library is not None else default_library()
        self.sources = DriverSources(self.library)
        self.history = History()
        self.token = token or secrets.token_urlsafe(24)
        self.host = host
        self.sample_period_s = float(sample_period_s)
        self.app = InspectorApp(self.sources, self.history, self.token)
        self.server = make_server(host, int(port), self.app, threaded=True,
                                  request_handler=QuietHandler)
        self.port = self.server.server_port
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self.server.serve_forever, name="aethercl-inspect-http",
                             daemon=True),
            threading.Thread(target=self._sample_forever, name="aethercl-inspect-sampler",
                             daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        self.history.add_event("inspector", f"inspector listening on {host}:{self.port}")

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/?token={self.token}"

    def _sample_forever(self) -> None:
        count = self.sources.device_count()
        while not self._stop.is_set():
            try:
                self._sample(count)
            except Exception as error:  # the sampler must outlive a bad read; say so once
                self.history.add_event("inspector", f"memory sampling failed: {error!r}")
                log.warning("aethercl.inspect: memory sampling failed: %r", error)
                return
            self._stop.wait(self.sample_period_s)

    def _sample(self, count: int) -> None:
        now = time.time()
        for index in range(count):
            stats = self.sources.memory_stats(index)
            if stats is not None:
                self.history.add_memory_sample(index, stats, now)
                for buffer in stats.get("labelled_buffers", []):
                    self.history.first_seen(index, buffer["handle"], now)

    def close(self) -> None:
        global _active
        if self._stop.is_set():
            return
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        with _active_lock:
            if _active is self:
                _active = None

    def __enter__(self) -> "Inspector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(port: int = 0, host: str = "127.0.0.1", library: Optional[Library] = None,
          sample_period_s: float = 0.5, announce: bool = True) -> Inspector:
    """Starts the inspector on host:port (port 0 picks a free one) and prints its URL with the
    token on stderr. Binding anything but a loopback address is the caller's explicit choice.
    One inspector per process: a second call returns the running one."""
    global _active
    with _active_lock:
        if _active is not None:
            return _active
        inspector = _active = Inspector(port, host, library, sample_period_s)
    atexit.register(inspector.close)
    if announce:
        print(f"[aethercl.inspect] serving on {inspector.url}", file=sys.stderr, flush=True)
        if not is_loopback(host):
            print(f"[aethercl.inspect] warning: bound to {host}: other machines can reach it; "
                  "the token is its only protection", file=sys.stderr, flush=True)
    return inspector


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def active() -> Optional[Inspector]:
    """The running inspector of this process, or None."""
    return _active


def report_loss(step: int, loss: float, split: str = "train") -> None:
    """Records a training (or validation) loss for the page; nothing when no inspector runs."""
    inspector = _active
    if inspector is not None:
        inspector.history.add_loss(step, loss, split)


def report_event(kind: str, message: str, **fields) -> None:
    """Adds a line to the event feed; nothing when no inspector runs."""
    inspector = _active
    if inspector is not None:
        inspector.history.add_event(kind, message, **fields)
