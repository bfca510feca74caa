"""Hostile-input cases of the many-device functions: communicators, collectives, peer copies (collected by hostile_cases.py)."""
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


# ---- many devices: communicators, collectives, peer copies (one device's worth) -------------
# Cases needing several devices (wrong-device buffers, uninitialised members) are in tests/multi/.
COMM_NEVER_ISSUED = ((1 << 40) << 8) | 0xC0
DT_F32, DT_F64, OP_SUM = 0, 3, 0


def _comm(h, *indices):
    array = (ctypes.c_int * len(indices))(*indices)
    token = h.lib.aethercl_comm_create(len(indices), array)
    if not token:
        fail(f"aethercl_comm_create failed: {h.lib.last_error()}")
    h.keep.append(("comm", token))
    return token


def _destroy_comms(h):
    for item in list(h.keep):
        if isinstance(item, tuple) and item[0] == "comm":
            h.lib.aethercl_comm_destroy(item[1])
            h.keep.remove(item)


def _bad_comm(h, kind):
    if kind == "NULL":
        return None
    if kind == "never_issued":
        return COMM_NEVER_ISSUED
    if kind == "buffer_handle":
        return h.alloc(64)
    if kind == "destroyed":
        token = _comm(h, h.index)
        _destroy_comms(h)
        return token
    if kind == "host_pointer":
        buffer = ctypes.create_string_buffer(64)
        h.keep.append(buffer)
        return ctypes.addressof(buffer)
    raise ValueError(kind)


COMM_KINDS = ("NULL", "never_issued", "buffer_handle", "destroyed", "host_pointer")


def _tokens(*handles):
    return (ctypes.c_void_p * len(handles))(*handles)


