"""Hostile cases of the graph functions (ABI version 4): bad graph and stream tokens of every kind,
foreign device indices (the single-device fallback of docs/ABI.md section 3.2), nested and missing
captures, launches into a capturing stream, destroyed graphs, and aethercl_graph_info's buffer
rules. Every case ends the captures it began and destroys the graphs it made."""
from __future__ import annotations

import ctypes
import json
from typing import List

from support.hostile_harness import (C_INVALID_ARGUMENT, C_INVALID_HANDLE, FOREIGN_GPU_INDICES,
                                     Case, Harness, fail)
from support.hostile_runtime_cases import bad_token, new_stream

GRAPH_TAG, STREAM_TAG, EVENT_TAG = 0xB3, 0xA5, 0xA7
NEVER_ISSUED_GRAPH = ((1 << 40) << 8) | GRAPH_TAG


def _graph(h: Harness, stream=None, work: bool = True) -> int:
    """A graph of one kernel launch captured on stream (NULL: the default stream)."""
    buffer = h.alloc(64)  # before the capture: h.alloc writes blocking
    if h.lib.aethercl_graph_capture_begin(h.index, stream) != 1:
        fail(f"setup: aethercl_graph_capture_begin failed: {h.lib.last_error()}")
    if work:
        if stream is None:
            ok = h.lib.aethercl_memset(h.index, buffer, 0, 64, 3, None)
        else:
            ok = h.lib.aethercl_memset(h.index, buffer, 0, 64, 3, stream)
        if ok != 1:
            h.lib.aethercl_graph_capture_end(h.index, stream)
            fail(f"setup: recording failed: {h.lib.last_error()}")
    graph = h.lib.aethercl_graph_capture_end(h.index, stream)
    if not graph:
        fail(f"setup: aethercl_graph_capture_end failed: {h.lib.last_error()}")
    h.graphs.append(graph)
    return graph


def _bad(h: Harness, kind: str, tag: int) -> int:
    """bad_token's kinds, and a destroyed graph."""
    if kind == "destroyed_graph":
        graph = _graph(h)
        h.graphs.remove(graph)
        if h.lib.aethercl_graph_destroy(graph) != 1:
            fail(f"setup: aethercl_graph_destroy failed: {h.lib.last_error()}")
        return graph
    return bad_token(h, kind, tag)


STREAM_KINDS = ("never_issued", "malformed", "buffer_handle", "host_pointer", "destroyed_stream",
                "event_token")
GRAPH_KINDS = ("never_issued", "malformed", "buffer_handle", "host_pointer", "stream_token",
               "destroyed_graph")


def _cleanup(h: Harness, stream=None) -> None:
    """Ends a capture a failed case may have left on stream, destroys the case's graphs."""
    leftover = h.lib.aethercl_graph_capture_end(h.index, stream)
    if leftover:
        h.lib.aethercl_graph_destroy(leftover)
    for graph in h.graphs:
        h.lib.aethercl_graph_destroy(graph)
    h.graphs.clear()


