"""Hostile-input cases for the version-3 functions of "your own kernels" and "typed memory, the
kernel log, interop": programs, kernels, aethercl_launch, dtypes, conversions, the kernel log and
interop. hostile_cases.all_cases() adds them; each case also checks that the programs and
kernels it made are gone afterwards (user_programs / user_kernels of the memory statistics)."""
from __future__ import annotations

import ctypes
import json
from typing import Callable, List, Tuple

from support.hostile_harness import (C_INVALID_ARGUMENT, C_INVALID_HANDLE, C_NOT_IMPLEMENTED,
                             C_OUT_OF_RANGE, FOREIGN_GPU_INDICES, INT_MAX, INT_MIN, SIZE_MAX,
                             Harness, Status, fail)

C_BUILD_FAILED, NOT_IMPLEMENTED = Status.BUILD_FAILED, C_NOT_IMPLEMENTED

Case = Tuple[str, Callable[[Harness], None]]
SOURCE = (b"__kernel void k(__global int* o, int v, __local int* l) {\n"
          b"  l[get_local_id(0)] = v; barrier(CLK_LOCAL_MEM_FENCE);\n"
          b"  o[get_global_id(0)] = l[0]; }\n")
PROGRAM_TAG, KERNEL_TAG = 0xB1, 0xB2
TOKEN_KINDS = ("NULL", "never_issued", "malformed", "destroyed", "host_pointer", "buffer",
               "other_type")
TOKEN_CODES = {C_INVALID_ARGUMENT, C_INVALID_HANDLE}
TOKEN_WORDS = {"NULL": "NULL", "never_issued": "never issued", "malformed": "is not a",
               "destroyed": "destroyed", "host_pointer": "is not a", "buffer": "buffer handle",
               "other_type": ", not a"}


class Objects:
    """Programs and kernels made by one case, destroyed after it."""

    def __init__(self, h: Harness):
        self.h, self.programs, self.kernels = h, [], []

    def program(self, source: bytes = SOURCE) -> int:
        handle = self.h.lib.aethercl_program_create(self.h.index, source, None)
        if not handle:
            fail(f"setup: aethercl_program_create failed: {self.h.lib.last_error()}")
        self.programs.append(handle)
        return handle

    def kernel(self, program: int = 0) -> int:
        handle = self.h.lib.aethercl_kernel_create(program or self.program(), b"k")
        if not handle:
            fail(f"setup: aethercl_kernel_create failed: {self.h.lib.last_error()}")
        self.kernels.append(handle)
        return handle

    def binary(self) -> bytes:
        program = self.program()
        size = self.h.lib.aethercl_program_binary(program, None, 0)
        out = ctypes.create_string_buffer(size)
        if size == 0 or self.h.lib.aethercl_program_binary(program, out, size) != size:
            fail(f"setup: aethercl_program_binary failed: {self.h.lib.last_error()}")
        return out.raw

    def destroy(self) -> None:
        for handle in self.kernels:
            self.h.lib.aethercl_kernel_destroy(handle)
        for handle in self.programs:
            self.h.lib.aethercl_program_destroy(handle)
        self.kernels.clear()
        self.programs.clear()


def bad_token(h: Harness, objects: Objects, kind: str, tag: int) -> int:
    if kind == "NULL":
        return None
    if kind == "never_issued":
        return ((1 << 40) << 8) | tag
    if kind == "malformed":
        return 0x12345678
    if kind == "destroyed":
        if tag == PROGRAM_TAG:
            handle = objects.program()
            objects.programs.remove(handle)
            h.lib.aethercl_program_destroy(handle)
        else:
            handle = objects.kernel()
            objects.kernels.remove(handle)
            h.lib.aethercl_kernel_destroy(handle)
        return handle
    if kind == "host_pointer":
        return h.token("host_pointer")
    if kind == "buffer":
        return h.alloc(64)
    if kind == "other_type":
        return objects.kernel() if tag == PROGRAM_TAG else objects.program()
    raise ValueError(kind)


def user_objects(h: Harness) -> Tuple[int, int]:
    stats = json.loads(h.lib.json_call("aethercl_memory_stats", h.index))
    return stats["user_programs"], stats["user_kernels"]