def many_device_cases() -> List[Case]:
    cases: List[Case] = []

    def add(name, case_id, function):
        def run(h, function=function):
            try:
                function(h)
            finally:
                _destroy_comms(h)
        cases.append((f"{name}/{case_id}", run))

    name = "aethercl_comm_create"
    for count in (0, -1, INT_MIN, INT_MAX):
        add(name, f"count={count}", lambda h, count=count: h.refused(
            h.lib.aethercl_comm_create(count, (ctypes.c_int * 1)(h.index)), None,
            {C_INVALID_ARGUMENT}, [f"count {count}"]))
    add(name, "count=device_count+1", lambda h: h.refused(
        h.lib.aethercl_comm_create(h.lib.aethercl_device_count() + 1,
                                   (ctypes.c_int * 64)(*range(64))), None,
        {C_INVALID_ARGUMENT}, ["exceeds"]))
    add(name, "gpu_indices=NULL", lambda h: h.refused(
        h.lib.aethercl_comm_create(1, None), None, {C_INVALID_ARGUMENT}, ["gpu_indices is NULL"]))
    for value in (-1, INT_MIN, INT_MAX):
        add(name, f"gpu_indices[0]={value}", lambda h, value=value: h.refused(
            h.lib.aethercl_comm_create(1, (ctypes.c_int * 1)(value)), None, {C_NO_DEVICE},
            [f"gpu_indices[0] = {value}"]))

    def duplicate(h):
        if h.lib.aethercl_device_count() < 2:
            h.refused(h.lib.aethercl_comm_create(2, (ctypes.c_int * 2)(h.index, h.index)), None,
                      {C_INVALID_ARGUMENT}, ["exceeds"])
        else:
            h.refused(h.lib.aethercl_comm_create(2, (ctypes.c_int * 2)(h.index, h.index)), None,
                      {C_INVALID_ARGUMENT}, ["repeats gpu_indices[0]"])
    add(name, "duplicate", duplicate)
    add(name, "valid", lambda h: _comm(h, h.index))

    name = "aethercl_comm_destroy"
    for kind in COMM_KINDS:
        add(name, f"comm={kind}", lambda h, kind=kind: h.refused(
            h.lib.aethercl_comm_destroy(_bad_comm(h, kind)), 0,
            {C_INVALID_ARGUMENT, C_INVALID_HANDLE}))

    name = "aethercl_comm_alloc"
    for kind in COMM_KINDS:
        add(name, f"comm={kind}", lambda h, kind=kind: h.refused(
            h.lib.aethercl_comm_alloc(_bad_comm(h, kind), 0, 64), None,
            {C_INVALID_ARGUMENT, C_INVALID_HANDLE}, ["comm"]))
    for rank in (-1, 1, INT_MIN, INT_MAX):
        add(name, f"rank={rank}", lambda h, rank=rank: h.refused(
            h.lib.aethercl_comm_alloc(_comm(h, h.index), rank, 64), None, {C_INVALID_ARGUMENT},
            [f"rank {rank}"]))
    add(name, "size=0", lambda h: h.refused(
        h.lib.aethercl_comm_alloc(_comm(h, h.index), 0, 0), None, {C_INVALID_ARGUMENT},
        ["size is 0"]))
    for size in (SIZE_MAX, 2**62):
        add(name, f"size={size}", lambda h, size=size: h.refused(
            h.lib.aethercl_comm_alloc(_comm(h, h.index), 0, size), None,
            {C_OUT_OF_MEMORY, C_INVALID_ARGUMENT}))

    def comm_alloc_valid(h):
        token = h.lib.aethercl_comm_alloc(_comm(h, h.index), 0, 64)
        h.succeeded(token, success=True)
        _destroy_comms(h)  # the buffer outlives its communicator
        data = bytes(range(64))
        h.succeeded(h.lib.write_host_to_gpu_blocking(h.index, token, 0, 64, data),
                    name="write_host_to_gpu_blocking")
        out = ctypes.create_string_buffer(64)
        h.succeeded(h.lib.read_gpu_to_host_blocking(h.index, token, 0, 64, out),
                    name="read_gpu_to_host_blocking")
        h.lib.free_gpu_memory(h.index, token)
        if out.raw != data:
            fail("a comm_alloc buffer did not keep its bytes")
    add(name, "valid", comm_alloc_valid)

    # Across processes (one rank here: nranks 2 would wait for a peer). Without the vendor engines
    # the valid cases answer NOT_IMPLEMENTED saying the engines are not loaded, which they accept.
    no_engines = "the vendor engines are not loaded"
    name = "aethercl_comm_unique_id"
    add(name, "id=NULL", lambda h: h.refused(
        h.lib.aethercl_comm_unique_id(None, 128), 0, {C_INVALID_ARGUMENT}, ["id is NULL"]))
    for size in (0, 1, 127):
        add(name, f"size={size}", lambda h, size=size: h.refused(
            h.lib.aethercl_comm_unique_id(ctypes.create_string_buffer(128), size), 0,
            {C_INVALID_ARGUMENT}, [f"size {size}"]))
    for size in (128, 4096):
        add(name, f"valid/size={size}", lambda h, size=size: h.succeeded(
            h.lib.aethercl_comm_unique_id(ctypes.create_string_buffer(size), size),
            unless_unsupported=no_engines))

    name = "aethercl_comm_create_rank"
    zeros = bytes(128)
    for nranks in (0, -1, INT_MIN):
        add(name, f"nranks={nranks}", lambda h, nranks=nranks: h.refused(
            h.lib.aethercl_comm_create_rank(nranks, 0, zeros, 128, h.index), None,
            {C_INVALID_ARGUMENT}, [f"nranks {nranks}"]))
    for nranks, rank in ((1, 1), (1, -1), (2, INT_MAX), (INT_MAX, INT_MIN)):
        add(name, f"rank={rank}/nranks={nranks}", lambda h, nranks=nranks, rank=rank: h.refused(
            h.lib.aethercl_comm_create_rank(nranks, rank, zeros, 128, h.index), None,
            {C_INVALID_ARGUMENT}, [f"rank {rank}"]))
    add(name, "id=NULL", lambda h: h.refused(
        h.lib.aethercl_comm_create_rank(1, 0, None, 128, h.index), None, {C_INVALID_ARGUMENT},
        ["id is NULL"]))
    for size in (0, 127):
        add(name, f"id_size={size}", lambda h, size=size: h.refused(
            h.lib.aethercl_comm_create_rank(1, 0, zeros, size, h.index), None,
            {C_INVALID_ARGUMENT}, [f"id_size {size}"]))
    for gpu in (-1, INT_MIN, INT_MAX):
        add(name, f"gpu_index={gpu}", lambda h, gpu=gpu: h.refused(
            h.lib.aethercl_comm_create_rank(1, 0, zeros, 128, gpu), None, {C_NO_DEVICE},
            [f"gpu_index {gpu}"]))

    def create_rank_valid(h):
        uid = ctypes.create_string_buffer(128)
        if h.lib.aethercl_comm_unique_id(uid, 128) != 1:
            h.succeeded(0, unless_unsupported=no_engines, name="aethercl_comm_unique_id")
        token = h.lib.aethercl_comm_create_rank(1, 0, uid, 128, h.index)
        h.succeeded(token, success=True, unless_unsupported=no_engines)
        h.keep.append(("comm", token))
        buffer = h.alloc(64)
        h.succeeded(h.lib.aethercl_all_reduce(token, _tokens(buffer), 16, DT_F32, OP_SUM),
                    name="aethercl_all_reduce")
        h.refused(h.lib.aethercl_all_reduce(token, _tokens(buffer), 16, DT_F32, 2), 0,
                  {C_NOT_IMPLEMENTED}, ["MAX", "across processes"], name="aethercl_all_reduce")
    add(name, "valid", create_rank_valid)

    def collective(h, function, buffers, count=16, dtype=DT_F32, extra=OP_SUM, comm=None):
        comm = _comm(h, h.index) if comm is None else (comm or None)
        if function in ("aethercl_all_gather", "aethercl_reduce_scatter"):
            other = _tokens(h.alloc(4096))
            return getattr(h.lib, function)(comm, buffers, other, count, dtype, *(
                (extra,) if function == "aethercl_reduce_scatter" else ()))
        return getattr(h.lib, function)(comm, buffers, count, dtype, extra)

    for name in ("aethercl_all_reduce", "aethercl_broadcast", "aethercl_all_gather",
                 "aethercl_reduce_scatter"):
        for kind in COMM_KINDS:
            def bad_comm(h, kind=kind, name=name):
                comm = _bad_comm(h, kind)
                h.refused(collective(h, name, _tokens(h.alloc(64)), comm=comm or 0), 0,
                          {C_INVALID_ARGUMENT, C_INVALID_HANDLE}, ["comm"])
            add(name, f"comm={kind}", bad_comm)
        add(name, "buffers=NULL", lambda h, name=name: h.refused(
            collective(h, name, None), 0, {C_INVALID_ARGUMENT}, ["is NULL"]))
        add(name, "buffers[0]=NULL", lambda h, name=name: h.refused(
            collective(h, name, _tokens(None)), 0, {C_INVALID_ARGUMENT}, ["[0] is NULL"]))
        for kind in BAD_TOKENS:
            add(name, f"buffers[0]={kind}", lambda h, kind=kind, name=name: h.refused(
                collective(h, name, _tokens(h.token(kind))), 0, {C_INVALID_HANDLE}, ["[0]"]))
        add(name, "too_small", lambda h, name=name: h.refused(
            collective(h, name, _tokens(h.alloc(60))), 0, {C_OUT_OF_RANGE}, ["60 bytes"]))
        for count in (SIZE_MAX, SIZE_MAX // 2 + 1, 2**62):
            add(name, f"count={count}", lambda h, count=count, name=name: h.refused(
                collective(h, name, _tokens(h.alloc(64)), count=count), 0,
                {C_INVALID_ARGUMENT, C_OUT_OF_RANGE}))
        for dtype in (-1, 8, INT_MAX, INT_MIN):
            add(name, f"dtype={dtype}", lambda h, dtype=dtype, name=name: h.refused(
                collective(h, name, _tokens(h.alloc(64)), dtype=dtype), 0, {C_INVALID_ARGUMENT},
                [f"dtype {dtype}"]))
        add(name, "dtype=f64", lambda h, name=name: h.refused(
            collective(h, name, _tokens(h.alloc(128)), dtype=DT_F64), 0, {C_NOT_IMPLEMENTED},
            ["f64", "not supported"]))
        if name != "aethercl_all_gather":
            word = "root" if name == "aethercl_broadcast" else "op"
            for value in (-1, 4 if word == "op" else 1, INT_MIN, INT_MAX):
                add(name, f"{word}={value}", lambda h, value=value, name=name, word=word: h.refused(
                    collective(h, name, _tokens(h.alloc(64)), extra=value), 0,
                    {C_INVALID_ARGUMENT}, [f"{word} {value}"]))
        add(name, "count=0", lambda h, name=name: h.succeeded(
            collective(h, name, _tokens(h.alloc(4)), count=0)))
        add(name, "valid", lambda h, name=name: h.succeeded(
            collective(h, name, _tokens(h.alloc(64)))))
        if name in ("aethercl_all_gather", "aethercl_reduce_scatter"):
            def same(h, name=name):
                buffer = _tokens(h.alloc(64))
                comm = _comm(h, h.index)
                args = (OP_SUM,) if name == "aethercl_reduce_scatter" else ()
                h.refused(getattr(h.lib, name)(comm, buffer, buffer, 16, DT_F32, *args), 0,
                          {C_INVALID_ARGUMENT}, ["same buffer"])
            add(name, "send=recv", same)

    name = "aethercl_copy_peer"

    def copy(h, dst=None, dst_offset=0, src=None, src_offset=0, size=16, dst_gpu=None,
             src_gpu=None):
        dst = h.alloc(64) if dst is None else dst
        src = h.alloc(64) if src is None else src
        return h.lib.aethercl_copy_peer(h.index if dst_gpu is None else dst_gpu, dst, dst_offset,
                                        h.index if src_gpu is None else src_gpu, src, src_offset,
                                        size)
    for side in ("dst", "src"):
        def null_side(h, side=side):
            dst = None if side == "dst" else h.alloc(64)
            src = None if side == "src" else h.alloc(64)
            h.refused(h.lib.aethercl_copy_peer(h.index, dst, 0, h.index, src, 0, 16), 0,
                      {C_INVALID_ARGUMENT}, [f"{side} is NULL"])
        add(name, f"{side}=NULL", null_side)
        for kind in BAD_TOKENS:
            add(name, f"{side}={kind}", lambda h, side=side, kind=kind: h.refused(
                copy(h, **{side: h.token(kind)}), 0, {C_INVALID_HANDLE}, [side]))
        for offset, size in ((60, 8), (64, 1), (SIZE_MAX, 2), (0, SIZE_MAX)):
            add(name, f"{side}_offset={offset}_size={size}",
                lambda h, side=side, offset=offset, size=size: h.refused(
                    copy(h, size=size, **{f"{side}_offset": offset}), 0, {C_OUT_OF_RANGE}))

    def overlap(h):
        buffer = h.alloc(64)
        h.refused(copy(h, dst=buffer, src=buffer, dst_offset=8, src_offset=0, size=16), 0,
                  {C_INVALID_ARGUMENT}, ["overlap"])
    add(name, "overlap", overlap)

    def disjoint(h):
        buffer = h.alloc(64)
        h.succeeded(copy(h, dst=buffer, src=buffer, dst_offset=32, src_offset=0, size=32))
    add(name, "same_buffer_disjoint", disjoint)
    add(name, "size=0", lambda h: h.succeeded(copy(h, size=0)))
    add(name, "size=0_offset_past_end", lambda h: h.refused(
        copy(h, size=0, dst_offset=65), 0, {C_OUT_OF_RANGE}))
    for gpu in FOREIGN_GPU_INDICES:   # the single-device fallback, like every other call
        add(name, f"src_gpu={gpu}", lambda h, gpu=gpu: h.succeeded(copy(h, src_gpu=gpu)))
    add(name, "valid", lambda h: h.succeeded(copy(h)))
    return cases