def graph_cases() -> List[Case]:
    cases: List[Case] = []

    def add(function, case_id, body):
        def run(h, body=body):
            if not hasattr(h, "graphs"):
                h.graphs = []
            try:
                body(h)
            finally:
                _cleanup(h)
        cases.append((f"{function}/{case_id}", run))

    # ---- capture_begin / capture_end ----------------------------------------------------------
    def begin_end(h, gpu=None, on_stream=False):
        gpu = h.index if gpu is None else gpu
        stream = new_stream(h) if on_stream else None
        h.function = "aethercl_graph_capture_begin"
        h.succeeded(h.lib.aethercl_graph_capture_begin(gpu, stream))
        h.function = "aethercl_graph_capture_end"
        graph = h.lib.aethercl_graph_capture_end(gpu, stream)
        h.succeeded(graph, True)
        h.graphs.append(graph)

    for function in ("aethercl_graph_capture_begin", "aethercl_graph_capture_end"):
        add(function, "baseline", lambda h: begin_end(h))
        add(function, "stream=created", lambda h: begin_end(h, on_stream=True))
        for gpu in FOREIGN_GPU_INDICES:
            add(function, f"gpu_index={gpu}", lambda h, gpu=gpu: begin_end(h, gpu))
        for kind in STREAM_KINDS:
            def bad_stream(h, function=function, kind=kind):
                stream = _bad(h, kind, STREAM_TAG)
                call = getattr(h.lib, function)
                failure = 0 if function.endswith("begin") else None
                h.refused(call(h.index, stream), failure, {C_INVALID_HANDLE}, ["stream"])
            add(function, f"stream={kind}", bad_stream)

    def nested(h):
        h.succeeded(h.lib.aethercl_graph_capture_begin(h.index, None))
        h.refused(h.lib.aethercl_graph_capture_begin(h.index, None), 0, {C_INVALID_ARGUMENT},
                  ["already capturing"])
    add("aethercl_graph_capture_begin", "nested", nested)

    def end_without_begin(h):
        h.refused(h.lib.aethercl_graph_capture_end(h.index, None), None, {C_INVALID_ARGUMENT},
                  ["not capturing"])
    add("aethercl_graph_capture_end", "without_begin", end_without_begin)

    def end_twice(h):
        _graph(h)
        h.refused(h.lib.aethercl_graph_capture_end(h.index, None), None, {C_INVALID_ARGUMENT},
                  ["not capturing"])
    add("aethercl_graph_capture_end", "twice", end_twice)

    # ---- launch / destroy / info: the graph token ----------------------------------------------
    def launch_ok(h, on_stream=False):
        stream = new_stream(h) if on_stream else None
        graph = _graph(h)
        h.succeeded(h.lib.aethercl_graph_launch(graph, stream))
        h.succeeded(h.lib.aethercl_graph_launch(graph, stream))
    add("aethercl_graph_launch", "baseline", lambda h: launch_ok(h))
    add("aethercl_graph_launch", "stream=created", lambda h: launch_ok(h, True))

    def launch_empty(h):
        graph = _graph(h, work=False)
        h.succeeded(h.lib.aethercl_graph_launch(graph, None))
    add("aethercl_graph_launch", "empty_graph", launch_empty)

    def destroy_ok(h):
        graph = _graph(h)
        h.lib.aethercl_graph_launch(graph, None)
        h.graphs.remove(graph)
        h.succeeded(h.lib.aethercl_graph_destroy(graph))
    add("aethercl_graph_destroy", "baseline", destroy_ok)

    def info_ok(h):
        graph = _graph(h)
        size = h.lib.aethercl_graph_info(graph, None, 0)
        h.succeeded(size, True)
        raw = ctypes.create_string_buffer(size + 1)
        h.succeeded(h.lib.aethercl_graph_info(graph, raw, size + 1), size)
        info = json.loads(raw.value.decode())
        if info != {"device": h.index, "nodes": 1, "kernels": 0, "bytes_held": 0}:
            fail(f"unexpected info {info}")
    add("aethercl_graph_info", "baseline", info_ok)

    def info_capacity(h, capacity, with_buffer):
        graph = _graph(h)
        size = h.lib.aethercl_graph_info(graph, None, 0)
        raw = ctypes.create_string_buffer(b"\x77" * 8, 8)
        got = h.lib.aethercl_graph_info(graph, raw if with_buffer else None, capacity)
        h.succeeded(got, size)
        if with_buffer and capacity == 1 and raw.raw != b"\x00" + b"\x77" * 7:
            fail(f"capacity 1 wrote {raw.raw!r}")
        if with_buffer and capacity == 8 and raw.raw[7:8] != b"\x00":
            fail(f"capacity 8 wrote no NUL at the end: {raw.raw!r}")
    add("aethercl_graph_info", "buffer=NULL_capacity=100", lambda h: info_capacity(h, 100, False))
    add("aethercl_graph_info", "capacity=1", lambda h: info_capacity(h, 1, True))
    add("aethercl_graph_info", "capacity=8", lambda h: info_capacity(h, 8, True))

    calls = {
        "aethercl_graph_launch": (lambda h, g: h.lib.aethercl_graph_launch(g, None), 0),
        "aethercl_graph_destroy": (lambda h, g: h.lib.aethercl_graph_destroy(g), 0),
        "aethercl_graph_info": (lambda h, g: h.lib.aethercl_graph_info(g, None, 0), 0),
    }
    for function, (call, failure) in calls.items():
        def null_graph(h, call=call, failure=failure):
            h.refused(call(h, None), failure, {C_INVALID_ARGUMENT}, ["graph", "NULL"])
        add(function, "graph=NULL", null_graph)
        for kind in GRAPH_KINDS:
            def bad_graph(h, call=call, failure=failure, kind=kind):
                h.refused(call(h, _bad(h, kind, GRAPH_TAG)), failure, {C_INVALID_HANDLE},
                          ["graph"])
            add(function, f"graph={kind}", bad_graph)

    # ---- launch: the stream ---------------------------------------------------------------------
    for kind in STREAM_KINDS:
        def launch_bad_stream(h, kind=kind):
            graph = _graph(h)
            h.refused(h.lib.aethercl_graph_launch(graph, _bad(h, kind, STREAM_TAG)), 0,
                      {C_INVALID_HANDLE}, ["stream"])
        add("aethercl_graph_launch", f"stream={kind}", launch_bad_stream)

    def launch_into_capture(h):
        graph = _graph(h)
        stream = new_stream(h)
        h.succeeded(h.lib.aethercl_graph_capture_begin(h.index, stream),
                    name="aethercl_graph_capture_begin")
        try:
            h.refused(h.lib.aethercl_graph_launch(graph, stream), 0, {C_INVALID_ARGUMENT},
                      ["capturing"])
        finally:
            inner = h.lib.aethercl_graph_capture_end(h.index, stream)
            if inner:
                h.graphs.append(inner)
    add("aethercl_graph_launch", "stream=capturing", launch_into_capture)
    return cases


__all__ = ["graph_cases"]