def expect(h: Harness, result, failure, codes, words=()) -> None:
    """A refusal with one of `codes` (NOT_IMPLEMENTED included when listed) and `words`."""
    message, code = h.lib.last_error(), h.lib.last_error_code()
    if result != failure:
        fail(f"returned {result!r}, expected {failure!r} (last error {message!r})")
    if not message.startswith(h.function + ": "):
        fail(f"the message does not start with the function name: {message!r}")
    if code not in codes:
        fail(f"status {code}, expected one of {sorted(codes)}: {message!r}")
    for word in words:
        if word.lower() not in message.lower():
            fail(f"the message does not mention {word!r}: {message!r}")


def sizes(*values):
    return (ctypes.c_size_t * len(values))(*values)


class Launch:
    """A valid aethercl_launch of kernel k over 4 items in groups of 2 that any case can spoil."""

    def __init__(self, h: Harness, objects: Objects):
        from aethercl.abi import AetherclArg
        self.h, self.Arg = h, AetherclArg
        self.kernel = objects.kernel()
        self.out = h.alloc(64, 0x11)
        self.value = ctypes.c_int(7)
        self.args = [AetherclArg(0, 0, self.out), AetherclArg(1, 4, ctypes.addressof(self.value)),
                     AetherclArg(2, 8, None)]
        self.global_size, self.local_size = [4], [2]
        self.work_dim, self.num_args, self.stream, self.gpu = None, None, None, h.index

    def run(self, args_null=False):
        array = (self.Arg * len(self.args))(*self.args)
        work_dim = len(self.global_size) if self.work_dim is None else self.work_dim
        global_size = sizes(*self.global_size) if self.global_size is not None else None
        local_size = sizes(*self.local_size) if self.local_size is not None else None
        return self.h.lib.aethercl_launch(
            self.gpu, self.kernel, self.stream, work_dim, global_size, local_size,
            len(self.args) if self.num_args is None else self.num_args,
            None if args_null else array)

    def output_untouched(self) -> None:
        if self.h.contents(self.out, 64) != bytes([0x11]) * 64:
            fail("a refused launch wrote the output")


