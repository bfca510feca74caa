"""Strict JSON checks for everything the library emits: the raw bytes must be well-formed UTF-8
(no overlong forms, no encoded surrogates, nothing above U+10FFFF), and parse as exactly one JSON
value under RFC 8259 with nothing lenient allowed: no raw control characters in strings, no NaN
or Infinity, no duplicate keys, no lone surrogates written as \\u escapes.

Use parse_strict(raw_bytes) on any output (device info, memory statistics, trace summary, trace
file, kernel log...), or call_strict(lib, function, *args) for a `size_t f(..., char*, size_t)`
entry point, which also checks the sizing protocol (returned length == bytes written)."""
from __future__ import annotations

import ctypes
import json

__all__ = ["StrictJSONError", "call_strict", "parse_strict", "raw_json"]


class StrictJSONError(ValueError):
    pass


def _reject_constant(name):
    raise StrictJSONError(f"non-standard JSON constant {name}")


def _no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise StrictJSONError(f"duplicate keys {duplicates}")
    return dict(pairs)


def _check_strings(value, path="$"):
    """Every string (keys included) is free of surrogate code points (from \\uD800-style escapes,
    which Python's json accepts)."""
    if isinstance(value, str):
        bad = [hex(ord(ch)) for ch in value if 0xD800 <= ord(ch) <= 0xDFFF]
        if bad:
            raise StrictJSONError(f"lone surrogate {bad[0]} in the string at {path}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, f"{path} key")
            _check_strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{path}[{index}]")


def parse_strict(raw: bytes):
    """The parsed value of raw (bytes as emitted); raises StrictJSONError for anything that is not
    strict JSON in well-formed UTF-8."""
    if not isinstance(raw, (bytes, bytearray)):
        raise TypeError("parse_strict takes the raw bytes, not decoded text")
    try:
        text = bytes(raw).decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise StrictJSONError(f"not well-formed UTF-8: {error}") from error
    try:
        value = json.loads(text, strict=True, parse_constant=_reject_constant,
                           object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as error:
        raise StrictJSONError(f"not strict JSON: {error}") from error
    _check_strings(value)
    return value


def raw_json(lib, function: str, *args) -> bytes:
    """The exact bytes a `size_t f(..., char* buffer, size_t capacity)` entry point writes, after
    checking that the sizing call (NULL, 0) and the filling call agree on the length and that the
    output is NUL-terminated right after it."""
    call = getattr(lib.cdll if hasattr(lib, "cdll") else lib, function)
    size = call(*args, None, 0)
    if size == 0:
        raise StrictJSONError(f"{function} failed: {lib.last_error()}")
    buffer = ctypes.create_string_buffer(b"\x77" * (size + 8), size + 8)
    written = call(*args, buffer, size + 1)
    if written != size:
        raise StrictJSONError(f"{function}: sizing call said {size} bytes, filling call {written}")
    raw = buffer.raw
    if raw[size] != 0 or raw[size + 1] != 0x77:
        raise StrictJSONError(f"{function}: output not NUL-terminated at byte {size}")
    if b"\x00" in raw[:size]:
        raise StrictJSONError(f"{function}: a NUL byte inside the JSON")
    return raw[:size]


def call_strict(lib, function: str, *args):
    """raw_json followed by parse_strict: the parsed value of a JSON entry point's output."""
    return parse_strict(raw_json(lib, function, *args))
