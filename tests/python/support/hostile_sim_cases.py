"""Hostile-input cases of the simulated_* host-memory API (collected by hostile_cases.py)."""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Tuple


HERE = Path(__file__).resolve().parents[1]  # tests/python: support.* imports from there
sys.path.insert(0, str(HERE))
from support.hostile_harness import *  # noqa: E402,F401,F403 (constants, Harness, op_specs names)
from support.hostile_harness import _buffers, _call, _values  # noqa: E402,F401


def sim_cases() -> List[Case]:
    cases: List[Case] = []

    def add(name, case_id, function):
        cases.append((f"{name}/{case_id}", function))

    def block(h, nbytes, fill=0):
        address = h.lib.simulated_kernel_allocate(h.index, nbytes)
        h.succeeded(address, True, name="simulated_kernel_allocate")
        h.blocks.append(address)
        data = bytes([fill]) * nbytes
        h.lib.simulated_kernel_write(h.index, address, nbytes, data)
        h.succeeded_void("simulated_kernel_write")
        return address

    def read_block(h, address, nbytes):
        out = ctypes.create_string_buffer(nbytes)
        h.lib.simulated_kernel_read(h.index, address, nbytes, out)
        h.succeeded_void("simulated_kernel_read")
        return out.raw

    def bad_address(h, kind):
        if kind == "zero":
            return 0
        if kind == "unknown":
            return 0x7F0000001000
        if kind == "freed":
            address = block(h, 64)
            h.lib.simulated_kernel_free(h.index, address, 64)
            h.blocks.remove(address)
            return address
        if kind == "device_token":
            return h.alloc(64)
        if kind == "host_pointer":
            buffer = ctypes.create_string_buffer(64)
            h.keep.append(buffer)
            return ctypes.addressof(buffer)
        if kind == "inside_a_block":
            return block(h, 64) + 8
        raise ValueError(kind)

    ADDRESS_KINDS = ("zero", "unknown", "freed", "device_token", "host_pointer", "inside_a_block")

    name = "simulated_kernel_allocate"
    add(name, "size=0", lambda h: h.refused(
        h.lib.simulated_kernel_allocate(h.index, 0), 0, {C_INVALID_ARGUMENT}))
    for size in (SIZE_MAX, 2**63, SIZE_MAX - 62):
        add(name, f"size={size}", lambda h, size=size: h.refused(
            h.lib.simulated_kernel_allocate(h.index, size), 0,
            {C_OUT_OF_MEMORY, C_INVALID_ARGUMENT}))

    def sim_alloc_any_index(h):
        address = h.lib.simulated_kernel_allocate(INT_MIN, 8)
        h.succeeded(address, True)
        h.blocks.append(address)
    add(name, "gpu_index_ignored", sim_alloc_any_index)

    name = "simulated_kernel_free"
    for kind in ADDRESS_KINDS + ("double_free",):
        def sim_free_bad(h, kind=kind):
            keep = block(h, 32, 5)
            address = bad_address(h, "freed" if kind == "double_free" else kind)
            h.lib.simulated_kernel_free(h.index, address, 64)
            if kind == "zero":  # a no-op; a message is optional but must name the function
                message = h.lib.last_error()
                if message and not message.startswith(h.function + ": "):
                    fail(f"message {message!r}")
            else:
                h.refused_void({C_INVALID_HANDLE, C_INVALID_ARGUMENT})
            if read_block(h, keep, 32) != bytes([5]) * 32:
                fail("a refused free changed another block")
        add(name, f"address={kind}", sim_free_bad)

    for name in ("simulated_kernel_write", "simulated_kernel_read"):
        function = name
        for kind in ADDRESS_KINDS:
            def sim_bad(h, kind=kind, function=function, name=name):
                host = ctypes.create_string_buffer(b"\x09" * 64, 64)
                address = bad_address(h, kind)
                getattr(h.lib, function)(h.index, address, 64, host)
                h.refused_void({C_INVALID_HANDLE, C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
                if host.raw != b"\x09" * 64:
                    fail("a refused call wrote host memory")
            add(name, f"address={kind}", sim_bad)

        def sim_null(h, function=function, name=name):
            address = block(h, 64, 6)
            getattr(h.lib, function)(h.index, address, 64, None)
            h.refused_void({C_INVALID_ARGUMENT}, ["NULL"])
            if read_block(h, address, 64) != bytes([6]) * 64:
                fail("the block changed")
        add(name, "host=NULL", sim_null)
        for size in (65, SIZE_MAX, 2**63):
            def sim_too_big(h, size=size, function=function, name=name):
                address = block(h, 64, 6)
                host = ctypes.create_string_buffer(b"\x09" * 128, 128)
                getattr(h.lib, function)(h.index, address, size, host)
                h.refused_void({C_OUT_OF_RANGE, C_INVALID_ARGUMENT})
                if read_block(h, address, 64) != bytes([6]) * 64 or host.raw != b"\x09" * 128:
                    fail("a refused call had an effect")
            add(name, f"size={size}_beyond_the_block", sim_too_big)

    name = "simulated_matrix_multiply"

    def mm(h, a, b, size_a, size_b, shape_a, shape_b):
        sa = (ctypes.c_int * 2)(*shape_a) if shape_a is not None else None
        sb = (ctypes.c_int * 2)(*shape_b) if shape_b is not None else None
        return h.lib.simulated_matrix_multiply(h.index, a, b, size_a, size_b, sa, sb)

    def mm_ok(h):
        a, b = block(h, 160), block(h, 192)
        result = mm(h, a, b, 160, 192, (5, 4), (4, 6))
        h.succeeded(result, True)
        h.blocks.append(result)
    add(name, "baseline_5x4_at_4x6", mm_ok)
    shape_cases = {
        "shape_a=NULL": (160, 192, None, (4, 6)), "shape_b=NULL": (160, 192, (5, 4), None),
        "cols_a!=rows_b": (160, 192, (5, 4), (3, 8)), "size_a!=shape": (152, 192, (5, 4), (4, 6)),
        "size_b!=shape": (160, 200, (5, 4), (4, 6)), "rows_a=-1": (160, 192, (-1, 4), (4, 6)),
        "negative_square": (8, 8, (-1, -1), (-1, -1)), "rows_a=0": (0, 192, (0, 4), (4, 6)),
        "cols_b=0": (160, 0, (5, 4), (4, 0)),
        "shape_claims_more_than_the_block": (320, 192 * 2, (5, 8), (8, 6)),
        "INT_MAX_shapes": ((2**31 - 1) ** 2 * 8 % 2**64, INT_MAX * 8, (INT_MAX, INT_MAX),
                           (INT_MAX, 1)),
        "huge_shapes": (0, 0, (2**30, 2**30), (2**30, 2**30)),
    }
    for case_id, (size_a, size_b, shape_a, shape_b) in shape_cases.items():
        def mm_bad(h, size_a=size_a, size_b=size_b, shape_a=shape_a, shape_b=shape_b):
            a, b = block(h, 160, 1), block(h, 192, 2)
            result = mm(h, a, b, size_a, size_b, shape_a, shape_b)
            if result:
                h.blocks.append(result)
            h.refused(result, 0, {C_INVALID_ARGUMENT, C_OUT_OF_RANGE, C_INVALID_HANDLE})
            if read_block(h, a, 160) != bytes([1]) * 160:
                fail("the input block changed")
        add(name, case_id, mm_bad)
    for slot in ("address_a", "address_b"):
        for kind in ADDRESS_KINDS:
            def mm_address(h, slot=slot, kind=kind):
                a, b = block(h, 160), block(h, 192)
                bad = bad_address(h, kind)
                args = (bad, b) if slot == "address_a" else (a, bad)
                result = mm(h, *args, 160, 192, (5, 4), (4, 6))
                if result:
                    h.blocks.append(result)
                h.refused(result, 0, {C_INVALID_HANDLE, C_INVALID_ARGUMENT, C_OUT_OF_RANGE})
            add(name, f"{slot}={kind}", mm_address)

    name = "simulated_get_compute_unit_count"
    for gpu in FOREIGN_GPU_INDICES:
        def cu(h, gpu=gpu):
            info = json.loads(h.lib.json_call("aethercl_device_info", h.index))
            if h.lib.simulated_get_compute_unit_count(gpu) != info["compute_units"]:
                fail("an uninitialised index does not fall back to the only device")
        add(name, f"gpu_index={gpu}", cu)
    return cases