def program_cases(add) -> None:
    name = "aethercl_program_create"

    def create(h, source, options=None, gpu=None):
        handle = h.lib.aethercl_program_create(h.index if gpu is None else gpu, source, options)
        if handle:
            h.lib.aethercl_program_destroy(handle)
        return handle

    add(name, "baseline", lambda h, o: h.succeeded(create(h, SOURCE), True))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, o, gpu=gpu: h.succeeded(create(h, SOURCE,
                                                                                gpu=gpu), True))
    add(name, "options=NULL", lambda h, o: h.succeeded(create(h, SOURCE, None), True))
    add(name, "source=NULL", lambda h, o: expect(h, create(h, None), None, {C_INVALID_ARGUMENT},
                                                 ["source", "NULL"]))
    add(name, "source=empty", lambda h, o: expect(h, create(h, b""), None, {C_INVALID_ARGUMENT},
                                                  ["empty"]))
    add(name, "source_does_not_compile", lambda h, o: expect(
        h, create(h, b"__kernel void k( { nonsense"), None, {C_BUILD_FAILED}, ["failed to build"]))
    add(name, "source_binary_bytes", lambda h, o: expect(
        h, create(h, bytes(range(1, 256)) * 8), None, {C_BUILD_FAILED}))
    add(name, "options_bogus", lambda h, o: expect(
        h, create(h, SOURCE, b"-not-an-option --nor-this"), None, {C_BUILD_FAILED}))

    def long_options(h, o):
        result = create(h, SOURCE, b"-DLONG=" + b"1" * 100_000)
        if result is None:
            expect(h, result, None, {C_BUILD_FAILED})
    add(name, "options_100k_bytes", long_options)

    name = "aethercl_program_create_il"

    def create_il(h, data, size, gpu=None):
        handle = h.lib.aethercl_program_create_il(h.index if gpu is None else gpu, data, size, None)
        if handle:
            h.lib.aethercl_program_destroy(handle)
        return handle

    header = b"\x03\x02\x23\x07" + bytes(60)
    add(name, "il=NULL", lambda h, o: expect(h, create_il(h, None, 64), None, {C_INVALID_ARGUMENT},
                                             ["il is NULL"]))
    for size in (0, 3, 17, 62, SIZE_MAX):
        add(name, f"size={size}", lambda h, o, size=size: expect(
            h, create_il(h, header, size), None, {C_INVALID_ARGUMENT}, ["size"]))
    add(name, "bad_magic", lambda h, o: expect(
        h, create_il(h, b"\x7fELF" + bytes(60), 64), None, {C_INVALID_ARGUMENT}, ["not SPIR-V"]))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}_bad_magic", lambda h, o, gpu=gpu: expect(
            h, create_il(h, bytes(64), 64, gpu), None, {C_INVALID_ARGUMENT}, ["not SPIR-V"]))

    def header_only(h, o):
        info = json.loads(h.lib.json_call("aethercl_device_info", h.index))
        # a module of nothing but its header: refused by a device with IL support (it declares
        # no kernel and no capabilities), "not implemented" by a device without
        codes = {C_BUILD_FAILED, C_INVALID_ARGUMENT} if "SPIR-V" in info["il_version"] \
            else {NOT_IMPLEMENTED}
        result = create_il(h, header, 64)
        if result is None:
            expect(h, result, None, codes)
    add(name, "header_only_module", header_only)

    name = "aethercl_program_create_binary"

    def create_binary(h, data, size, gpu=None):
        handle = h.lib.aethercl_program_create_binary(h.index if gpu is None else gpu, data, size,
                                                      None)
        if handle:
            h.lib.aethercl_program_destroy(handle)
        return handle

    def binary_baseline(h, o):
        binary = o.binary()
        h.succeeded(create_binary(h, binary, len(binary)), True)
    add(name, "baseline_from_program_binary", binary_baseline)
    add(name, "binary=NULL", lambda h, o: expect(h, create_binary(h, None, 64), None,
                                                 {C_INVALID_ARGUMENT}, ["binary is NULL"]))
    add(name, "size=0", lambda h, o: expect(h, create_binary(h, b"x" * 8, 0), None,
                                            {C_INVALID_ARGUMENT}, ["size is 0"]))
    add(name, "garbage", lambda h, o: expect(h, create_binary(h, bytes(range(256)) * 4, 1024),
                                             None, {C_BUILD_FAILED}, ["refused the binary"]))

    def truncated(h, o):
        binary = o.binary()
        expect(h, create_binary(h, binary[: len(binary) // 2], len(binary) // 2), None,
               {C_INVALID_ARGUMENT}, ["truncated"])
    add(name, "truncated_binary", truncated)

    def corrupt(h, o):
        binary = bytearray(o.binary())
        binary[len(binary) // 2] ^= 0xFF
        expect(h, create_binary(h, bytes(binary), len(binary)), None, {C_INVALID_ARGUMENT},
               ["corrupt"])
    add(name, "corrupt_binary", corrupt)

    def foreign(h, o):
        binary = bytearray(o.binary())
        binary[8:40] = b"0" * 32  # another device's identity
        expect(h, create_binary(h, bytes(binary), len(binary)), None, {C_INVALID_ARGUMENT},
               ["another device"])
    add(name, "binary_of_another_device", foreign)
    add(name, "header_only", lambda h, o: expect(
        h, create_binary(h, o.binary()[:56], 56), None, {C_INVALID_ARGUMENT}))
    add(name, "magic_only", lambda h, o: expect(
        h, create_binary(h, b"AECLPRG1", 8), None, {C_INVALID_ARGUMENT}, ["truncated"]))

    name = "aethercl_program_binary"
    for kind in TOKEN_KINDS:
        add(name, f"program={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_program_binary(bad_token(h, o, kind, PROGRAM_TAG), None, 0), 0,
            TOKEN_CODES, [TOKEN_WORDS[kind]]))

    def sized(h, o):
        h.succeeded(h.lib.aethercl_program_binary(o.program(), None, 100), True)
    add(name, "out=NULL_sizes_it", sized)

    def too_small(h, o):
        program = o.program()
        size = h.lib.aethercl_program_binary(program, None, 0)
        out = ctypes.create_string_buffer(b"\x5a" * 64, 64)
        expect(h, h.lib.aethercl_program_binary(program, out, min(size - 1, 63)), 0,
               {C_OUT_OF_RANGE}, ["capacity"])
        if out.raw != b"\x5a" * 64:
            fail("a refused copy wrote the output")
    add(name, "capacity_one_short", too_small)
    add(name, "capacity=0_with_out", lambda h, o: expect(
        h, h.lib.aethercl_program_binary(o.program(), ctypes.create_string_buffer(8), 0), 0,
        {C_OUT_OF_RANGE}))

    def exact(h, o):
        program = o.program()
        size = h.lib.aethercl_program_binary(program, None, 0)
        out = ctypes.create_string_buffer(size + 8)
        h.succeeded(h.lib.aethercl_program_binary(program, out, size + 8), size)
    add(name, "capacity_larger_than_needed", exact)

    name = "aethercl_program_destroy"
    add(name, "baseline", lambda h, o: h.succeeded(
        h.lib.aethercl_program_destroy(o.programs.pop(o.programs.index(o.program())))))
    for kind in TOKEN_KINDS:
        add(name, f"program={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_program_destroy(bad_token(h, o, kind, PROGRAM_TAG)), 0,
            TOKEN_CODES, [TOKEN_WORDS[kind]]))


def kernel_cases(add) -> None:
    name = "aethercl_kernel_create"

    def create(h, program, kernel_name):
        handle = h.lib.aethercl_kernel_create(program, kernel_name)
        if handle:
            h.lib.aethercl_kernel_destroy(handle)
        return handle

    add(name, "baseline", lambda h, o: h.succeeded(create(h, o.program(), b"k"), True))
    for kind in TOKEN_KINDS:
        add(name, f"program={kind}", lambda h, o, kind=kind: expect(
            h, create(h, bad_token(h, o, kind, PROGRAM_TAG), b"k"), None, TOKEN_CODES,
            [TOKEN_WORDS[kind]]))
    for case_id, kernel_name, words in (("name=NULL", None, "name is NULL"),
                                        ("name=empty", b"", "not a kernel"),
                                        ("name=unknown", b"nope", "its kernels: k"),
                                        ("name=10k_bytes", b"q" * 10_000, "not a kernel"),
                                        ("name=invalid_utf8", b"\xff\xfe", "not a kernel")):
        add(name, case_id, lambda h, o, kernel_name=kernel_name, words=words: expect(
            h, create(h, o.program(), kernel_name), None, {C_INVALID_ARGUMENT}, [words]))

    name = "aethercl_kernel_info"
    for kind in TOKEN_KINDS:
        add(name, f"kernel={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_kernel_info(bad_token(h, o, kind, KERNEL_TAG), None, 0), 0,
            TOKEN_CODES, [TOKEN_WORDS[kind]]))
    add(name, "buffer=NULL_capacity=100", lambda h, o: h.succeeded(
        h.lib.aethercl_kernel_info(o.kernel(), None, 100), True))

    def capacity_one(h, o):
        out = ctypes.create_string_buffer(b"\x77" * 8, 8)
        h.succeeded(h.lib.aethercl_kernel_info(o.kernel(), out, 1), True)
        if out.raw != b"\x00" + b"\x77" * 7:
            fail(f"capacity 1 wrote {out.raw!r}")
    add(name, "capacity=1", capacity_one)

    name = "aethercl_kernel_destroy"
    add(name, "baseline", lambda h, o: h.succeeded(
        h.lib.aethercl_kernel_destroy(o.kernels.pop(o.kernels.index(o.kernel())))))
    for kind in TOKEN_KINDS:
        add(name, f"kernel={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_kernel_destroy(bad_token(h, o, kind, KERNEL_TAG)), 0, TOKEN_CODES,
            [TOKEN_WORDS[kind]]))


