"""Hostile cases of the version-3 runtime functions (streams, events, host memory, transfers),
generated from the manifest by parameter name: every stream, event, buffer, host-pointer,
out-pointer and span parameter of every such function gets its hostile values, plus the rules of
single functions (flags, the default stream, overlap, memset values, host_free pointers)."""
from __future__ import annotations

import ctypes
from typing import Dict, List

from support.hostile_harness import *  # noqa: F401,F403 (constants, Harness, fail, Case)
from support.hostile_harness import Case, Harness, fail

# ---- AETHERCL_3 runtime functions (streams, events, host memory, transfers) -----------------
# Generated from the manifest by parameter name: every stream, event, buffer, host-pointer,
# out-pointer and span parameter of every such function gets its hostile values.
STREAM_TAG, EVENT_TAG = 0xA5, 0xA7
STREAM_PARAMS = ("stream",)
EVENT_PARAMS = ("event", "start", "end")
BUFFER_PARAMS = ("buffer", "dst", "src")
OUT_PARAMS = ("done", "ms")
SPAN_SIZE = 64  # bytes of every buffer the cases allocate


def new_stream(h: Harness, timing: bool = False) -> int:
    stream = h.lib.aethercl_stream_create(h.index, 1 if timing else 0)
    if not stream:
        fail(f"setup: aethercl_stream_create failed: {h.lib.last_error()}")
    h.streams.append(stream)
    return stream


def _new_event(h: Harness) -> int:
    event = h.lib.aethercl_event_record(h.index, new_stream(h, timing=True))
    if not event:
        fail(f"setup: aethercl_event_record failed: {h.lib.last_error()}")
    h.events.append(event)
    return event


def _new_pinned(h: Harness, nbytes: int = SPAN_SIZE) -> int:
    pointer = h.lib.aethercl_host_alloc(h.index, nbytes)
    if not pointer:
        fail(f"setup: aethercl_host_alloc failed: {h.lib.last_error()}")
    h.pinned.append(pointer)
    return pointer


def _host(h: Harness, nbytes: int = SPAN_SIZE) -> int:
    buffer = ctypes.create_string_buffer(b"\x09" * nbytes, nbytes)
    h.keep.append(buffer)
    return ctypes.addressof(buffer)


def _valid_args(h: Harness, symbol) -> Dict[str, object]:
    """A valid value for every parameter, by name."""
    args: Dict[str, object] = {}
    for p in symbol.parameters:
        n = p.name
        if n == "gpu_index":
            args[n] = h.index
        elif n == "flags":
            args[n] = 0
        elif n in STREAM_PARAMS:
            args[n] = new_stream(h)
        elif n in EVENT_PARAMS:
            args[n] = _new_event(h)
        elif n in BUFFER_PARAMS:
            args[n] = h.alloc(SPAN_SIZE, 3)
        elif n in ("offset", "dst_offset", "src_offset", "value"):
            args[n] = 0
        elif n == "size":
            args[n] = SPAN_SIZE if symbol.name == "aethercl_host_alloc" else 16
        elif n in ("source", "destination"):
            args[n] = _host(h)
        elif n == "host_ptr":
            args[n] = _new_pinned(h)
        elif n == "done":
            args[n] = ctypes.byref(ctypes.c_int(0))
        elif n == "ms":
            args[n] = ctypes.byref(ctypes.c_float(0))
        else:
            raise ValueError(f"{symbol.name}: no valid value for parameter {n}")
    if symbol.name == "aethercl_copy":  # two distinct buffers: no overlap
        args["src"] = h.alloc(SPAN_SIZE, 4)
    if symbol.name == "aethercl_host_free":
        h.pinned.remove(args["host_ptr"])  # the call itself frees it
    return args


def _invoke(h: Harness, symbol, args: Dict[str, object]):
    return getattr(h.lib, symbol.name)(*(args[p.name] for p in symbol.parameters))


def _failure(symbol):
    return None if symbol.return_type == "void*" else 0


