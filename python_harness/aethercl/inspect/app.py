"""The inspector's WSGI application (Werkzeug routing, requests and responses): the token check,
the read-only JSON endpoints and the page."""
from __future__ import annotations

import hmac
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, Unauthorized
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from .history import History
from .sources import NOT_AVAILABLE, DriverSources

STATIC = Path(__file__).resolve().parent / "static"
KERNEL_ROWS_DEFAULT = 200
KERNEL_ROWS_MAX = 4096
READ_ONLY = ["GET"]   # Werkzeug adds HEAD to GET rules

# Nothing outside this server may be loaded by the page (it works offline by construction).
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                               "style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
}


def page_html() -> str:
    """index.html with the stylesheet and script inlined (one request, one token check)."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    return (html.replace("/*INSPECT_CSS*/", (STATIC / "inspect.css").read_text(encoding="utf-8"))
                .replace("/*INSPECT_JS*/", (STATIC / "inspect.js").read_text(encoding="utf-8")))


def summarize_streams(entries) -> list:
    """Streams seen in the kernel log window: launches and the newest enqueue time of each."""
    streams: Dict[Any, Dict[str, Any]] = {}
    for entry in entries:
        key = entry.get("stream")
        row = streams.setdefault(key, {"stream": key if key is not None else "default",
                                       "launches": 0, "last_queued_ns": 0})
        row["launches"] += 1
        row["last_queued_ns"] = max(row["last_queued_ns"], entry.get("queued_ns") or 0)
    return list(streams.values())


class InspectorApp:
    """Routes GET/HEAD requests that carry the token; everything else is refused."""

    def __init__(self, sources: DriverSources, history: History, token: str,
                 clock: Callable[[], float] = time.time):
        self.sources, self.history, self.token, self.clock = sources, history, token, clock
        self.page = page_html()
        self.urls = Map([
            Rule("/", methods=READ_ONLY, endpoint="page"),
            Rule("/gpus", methods=READ_ONLY, endpoint="gpus"),
            Rule("/gpus/<int:gpu>/state", methods=READ_ONLY, endpoint="state"),
            Rule("/gpus/<int:gpu>/allocations", methods=READ_ONLY, endpoint="allocations"),
            Rule("/gpus/<int:gpu>/kernel_log", methods=READ_ONLY, endpoint="kernel_log"),
            Rule("/events", methods=READ_ONLY, endpoint="events"),
            Rule("/training", methods=READ_ONLY, endpoint="training"),
        ])

    # --- plumbing ---
    def authorized(self, request: Request) -> bool:
        offered = request.args.get("token", "")
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            offered = header[len("Bearer "):].strip()
        return hmac.compare_digest(offered.encode(), self.token.encode())

    def __call__(self, environ, start_response):
        request = Request(environ)
        try:
            if not self.authorized(request):
                raise Unauthorized("a valid token is required (?token=... or "
                                   "'Authorization: Bearer ...'); it was printed at start")
            endpoint, values = self.urls.bind_to_environ(environ).match()
            response = getattr(self, "on_" + endpoint)(request, **values)
        except MethodNotAllowed:
            response = self.error(405, "the inspector is read-only: GET and HEAD only")
            response.headers["Allow"] = "GET, HEAD"
        except HTTPException as error:
            response = self.error(error.code or 500, error.description or error.name)
            if error.code == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="aethercl-inspect"'
        response.headers.update(SECURITY_HEADERS)
        return response(environ, start_response)

    @staticmethod
    def json(payload: Any, status: int = 200) -> Response:
        return Response(json.dumps(payload, allow_nan=False, default=str), status=status,
                        mimetype="application/json")

    def error(self, status: int, message: str) -> Response:
        return self.json({"error": message, "status": status}, status)

    def check_gpu(self, gpu: int) -> None:
        if gpu >= self.sources.device_count():
            raise NotFound(f"no device {gpu} (the driver sees {self.sources.device_count()})")

    # --- endpoints ---
    def on_page(self, request: Request) -> Response:
        return Response(self.page, mimetype="text/html")

    def on_gpus(self, request: Request) -> Response:
        return self.json({"pid": os.getpid(), "started": self.history.started,
                          "now": self.clock(), "devices": self.sources.devices(),
                          "kernel_log_available": self.sources.kernel_log_available})

    def on_state(self, request: Request, gpu: int) -> Response:
        self.check_gpu(gpu)
        stats = self.sources.memory_stats(gpu)
        entries = self.sources.kernel_log(gpu) or []
        memory = None
        if stats is not None:
            memory = {key: stats.get(key) for key in (
                "bytes_in_use", "bytes_cached", "bytes_reserved", "peak_bytes_reserved",
                "limit_bytes", "live_buffers", "pool_hits", "pool_misses",
                "staging_pending_bytes", "staging_cached_bytes", "programs", "kernels")}
        return self.json({"device": gpu, "initialized": stats is not None, "now": self.clock(),
                          "memory": memory, "streams": summarize_streams(entries),
                          "streams_source": "kernel log" if self.sources.kernel_log_available
                          else NOT_AVAILABLE,
                          "history": self.history.memory(gpu)})

    def on_allocations(self, request: Request, gpu: int) -> Response:
        self.check_gpu(gpu)
        stats = self.sources.memory_stats(gpu)
        now = self.clock()
        rows = []
        for buffer in (stats or {}).get("labelled_buffers", []):
            seen = self.history.first_seen(gpu, buffer["handle"], now)
            rows.append({"handle": buffer["handle"], "label": buffer.get("label"),
                         "bytes": buffer.get("bytes"), "dtype": buffer.get("dtype"),
                         "age_s": max(0.0, now - seen)})
        rows.sort(key=lambda row: -row["bytes"])
        live = (stats or {}).get("live_buffers", 0)
        return self.json({"device": gpu, "initialized": stats is not None,
                          "live_buffers": live, "labelled": len(rows),
                          "unlabelled": max(0, live - len(rows)), "allocations": rows})

    def on_kernel_log(self, request: Request, gpu: int) -> Response:
        self.check_gpu(gpu)
        limit = request.args.get("limit", KERNEL_ROWS_DEFAULT, type=int)
        limit = max(1, min(KERNEL_ROWS_MAX, limit or KERNEL_ROWS_DEFAULT))
        entries = self.sources.kernel_log(gpu)
        if entries is None:
            return self.json({"device": gpu, "available": False, "message": NOT_AVAILABLE,
                              "total": 0, "entries": []})
        self.history.note_kernels(gpu, {e.get("kernel") for e in entries[-limit:]})
        newest = []
        for entry in reversed(entries[-limit:]):
            start, end = entry.get("start_ns"), entry.get("end_ns")
            newest.append(dict(entry, duration_ns=(end - start) if start is not None
                               and end is not None else None))
        return self.json({"device": gpu, "available": True, "total": len(entries),
                          "now_ns": time.monotonic_ns(), "entries": newest})

    def on_events(self, request: Request) -> Response:
        since = request.args.get("since", 0, type=int) or 0
        return self.json({"events": self.history.events(since)})

    def on_training(self, request: Request) -> Response:
        losses = self.history.losses()
        return self.json({"reported": bool(losses), "losses": losses})