def launch_cases(add) -> None:
    name = "aethercl_launch"

    def ok(h, o, change=None):
        launch = Launch(h, o)
        if change:
            change(launch)
        h.succeeded(launch.run())

    def refused(h, o, change, codes, words=(), args_null=False):
        launch = Launch(h, o)
        change(launch)
        expect(h, launch.run(args_null), 0, codes, words)
        launch.output_untouched()

    add(name, "baseline", lambda h, o: ok(h, o))
    add(name, "local=NULL", lambda h, o: ok(h, o, lambda l: setattr(l, "local_size", None)))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, o, gpu=gpu: ok(h, o, lambda l: setattr(l, "gpu",
                                                                                       gpu)))
    for kind in TOKEN_KINDS:
        def bad_kernel(h, o, kind=kind):
            token = bad_token(h, o, kind, KERNEL_TAG)
            refused(h, o, lambda l: setattr(l, "kernel", token), TOKEN_CODES, [TOKEN_WORDS[kind]])
        add(name, f"kernel={kind}", bad_kernel)
    add(name, "stream=token", lambda h, o: refused(h, o, lambda l: setattr(l, "stream", 0xC1A0),
                                                   {C_INVALID_HANDLE}, ["stream"]))
    for value in (0, 4, -1, INT_MIN, INT_MAX):
        add(name, f"work_dim={value}", lambda h, o, value=value: refused(
            h, o, lambda l: setattr(l, "work_dim", value), {C_INVALID_ARGUMENT}, ["work_dim"]))
    add(name, "global=NULL", lambda h, o: refused(
        h, o, lambda l: (setattr(l, "global_size", None), setattr(l, "work_dim", 1)),
        {C_INVALID_ARGUMENT}, ["global_size is NULL"]))

    def zero(h, o):
        launch = Launch(h, o)
        launch.global_size = [0]
        h.succeeded(launch.run())
        launch.output_untouched()
    add(name, "global=0_is_a_no_op", zero)
    for case_id, global_size, local_size in (("global=SIZE_MAX", [SIZE_MAX], None),
                                             ("global_product_overflows", [2**40, 2**40], None),
                                             ("local=0", [4], [0]),
                                             ("local_not_dividing", [6], [4]),
                                             ("local=SIZE_MAX", [4], [SIZE_MAX]),
                                             ("local_over_the_limit", [2**20], [2**20])):
        add(name, case_id, lambda h, o, g=global_size, l_=local_size: refused(
            h, o, lambda l: (setattr(l, "global_size", g), setattr(l, "local_size", l_)),
            {C_INVALID_ARGUMENT}))
    for count in (-1, 0, 2, 4, INT_MAX, INT_MIN):
        add(name, f"num_args={count}", lambda h, o, count=count: refused(
            h, o, lambda l: setattr(l, "num_args", count), {C_INVALID_ARGUMENT}, ["num_args"]))
    add(name, "args=NULL", lambda h, o: refused(h, o, lambda l: None, {C_INVALID_ARGUMENT},
                                                ["args is NULL"], args_null=True))

    def arg_change(index, kind=None, size=None, value="keep"):
        def change(launch):
            arg = launch.args[index]
            launch.args[index] = launch.Arg(arg.kind if kind is None else kind,
                                            arg.size if size is None else size,
                                            arg.value if value == "keep" else value)
        return change

    for kind in (-1, 3, INT_MAX):
        add(name, f"args[0].kind={kind}", lambda h, o, kind=kind: refused(
            h, o, arg_change(0, kind=kind), {C_INVALID_ARGUMENT}, ["args[0].kind"]))
    add(name, "scalar_for_buffer", lambda h, o: refused(
        h, o, arg_change(0, kind=1, size=4), {C_INVALID_ARGUMENT}, ["args[0] is a scalar"]))
    add(name, "local_for_scalar", lambda h, o: refused(
        h, o, arg_change(1, kind=2), {C_INVALID_ARGUMENT}, ["args[1] is local"]))
    add(name, "buffer_for_local", lambda h, o: refused(
        h, o, lambda l: arg_change(2, kind=0, value=l.out)(l), {C_INVALID_ARGUMENT},
        ["args[2] is a buffer"]))
    for kind in ("NULL", "never_issued", "malformed", "freed", "host_pointer", "kernel_token"):
        def bad_buffer(h, o, kind=kind):
            if kind == "NULL":
                token = None
            elif kind == "kernel_token":
                token = o.kernel()
            else:
                token = h.token(kind)
            words = {"NULL": "NULL", "never_issued": "never issued", "malformed": "not a buffer",
                     "freed": "freed", "host_pointer": "not a buffer",
                     "kernel_token": "is a kernel, not a buffer"}[kind]
            refused(h, o, arg_change(0, value=token),
                    {C_INVALID_ARGUMENT, C_INVALID_HANDLE}, ["args[0].value", words])
        add(name, f"args[0].value={kind}", bad_buffer)
    for size in (0, 1, 8, SIZE_MAX):
        add(name, f"args[1].size={size}", lambda h, o, size=size: refused(
            h, o, arg_change(1, size=size), {C_INVALID_ARGUMENT}, ["args[1].size"]))
    add(name, "args[1].value=NULL", lambda h, o: refused(
        h, o, arg_change(1, value=None), {C_INVALID_ARGUMENT}, ["args[1].value is NULL"]))
    add(name, "args[2].size=0", lambda h, o: refused(
        h, o, arg_change(2, size=0), {C_INVALID_ARGUMENT}, ["args[2].size is 0"]))
    for size in (SIZE_MAX, 2**40):
        add(name, f"args[2].size={size}", lambda h, o, size=size: refused(
            h, o, arg_change(2, size=size), {C_OUT_OF_RANGE}, ["local memory"]))

    def local_over_device(h, o):
        info = json.loads(h.lib.json_call("aethercl_device_info", h.index))
        refused(h, o, arg_change(2, size=info["local_mem_bytes"] + 1), {C_OUT_OF_RANGE},
                ["local memory"])
    add(name, "args[2].size=local_mem+1", local_over_device)