def bad_token(h: Harness, kind: str, tag: int) -> int:
    """A token that is not what the call wants: never issued (with the wanted kind's tag),
    malformed, another kind's (buffer, host pointer, stream, event) or destroyed."""
    if kind == "never_issued":
        return ((1 << 40) << 8) | tag
    if kind == "malformed":
        return MALFORMED
    if kind == "buffer_handle":
        return h.alloc(16)
    if kind == "host_pointer":
        return _host(h)
    if kind == "destroyed_stream":
        stream = h.lib.aethercl_stream_create(h.index, 0)
        h.lib.aethercl_stream_destroy(h.index, stream)
        return stream
    if kind == "destroyed_event":
        event = h.lib.aethercl_event_record(h.index, None)
        h.lib.aethercl_event_destroy(event)
        return event
    if kind == "event_token":
        return _new_event(h)
    if kind == "stream_token":
        return new_stream(h)
    raise ValueError(kind)


def runtime_cases(symbols) -> List[Case]:
    cases: List[Case] = []
    runtime = [s for s in symbols if s.version == "AETHERCL_3" and
               (s.name.startswith("aethercl_stream_") or s.name.startswith("aethercl_event_") or
                s.name in ("aethercl_host_alloc", "aethercl_host_free", "aethercl_write_async",
                           "aethercl_read_async", "aethercl_copy", "aethercl_memset"))]

    def add(symbol, case_id, function):
        cases.append((f"{symbol.name}/{case_id}", function))

    for symbol in runtime:
        names = [p.name for p in symbol.parameters]

        def baseline(h, symbol=symbol):
            args = _valid_args(h, symbol)
            result = _invoke(h, symbol, args)
            if symbol.name == "aethercl_stream_create" and result:
                h.streams.append(result)
            if symbol.name == "aethercl_event_record" and result:
                h.events.append(result)
            if symbol.name == "aethercl_host_alloc" and result:
                h.pinned.append(result)
            if symbol.name == "aethercl_stream_destroy":
                h.streams.remove(args["stream"])
            if symbol.name == "aethercl_event_destroy":
                h.events.remove(args["event"])
            if symbol.name == "aethercl_stream_current":
                h.succeeded(True, True)  # NULL is the default stream: only the error must be clear
            else:
                h.succeeded(result, True if symbol.return_type == "void*" else 1)
        add(symbol, "baseline", baseline)

        if "gpu_index" in names:
            for gpu in FOREIGN_GPU_INDICES:
                def foreign(h, symbol=symbol, gpu=gpu):
                    args = dict(_valid_args(h, symbol), gpu_index=gpu)
                    result = _invoke(h, symbol, args)
                    for kind, bucket in (("aethercl_stream_create", h.streams),
                                         ("aethercl_event_record", h.events),
                                         ("aethercl_host_alloc", h.pinned)):
                        if symbol.name == kind and result:
                            bucket.append(result)
                    if symbol.name == "aethercl_stream_destroy":
                        h.streams.remove(args["stream"])
                    if symbol.name == "aethercl_stream_current":
                        h.succeeded(True, True)
                    else:
                        h.succeeded(result, True if symbol.return_type == "void*" else 1)
                add(symbol, f"gpu_index={gpu}", foreign)

        for name in names:
            if name in STREAM_PARAMS:
                kinds = ("never_issued", "malformed", "buffer_handle", "host_pointer",
                         "destroyed_stream", "event_token")
                tag = STREAM_TAG
            elif name in EVENT_PARAMS:
                kinds = ("never_issued", "malformed", "buffer_handle", "host_pointer",
                         "destroyed_event", "stream_token")
                tag = EVENT_TAG
            else:
                kinds = ()
            for kind in kinds:
                def bad(h, symbol=symbol, name=name, kind=kind, tag=tag):
                    args = _valid_args(h, symbol)
                    args[name] = bad_token(h, kind, tag)
                    h.refused(_invoke(h, symbol, args), _failure(symbol), {C_INVALID_HANDLE},
                              [name])
                add(symbol, f"{name}={kind}", bad)
            if name in EVENT_PARAMS:
                def null_event(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), _failure(symbol), {C_INVALID_ARGUMENT},
                              [name, "NULL"])
                add(symbol, f"{name}=NULL", null_event)
            if name in BUFFER_PARAMS:
                for kind in ("NULL",) + BAD_TOKENS:
                    def bad_buffer(h, symbol=symbol, name=name, kind=kind):
                        args = _valid_args(h, symbol)
                        args[name] = None if kind == "NULL" else h.token(kind)
                        h.refused(_invoke(h, symbol, args), 0,
                                  {C_INVALID_ARGUMENT, C_INVALID_HANDLE},
                                  [name, "NULL" if kind == "NULL" else TOKEN_WORDS[kind]])
                    add(symbol, f"{name}={kind}", bad_buffer)
            if name in OUT_PARAMS:
                def null_out(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), 0, {C_INVALID_ARGUMENT}, [name, "NULL"])
                add(symbol, f"{name}=NULL", null_out)
            if name in ("source", "destination"):
                def null_host(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = None
                    h.refused(_invoke(h, symbol, args), 0, {C_INVALID_ARGUMENT}, [name, "NULL"])
                add(symbol, f"{name}=NULL", null_host)

                def zero_null(h, symbol=symbol, name=name):
                    args = dict(_valid_args(h, symbol), size=0)
                    args[name] = None
                    h.succeeded(_invoke(h, symbol, args))
                add(symbol, f"size=0_{name}=NULL", zero_null)

                def pinned(h, symbol=symbol, name=name):
                    args = _valid_args(h, symbol)
                    args[name] = _new_pinned(h)
                    h.succeeded(_invoke(h, symbol, args))
                    h.succeeded(h.lib.aethercl_synchronize(h.index), name="aethercl_synchronize")
                add(symbol, f"{name}=pinned", pinned)

        # Spans of every (buffer, offset) pair against SPAN_SIZE-byte buffers.
        pairs = [(b, o) for b, o in (("buffer", "offset"), ("dst", "dst_offset"),
                                     ("src", "src_offset")) if b in names and o in names]
        spans = [(0, SPAN_SIZE + 1), (SPAN_SIZE, 1), (SPAN_SIZE + 1, 0), (1, SIZE_MAX),
                 (SIZE_MAX, 2), (2**63, 2**63), (SIZE_MAX, 0)]
        for buffer, offset_name in pairs:
            for offset, size in spans:
                def span(h, symbol=symbol, buffer=buffer, offset_name=offset_name, offset=offset,
                         size=size):
                    args = dict(_valid_args(h, symbol), size=size)
                    args[offset_name] = offset
                    words = [offset_name]
                    if symbol.name == "aethercl_copy":
                        # The other range gets a buffer that holds the size where it can, so the
                        # refusal is about this one; a size beyond it fails both ranges.
                        other = "src" if buffer == "dst" else "dst"
                        args[other] = h.alloc(1 << 20, 4)
                        if size > 1 << 20:
                            words = [("dst_offset", "src_offset")]
                    host = args.get("source") or args.get("destination")
                    h.refused(_invoke(h, symbol, args), 0, {C_OUT_OF_RANGE}, words)
                    if h.contents(args[buffer], SPAN_SIZE)[:4] not in (b"\x03" * 4, b"\x04" * 4):
                        fail("a refused call changed the buffer")
                    if host is not None and ctypes.string_at(host, 4) != b"\x09" * 4:
                        fail("a refused call changed host memory")
                add(symbol, f"{offset_name}={offset},size={size}", span)

    # Function-specific rules.
    by_name = {s.name: s for s in runtime}
    if "aethercl_stream_create" in by_name:
        symbol = by_name["aethercl_stream_create"]
        for flags in (2, 3, 0x80000000, 0xFFFFFFFF):
            add(symbol, f"flags=0x{flags:x}", lambda h, flags=flags: h.refused(
                h.lib.aethercl_stream_create(h.index, flags), None, {C_INVALID_ARGUMENT},
                ["flags"]))

        def timing(h):
            stream = h.lib.aethercl_stream_create(h.index, 1)
            h.succeeded(stream, True)
            h.streams.append(stream)
        add(symbol, "flags=TIMING", timing)
    if "aethercl_stream_destroy" in by_name:
        symbol = by_name["aethercl_stream_destroy"]
        add(symbol, "stream=NULL", lambda h: h.refused(
            h.lib.aethercl_stream_destroy(h.index, None), 0, {C_INVALID_ARGUMENT},
            ["default stream"]))

        def twice(h):
            stream = h.lib.aethercl_stream_create(h.index, 0)
            h.succeeded(h.lib.aethercl_stream_destroy(h.index, stream))
            h.refused(h.lib.aethercl_stream_destroy(h.index, stream), 0, {C_INVALID_HANDLE},
                      ["destroyed"])
        add(symbol, "twice", twice)
    for name in ("aethercl_stream_set_current", "aethercl_stream_synchronize",
                 "aethercl_event_record", "aethercl_write_async", "aethercl_read_async",
                 "aethercl_copy", "aethercl_memset"):
        if name not in by_name:
            continue
        symbol = by_name[name]

        def null_stream(h, symbol=symbol):
            args = dict(_valid_args(h, symbol), stream=None)
            result = _invoke(h, symbol, args)
            if symbol.name == "aethercl_event_record" and result:
                h.events.append(result)
            h.succeeded(result, True if symbol.return_type == "void*" else 1)
        add(symbol, "stream=NULL_is_the_default_stream", null_stream)
    if "aethercl_event_elapsed_ms" in by_name:
        symbol = by_name["aethercl_event_elapsed_ms"]

        def untimed(h):
            start = h.lib.aethercl_event_record(h.index, None)
            h.events.append(start)
            h.refused(h.lib.aethercl_event_elapsed_ms(start, _new_event(h),
                                                      ctypes.byref(ctypes.c_float())),
                      0, {C_INVALID_ARGUMENT}, ["timing"])
        add(symbol, "start_on_a_stream_without_timing", untimed)
    if "aethercl_host_alloc" in by_name:
        symbol = by_name["aethercl_host_alloc"]
        add(symbol, "size=0", lambda h: h.refused(
            h.lib.aethercl_host_alloc(h.index, 0), None, {C_INVALID_ARGUMENT}, ["size is 0"]))
        for size in (SIZE_MAX, 2**63):
            add(symbol, f"size={size}", lambda h, size=size: h.refused(
                h.lib.aethercl_host_alloc(h.index, size), None,
                {C_OUT_OF_MEMORY, C_DEVICE_ERROR}))
    if "aethercl_host_free" in by_name:
        symbol = by_name["aethercl_host_free"]
        add(symbol, "host_ptr=NULL", lambda h: h.succeeded(h.lib.aethercl_host_free(None)))
        bad_pointers = {
            "stack_pointer": lambda h: _host(h),
            "inside_an_allocation": lambda h: _new_pinned(h) + 8,
            "device_buffer_handle": lambda h: h.alloc(16),
        }
        for case_id, make in bad_pointers.items():
            add(symbol, case_id, lambda h, make=make: h.refused(
                h.lib.aethercl_host_free(make(h)), 0, {C_INVALID_HANDLE}, ["host_ptr"]))

        def double_free(h):
            pointer = h.lib.aethercl_host_alloc(h.index, 64)
            h.succeeded(h.lib.aethercl_host_free(pointer))
            h.refused(h.lib.aethercl_host_free(pointer), 0, {C_INVALID_HANDLE}, ["freed"])
        add(symbol, "double_free", double_free)
    if "aethercl_copy" in by_name:
        symbol = by_name["aethercl_copy"]
        for dst_offset, src_offset, size in ((0, 0, 16), (8, 0, 16), (0, 15, 16), (16, 0, 17)):
            def overlap(h, dst_offset=dst_offset, src_offset=src_offset, size=size):
                buffer = h.alloc(SPAN_SIZE, 3)
                h.refused(h.lib.aethercl_copy(h.index, buffer, dst_offset, buffer, src_offset,
                                              size, None), 0, {C_INVALID_ARGUMENT}, ["overlap"])
                if h.contents(buffer, SPAN_SIZE) != b"\x03" * SPAN_SIZE:
                    fail("a refused copy changed the buffer")
            add(symbol, f"overlap_dst{dst_offset}_src{src_offset}_size{size}", overlap)

        def adjacent(h):
            buffer = h.alloc(SPAN_SIZE, 3)
            h.succeeded(h.lib.aethercl_copy(h.index, buffer, 16, buffer, 0, 16, None))
        add(symbol, "same_buffer_adjacent_ranges", adjacent)
    if "aethercl_memset" in by_name:
        symbol = by_name["aethercl_memset"]
        for value in (-1, 256, 0x1234, INT_MIN, INT_MAX):
            def memset_value(h, value=value):
                buffer = h.alloc(SPAN_SIZE, 3)
                h.succeeded(h.lib.aethercl_memset(h.index, buffer, 4, 8, value, None))
                want = b"\x03" * 4 + bytes([value & 0xFF]) * 8 + b"\x03" * (SPAN_SIZE - 12)
                if h.contents(buffer, SPAN_SIZE) != want:
                    fail(f"memset({value}) wrote {h.contents(buffer, SPAN_SIZE)!r}")
            add(symbol, f"value={value}", memset_value)
    return cases
