"""Every JSON the library emits is strict JSON in well-formed UTF-8 (strict_json.parse_strict),
and buffer labels, the one place client bytes reach that JSON, are fully UTF-8 validated: every
ill-formed sequence becomes U+FFFD, one per maximal subpart, exactly as Python's "replace"
decoding does, then the label is cut to 63 bytes on a character boundary."""
import json

import numpy as np
import pytest

from support.strict_json import StrictJSONError, call_strict, parse_strict

LABEL_MAX_BYTES = 63

# Every class of ill-formed input, and well-formed boundary cases that must pass unchanged.
MALFORMED_LABELS = {
    "overlong_2byte_C0_AF": b"a\xc0\xafb",
    "overlong_2byte_C1_BF": b"\xc1\xbf",
    "overlong_3byte_E0_80_AF": b"x\xe0\x80\xafy",
    "overlong_3byte_E0_9F_BF": b"\xe0\x9f\xbf",
    "overlong_4byte_F0_80_80_AF": b"\xf0\x80\x80\xaf",
    "overlong_4byte_F0_8F_BF_BF": b"\xf0\x8f\xbf\xbf",
    "surrogate_high_ED_A0_80": b"s\xed\xa0\x80",
    "surrogate_low_ED_BF_BF": b"\xed\xbf\xbf!",
    "surrogate_pair_cesu8": b"\xed\xa0\xbd\xed\xb2\xa9",
    "above_10FFFF_F4_90_80_80": b"\xf4\x90\x80\x80",
    "above_10FFFF_F7_BF_BF_BF": b"\xf7\xbf\xbf\xbf",
    "five_byte_form_F8": b"\xf8\x88\x80\x80\x80",
    "six_byte_form_FC": b"\xfc\x84\x80\x80\x80\x80",
    "lone_continuation_80": b"\x80",
    "lone_continuations_BF_80": b"q\xbf\x80q",
    "truncated_2byte_at_end": b"end\xc3",
    "truncated_3byte_at_end": b"end\xe2\x82",
    "truncated_4byte_at_end": b"end\xf0\x9f\x98",
    "truncated_3byte_then_ascii": b"\xe2\x82A",
    "truncated_4byte_then_valid": b"\xf0\x9f\xc3\xa9",
    "fe_ff_bom_bytes": b"\xfe\xff\xff\xfe",
    "replacements_cut_at_63": b"\xff" * 40,
    "valid_cut_at_63_after_replacement": b"\xff" + "é".encode() * 40,
}
for lead in range(0xF5, 0x100):
    MALFORMED_LABELS[f"lead_byte_{lead:02X}"] = bytes([lead]) + b"\x80\x80\x80z"

WELL_FORMED_LABELS = {
    "boundaries": "\u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff".encode(),
    "controls_and_quotes": b'"\\\n\t\x01\x1f\x7f}',
    "cjk_and_emoji": "层 🙂 ñ".encode(),
}


def expected_label(raw: bytes) -> str:
    """What the driver must keep: Python's replacement decoding up to the first NUL, then the
    longest prefix of whole characters within 63 bytes."""
    text = raw.split(b"\x00")[0].decode("utf-8", "replace")
    kept = ""
    for ch in text:
        if len((kept + ch).encode()) > LABEL_MAX_BYTES:
            break
        kept += ch
    return kept


def labelled_entry(lib, device, handle):
    stats = call_strict(lib, "aethercl_memory_stats", device.index)
    mine = [b for b in stats["labelled_buffers"] if int(b["handle"], 16) == handle]
    assert len(mine) == 1, stats["labelled_buffers"]
    return mine[0]


@pytest.mark.parametrize("case", sorted({**MALFORMED_LABELS, **WELL_FORMED_LABELS}))
def test_labels_are_valid_utf8_in_memory_statistics(lib, device, case):
    raw = {**MALFORMED_LABELS, **WELL_FORMED_LABELS}[case]
    handle = device.alloc(16)
    try:
        assert lib.aethercl_set_buffer_label(device.index, handle, raw) == 1, lib.last_error()
        entry = labelled_entry(lib, device, handle)
        assert entry["label"] == expected_label(raw)
        assert len(entry["label"].encode()) <= LABEL_MAX_BYTES
        if case in WELL_FORMED_LABELS:
            assert entry["label"].encode() == raw
    finally:
        lib.free_gpu_memory(device.index, handle)


def test_label_with_embedded_nul_keeps_the_c_string(lib, device):
    handle = device.alloc(16)
    try:
        assert lib.aethercl_set_buffer_label(device.index, handle, b"ab\x00\xc0\xaf") == 1
        assert labelled_entry(lib, device, handle)["label"] == "ab"
    finally:
        lib.free_gpu_memory(device.index, handle)


def test_device_info_of_every_device_is_strict_json(lib, device):
    for index in range(lib.aethercl_device_count()):
        info = call_strict(lib, "aethercl_device_info", index)
        assert info["index"] == index and isinstance(info["name"], str)


def test_trace_summary_and_trace_file_are_strict_json(lib, device, tmp_path, rng):
    path = tmp_path / "trace.json"
    idle = call_strict(lib, "aethercl_trace_summary")
    assert idle["active"] is False
    assert lib.aethercl_trace_start(str(path).encode()) == 1, lib.last_error()
    try:
        a = device.upload(rng.standard_normal((17, 19)).astype(np.float32))
        b = device.upload(rng.standard_normal((19, 23)).astype(np.float32))
        c = device.empty((17, 23))
        t = device.empty((19, 17))
        lib.check("execute_matmul_on_gpu", device.index, a.handle, b.handle, c.handle, 1, 17, 23, 19)
        lib.check("execute_softmax_on_gpu", device.index, c.handle, c.handle, 17, 23)
        lib.check("execute_transpose_on_gpu", device.index, a.handle, t.handle, 17, 19)
        c.numpy()
        summary = call_strict(lib, "aethercl_trace_summary")
        assert summary["active"] is True and summary["kernels"]
    finally:
        assert lib.aethercl_trace_stop() == 1, lib.last_error()
    trace = parse_strict(path.read_bytes())
    assert {e["cat"] for e in trace["traceEvents"]} >= {"kernel", "transfer"}
    for tensor in (a, b, c, t):
        tensor.free()


# The checker itself must reject each thing it claims to: otherwise the tests above prove nothing.
@pytest.mark.parametrize("raw", [
    b'{"a": "\xc0\xaf"}',              # overlong
    b'{"a": "\xed\xa0\x80"}',          # encoded surrogate
    b'{"a": "\xf4\x90\x80\x80"}',      # above U+10FFFF
    b'{"a": "\xf5\x80\x80\x80"}',      # F5 lead byte
    b'{"a": "\xe2\x82"}',              # truncated sequence
    b'{"a": "\\ud800"}',               # lone surrogate as an escape
    b'{"\\udc00": 1}',                 # ... in a key
    b'{"a": "x\x01y"}',                # raw control character in a string
    b'{"a": NaN}', b'{"a": -Infinity}',
    b'{"a": 1, "a": 2}',               # duplicate key
    b'{"a": 1} trailing', b'', b'{"a": 1',
])
def test_the_strict_checker_rejects(raw):
    with pytest.raises(StrictJSONError):
        parse_strict(raw)


def test_the_strict_checker_accepts_escaped_controls_and_pairs():
    value = parse_strict(b'{"a": "\\u0001\\ud83d\\ude42 \xc3\xa9", "b": [1, 2.5e-3, null, true]}')
    assert value["a"] == "\x01\U0001F642 é"
    assert json.dumps(value)  # plain round trip