def typed_memory_cases(add) -> None:
    name = "aethercl_buffer_set_dtype"
    for code in range(8):
        add(name, f"dtype={code}", lambda h, o, code=code: h.succeeded(
            h.lib.aethercl_buffer_set_dtype(h.index, h.alloc(8), code)))
    for code in (-1, 8, INT_MIN, INT_MAX):
        add(name, f"dtype={code}", lambda h, o, code=code: expect(
            h, h.lib.aethercl_buffer_set_dtype(h.index, h.alloc(8), code), 0,
            {C_INVALID_ARGUMENT}, [f"dtype = {code}"]))
    for kind in ("NULL", "never_issued", "malformed", "freed", "host_pointer"):
        add(name, f"buffer={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_buffer_set_dtype(h.index, None if kind == "NULL" else h.token(kind),
                                               0), 0, {C_INVALID_ARGUMENT, C_INVALID_HANDLE}))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, o, gpu=gpu: h.succeeded(
            h.lib.aethercl_buffer_set_dtype(gpu, h.alloc(8), 1)))

    name = "aethercl_convert"

    def convert(h, src=None, src_dtype=0, dst=None, dst_dtype=1, count=8, stream=None, gpu=None):
        src = h.alloc(32, 0x3F) if src is None else src
        dst = h.alloc(16, 0x44) if dst is None else dst
        return h.lib.aethercl_convert(h.index if gpu is None else gpu, src, src_dtype, dst,
                                      dst_dtype, count, stream)

    add(name, "baseline_f32_to_f16", lambda h, o: h.succeeded(convert(h)))
    add(name, "count=0", lambda h, o: h.succeeded(convert(h, count=0)))
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, o, gpu=gpu: h.succeeded(convert(h, gpu=gpu)))
    for field in ("src_dtype", "dst_dtype"):
        for code in (-1, 8, INT_MAX, INT_MIN):
            add(name, f"{field}={code}", lambda h, o, field=field, code=code: expect(
                h, convert(h, **{field: code}), 0, {C_INVALID_ARGUMENT}, [f"{field} = {code}"]))
    for slot in ("src", "dst"):
        for kind in ("NULL", "never_issued", "malformed", "freed", "host_pointer"):
            add(name, f"{slot}={kind}", lambda h, o, slot=slot, kind=kind: expect(
                h, convert(h, **{slot: 0 if kind == "NULL" else h.token(kind)}), 0,
                {C_INVALID_ARGUMENT, C_INVALID_HANDLE}, [slot]))

    def same(h, o):
        buffer = h.alloc(64, 0x3F)
        expect(h, convert(h, src=buffer, dst=buffer, dst_dtype=4), 0, {C_INVALID_ARGUMENT},
               ["same buffer"])
        if h.contents(buffer, 64) != bytes([0x3F]) * 64:
            fail("a refused conversion changed the buffer")
    add(name, "src==dst", same)

    def too_small(h, o, slot):
        small = h.alloc(15, 0x44)
        expect(h, convert(h, **{slot: small}), 0, {C_OUT_OF_RANGE}, [slot])
        if h.contents(small, 15) != bytes([0x44]) * 15 and slot == "dst":
            fail("a refused conversion wrote the output")
    add(name, "dst_one_byte_short", lambda h, o: too_small(h, o, "dst"))
    add(name, "src_too_small_for_f64", lambda h, o: expect(h, convert(h, src_dtype=3), 0,
                                                           {C_OUT_OF_RANGE, NOT_IMPLEMENTED}))
    for count in (SIZE_MAX, 2**62, 2**61 + 1):
        add(name, f"count={count}", lambda h, o, count=count: expect(
            h, convert(h, count=count, dst_dtype=3), 0,
            {C_INVALID_ARGUMENT, C_OUT_OF_RANGE, NOT_IMPLEMENTED}))
    add(name, "stream=token", lambda h, o: expect(h, convert(h, stream=0xC1A0), 0,
                                                  {C_INVALID_HANDLE}, ["stream"]))

    name = "aethercl_kernel_log"
    add(name, "buffer=NULL_capacity=100", lambda h, o: h.succeeded(
        h.lib.aethercl_kernel_log(h.index, None, 100), True))

    def log_capacity_one(h, o):
        out = ctypes.create_string_buffer(b"\x77" * 8, 8)
        h.succeeded(h.lib.aethercl_kernel_log(h.index, out, 1), True)
        if out.raw != b"\x00" + b"\x77" * 7:
            fail(f"capacity 1 wrote {out.raw!r}")
    add(name, "capacity=1", log_capacity_one)
    for gpu in FOREIGN_GPU_INDICES:
        add(name, f"gpu_index={gpu}", lambda h, o, gpu=gpu: h.succeeded(
            h.lib.aethercl_kernel_log(gpu, None, 0), True))

    def log_is_json(h, o):
        h.lib.aethercl_set_buffer_label(h.index, h.alloc(4), b'"\\\n')
        entries = json.loads(h.lib.json_call("aethercl_kernel_log", h.index))
        if not isinstance(entries, list):
            fail("not a JSON array")
    add(name, "valid_json", log_is_json)

    for gpu in FOREIGN_GPU_INDICES:
        add("aethercl_cl_context", f"gpu_index={gpu}", lambda h, o, gpu=gpu: h.succeeded(
            h.lib.aethercl_cl_context(gpu), True))
    add("aethercl_cl_queue", "stream=NULL", lambda h, o: h.succeeded(
        h.lib.aethercl_cl_queue(h.index, None), True))
    for kind in ("never_issued_stream", "buffer", "host_pointer"):
        def queue_bad(h, o, kind=kind):
            token = {"never_issued_stream": ((1 << 40) << 8) | 0xA5, "buffer": h.alloc(8),
                     "host_pointer": h.token("host_pointer")}[kind]
            expect(h, h.lib.aethercl_cl_queue(h.index, token), None, {C_INVALID_HANDLE},
                   ["stream"])
        add("aethercl_cl_queue", f"stream={kind}", queue_bad)
    add("aethercl_cl_mem", "baseline", lambda h, o: h.succeeded(
        h.lib.aethercl_cl_mem(h.index, h.alloc(8)), True))
    for kind in ("NULL", "never_issued", "malformed", "freed", "host_pointer"):
        add("aethercl_cl_mem", f"buffer={kind}", lambda h, o, kind=kind: expect(
            h, h.lib.aethercl_cl_mem(h.index, None if kind == "NULL" else h.token(kind)), None,
            {C_INVALID_ARGUMENT, C_INVALID_HANDLE}, ["buffer"]))


def kernel_runtime_cases() -> List[Case]:
    cases: List[Case] = []

    def add(name, case_id, function):
        def run(h, function=function):
            before = user_objects(h)
            objects = Objects(h)
            try:
                function(h, objects)
            finally:
                objects.destroy()
            if user_objects(h) != before:
                fail(f"programs/kernels {before} -> {user_objects(h)} after the case")
        cases.append((f"{name}/{case_id}", run))

    program_cases(add)
    kernel_cases(add)
    launch_cases(add)
    typed_memory_cases(add)
    return cases
