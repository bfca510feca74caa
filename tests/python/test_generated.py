"""What is generated from the ABI's sources of truth stays generated and current: aethercl/ops.py,
ops.pyi, status.py and structs.py equal what tools/gen_abi.py makes from abi/driver.abi, the header
and abi/status.def (so a manifest line or struct field added without regenerating fails here);
the modules that describe structs (train_types, gemm, abi's aethercl_arg) use or equal the
generated layouts; the hand-written
public enum aethercl_status equals abi/status.def, and the library's names come from it; the
generator handles the parameter kinds version-3 functions use (struct pointers, token arrays,
size and index arrays, output cells), checked through real ctypes calls into Python callbacks."""
from __future__ import annotations

import ast
import ctypes
import re
import sys
import types
from pathlib import Path

import pytest

import aethercl
from aethercl import AetherCLError, Device, Library, abi, gemm, ops, status, structs, train_types

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_abi  # noqa: E402

MANIFEST = (ROOT / "abi" / "driver.abi").read_text()
HEADER = (ROOT / "include" / "aethercl" / "driver.h").read_text()
STATUS_TABLE = (ROOT / "abi" / "status.def").read_text()

# The Python names of the hand-written module the generated one replaced: kept as they were.
SEED_NAMES = {
    "initialize": "initialize_gpu", "shutdown": "shutdown_driver",
    "allocate": "allocate_gpu_memory",
    "free": "free_gpu_memory", "write": "write_host_to_gpu_blocking",
    "read": "read_gpu_to_host_blocking", "clone": "execute_clone_on_gpu",
    "log_softmax": "execute_log_softmax_stable_gpu", "matmul": "execute_matmul_on_gpu",
    "transpose_12_batched": "execute_transpose_12_batched_gpu",
    "sim_allocate": "simulated_kernel_allocate", "sim_write": "simulated_kernel_write",
    "sim_compute_unit_count": "simulated_get_compute_unit_count", "version": "aethercl_version",
    "status_name": "aethercl_status_name", "trace_summary": "aethercl_trace_summary",
}


def test_generated_files_are_current():
    stale = gen_abi.stale_files()
    assert not stale, ("out of date (run python3 tools/gen_abi.py): "
                       + ", ".join(str(p.relative_to(ROOT)) for p in stale))


def test_a_manifest_line_without_regeneration_is_detected():
    extra_line = "AETHERCL_3 | int | aethercl_example_op | int gpu_index, void* buffer\n"
    extra_doc = ("/* Does an example thing. */\n"
                 "AETHERCL_API int aethercl_example_op(int gpu_index, void* buffer);\n")
    files = gen_abi.generate(MANIFEST + extra_line, HEADER + extra_doc, STATUS_TABLE)
    assert files["ops.py"] != (ROOT / "python_harness/aethercl/ops.py").read_text()
    assert "def example_op(dev: DeviceLike, buffer: Pointer) -> None:" in files["ops.py"]
    with pytest.raises(ValueError, match="aethercl_example_op"):   # no paragraph in the header
        gen_abi.generate(MANIFEST + extra_line, HEADER, STATUS_TABLE)


def test_a_header_field_or_constant_without_regeneration_is_detected():
    header = HEADER.replace("  int compute;                     /* compute mode */",
                            "  int compute;\n  float extra;", 1)
    header = header.replace("AETHERCL_POOL_AVG = 1", "AETHERCL_POOL_AVG = 1, AETHERCL_POOL_LP = 2",
                            1)
    assert header.count("float extra;") == 1 and "AETHERCL_POOL_LP" in header
    text = gen_abi.generate(MANIFEST, header, STATUS_TABLE)["structs.py"]
    assert text != (ROOT / "python_harness/aethercl/structs.py").read_text()
    assert '("compute", ctypes.c_int),\n        ("extra", ctypes.c_float),' in text
    assert "POOL_LP = 2" in text


def test_structs_cover_the_header_and_are_the_ones_in_use():
    assert len(structs.STRUCTS) == len(re.findall(r"^typedef struct aethercl_\w+ \{", HEADER, re.M))
    enums = set(re.findall(r"^enum (aethercl_\w+) \{", HEADER, re.M)) - {"aethercl_status"}
    assert set(structs.ENUMS) == enums
    assert structs.STRUCTS["aethercl_batchnorm_desc"] is structs.BatchNormDesc
    assert gemm.GemmDesc is structs.GemmDesc
    for c_name, cls in train_types.DESCRIPTORS.items():
        assert cls._fields_ is structs.STRUCTS[c_name]._fields_, c_name
        assert ctypes.sizeof(cls) == ctypes.sizeof(structs.STRUCTS[c_name]), c_name
    # abi.py stays stdlib-only for the generator, so it keeps its own aethercl_arg: the same one.
    assert abi.AetherclArg._fields_ == structs.Arg._fields_
    assert train_types.UNARY["pow_scalar"] == structs.UNARY_POW_SCALAR == 21
    assert train_types.BINARY_OPS[structs.BINARY_POW] == "pow"


def test_every_symbol_has_one_wrapper_and_seed_names_are_kept():
    symbols = abi.parse_manifest(MANIFEST)
    assert sorted(ops.ENTRY_POINTS.values()) == sorted(s.name for s in symbols)
    for py_name, c_name in SEED_NAMES.items():
        assert ops.ENTRY_POINTS[py_name] == c_name


def test_docstrings_are_the_header_descriptions():
    descriptions = gen_abi.header_descriptions(HEADER)
    assert descriptions["aethercl_version"] == (
        'The library version, e.g. "0.1.0"; equals AETHERCL_VERSION_STRING of the header it was '
        'built with.')
    assert descriptions["execute_matmul_on_gpu"].endswith("B = 1 for 2-D.")
    for py_name, c_name in ops.ENTRY_POINTS.items():
        first_paragraph = getattr(ops, py_name).__doc__.split("\n\n")[0]
        assert " ".join(first_paragraph.split()) == descriptions[c_name], py_name


GROUPED_HEADER = """
/* ==== A section ==== */

/* ---- Normalisation ------------------------------------------------------------------------
 * x has ndim dimensions shape[0..ndim-1]; axis is in [-ndim, ndim). More text. */
AETHERCL_API int aethercl_reduce(int gpu_index, void* x);
/* Row-wise normalisation of x (rows x cols). The backward reads dy. */
typedef struct aethercl_norm_desc {
  size_t struct_size;   /* sizeof {"the caller's"} struct; ignored */
  int kind;
} aethercl_norm_desc;

AETHERCL_API int aethercl_norm_forward(int gpu_index, const aethercl_norm_desc* desc,
                                       void* stream);
AETHERCL_API int aethercl_norm_backward(int gpu_index, const aethercl_norm_desc* desc,
                                        void* stream);  /* trailing note */
/* buffers[i] := buffers[root] for every rank (root is a rank, 0 .. P-1). Then more. */
AETHERCL_API int aethercl_broadcast(void* comm, void* const* buffers, int root);
enum aethercl_kind { AETHERCL_A = 0 /* a */ };
AETHERCL_API int aethercl_undocumented(int gpu_index);
"""


def test_header_paragraphs_cover_groups_structs_and_banners():
    descriptions = gen_abi.header_descriptions(GROUPED_HEADER)
    assert descriptions == {
        "aethercl_reduce": "x has ndim dimensions shape[0..ndim-1]; axis is in [-ndim, ndim).",
        "aethercl_norm_forward": "Row-wise normalisation of x (rows x cols).",
        "aethercl_norm_backward": "Row-wise normalisation of x (rows x cols).",
        "aethercl_broadcast": "buffers[i] := buffers[root] for every rank (root is a rank, "
                              "0 .. P-1).",
    }   # aethercl_undocumented has no paragraph: the generator refuses it


def test_the_stub_declares_every_wrapper():
    stub = ast.parse((ROOT / "python_harness/aethercl/ops.pyi").read_text())
    declared = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)}
    assert declared == set(ops.ENTRY_POINTS)


# --- status codes --------------------------------------------------------------------------------

def _header_enum():
    body = re.search(r"enum aethercl_status \{(.*?)\};", HEADER, re.S).group(1)
    return [(int(value), name, " ".join(comment.split()))
            for name, value, comment in re.findall(
                r"(AETHERCL_\w+) = (\d+),?\s*/\*(.*?)\*/", body, re.S)]


def test_the_public_enum_equals_the_status_table():
    table = [(value, name, description) for value, name, _, description
             in gen_abi.status_rows(STATUS_TABLE)]
    assert _header_enum() == table
    # each status is defined once (the header's other enums, dtypes and argument kinds, are not
    # statuses)
    status_names = {name for _, name, _ in table}
    defined = [name for name in re.findall(r"(AETHERCL_\w+) = \d+", HEADER) if name in status_names]
    assert len(defined) == len(table)


def test_status_names_and_constants_come_from_the_table(lib):
    rows = gen_abi.status_rows(STATUS_TABLE)
    for value, name, _, description in rows:
        assert lib.aethercl_status_name(value).decode() == name
        assert status.NAMES[value] == name and status.DESCRIPTIONS[value] == description
        assert getattr(status, name) == value and status.Status(value).name == name[9:]
    for unknown in (-1, len(rows), 999):
        assert lib.aethercl_status_name(unknown) == b"AETHERCL_UNKNOWN_STATUS"
    error = AetherCLError("execute_add_on_gpu", 3, "")
    assert error.status is status.Status.OUT_OF_RANGE
    assert "AETHERCL_OUT_OF_RANGE" in str(error)


# --- the generator on version-3 parameter kinds -------------------------------------------------

SYNTHETIC_MANIFEST = """\
AETHERCL_3 | int | aethercl_gemm | int gpu_index, const aethercl_gemm_desc* desc, void* stream
AETHERCL_3 | int | aethercl_all_reduce | void* comm, void* const* buffers, size_t count, int dtype, int op
AETHERCL_3 | int | aethercl_launch | int gpu_index, void* kernel, void* stream, int work_dim, const size_t* global_size, const size_t* local_size, int num_args, const aethercl_arg* args
AETHERCL_3 | int | aethercl_event_elapsed_ms | void* start, void* end, float* ms
AETHERCL_3 | int | aethercl_event_query | void* event, int* done
AETHERCL_3 | void* | aethercl_comm_create | int count, const int* gpu_indices
AETHERCL_3 | size_t | aethercl_program_binary | void* program, void* out, size_t capacity
AETHERCL_3 | int | aethercl_copy_peer | int dst_gpu, void* dst, size_t dst_offset, int src_gpu, void* src, size_t src_offset, size_t size
AETHERCL_3 | void* | aethercl_stream_current | int gpu_index
AETHERCL_3 | const char* | aethercl_kind_name | int kind
"""
SYNTHETIC_HEADER = "\n".join(
    f"/* The {name} paragraph. Second sentence. */\nAETHERCL_API int {name}(void);"
    for name in re.findall(r"\| (aethercl_\w+) \|", SYNTHETIC_MANIFEST))


class Desc(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("m", ctypes.c_int), ("n", ctypes.c_int),
                ("alpha", ctypes.c_float)]


class Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("size", ctypes.c_size_t), ("value", ctypes.c_void_p)]


@pytest.fixture
def synthetic():
    """(generated module, fake library, received arguments) for SYNTHETIC_MANIFEST: each symbol is a
    ctypes function pointer with the manifest's argtypes calling a Python callback, so arguments
    go through the same ctypes conversion as a real call."""
    files = gen_abi.generate(SYNTHETIC_MANIFEST, SYNTHETIC_HEADER, STATUS_TABLE)
    module = types.ModuleType("aethercl._synthetic_ops")
    module.__package__ = "aethercl"
    exec(compile(files["ops.py"], "synthetic_ops.py", "exec"), module.__dict__)
    ast.parse(files["ops.pyi"])
    received, error = {}, {"code": 0}
    behaviour = {
        "aethercl_gemm": lambda *a: 1,
        "aethercl_all_reduce": lambda *a: 1,
        "aethercl_launch": lambda *a: 1,
        "aethercl_event_elapsed_ms": lambda start, end, ms: ms.__setitem__(0, 1.5) or 1,
        "aethercl_event_query": lambda event, done: done.__setitem__(0, 1) or 1,
        "aethercl_comm_create": lambda count, ids: 0xAE00 if count > 0 else 0,
        "aethercl_program_binary": lambda program, out, capacity: (
            5 if not out else (ctypes.memmove(out, b"hello", 5) and 5)),
        "aethercl_copy_peer": lambda *a: 1,
        "aethercl_stream_current": lambda gpu: None,
    }
    cdll = types.SimpleNamespace(aethercl_last_error_code=lambda: error["code"],
                                 aethercl_last_error=lambda: b"synthetic failure")
    keep = []
    for symbol in abi.parse_manifest(SYNTHETIC_MANIFEST):
        if symbol.name not in behaviour:
            continue

        def callback(*args, name=symbol.name):
            received[name] = args
            return behaviour[name](*args)
        function = ctypes.CFUNCTYPE(symbol.restype, *symbol.argtypes)(callback)
        keep.append(function)
        setattr(cdll, symbol.name, function)
    lib = Library.__new__(Library)
    lib.cdll, lib.symbols = cdll, []
    lib._declared = {name for name in vars(cdll)}
    yield module, Device(3, library=lib, initialize=False), received, error


def test_c_types_of_version_3_parameters():
    assert abi.ctype_of("const aethercl_gemm_desc*") is ctypes.c_void_p
    assert abi.ctype_of("void* const*") == ctypes.POINTER(ctypes.c_void_p)
    assert abi.ctype_of("const size_t*") == ctypes.POINTER(ctypes.c_size_t)
    assert abi.ctype_of("float*") == ctypes.POINTER(ctypes.c_float)
    assert abi.ctype_of("int*") == ctypes.POINTER(ctypes.c_int)
    assert abi.ctype_of("const int*") == ctypes.POINTER(ctypes.c_int)
    for unknown in ("long double", "struct x", "aethercl_arg"):
        with pytest.raises(ValueError):
            abi.ctype_of(unknown)


def test_struct_pointer_and_device_index(synthetic):
    module, dev, received, _ = synthetic
    desc = Desc(ctypes.sizeof(Desc), 7, 9, 0.5)
    module.gemm(dev, desc, None)
    gpu, address, stream = received["aethercl_gemm"]
    assert gpu == 3 and stream is None
    seen = ctypes.cast(address, ctypes.POINTER(Desc)).contents
    assert (seen.m, seen.n, seen.alpha) == (7, 9, 0.5)
    assert module.gemm.c_name == "aethercl_gemm"
    assert module.gemm.__doc__.startswith("The aethercl_gemm paragraph.")


def test_token_arrays_size_arrays_and_struct_arrays(synthetic):
    module, dev, received, _ = synthetic
    module.all_reduce(dev, 0x51AE, [0x1AE, 0x2AE], 1000, 0, 0)
    comm, buffers, count, dtype, op = received["aethercl_all_reduce"]
    assert comm == 0x51AE and [buffers[0], buffers[1]] == [0x1AE, 0x2AE] and count == 1000
    args = (Arg * 2)(Arg(0, 0, 0x1AE), Arg(1, 4, None))
    module.launch(dev, 0x3AE, None, 2, (64, 3), None, 2, args)
    gpu, kernel, stream, dims, global_size, local_size, num_args, arg_address = \
        received["aethercl_launch"]
    assert (gpu, kernel, dims, num_args) == (3, 0x3AE, 2, 2)
    assert [global_size[0], global_size[1]] == [64, 3] and not local_size
    assert arg_address == ctypes.addressof(args)


def test_output_cells_come_back(synthetic):
    module, dev, _, _ = synthetic
    ms, done = ctypes.c_float(), ctypes.c_int()
    module.event_elapsed_ms(dev, 0x1AE, 0x2AE, ms)
    module.event_query(dev, 0x1AE, done)
    assert ms.value == 1.5 and done.value == 1


def test_handles_bytes_nullable_results_and_failures(synthetic):
    module, dev, received, error = synthetic
    assert module.comm_create(dev, 2, [0, 1]) == 0xAE00
    assert list(received["aethercl_comm_create"][1][:2]) == [0, 1]
    error["code"] = 1
    with pytest.raises(AetherCLError, match="synthetic failure") as info:
        module.comm_create(dev, 0, [])
    assert info.value.function == "aethercl_comm_create"
    error["code"] = 0
    assert module.program_binary(dev, 0x4AE) == b"hello"
    module.copy_peer(dev, Device(1, library=dev.lib, initialize=False), 0x1AE, 8, 2, 0x2AE, 0, 64)
    assert received["aethercl_copy_peer"][::3] == (1, 2, 64)
    assert module.stream_current(dev) is None          # NULL: the default stream, no error
    error["code"] = 2
    with pytest.raises(AetherCLError):
        module.stream_current(dev)


def test_package_exports_the_status_table():
    assert aethercl.Status.NOT_IMPLEMENTED == 9 and aethercl.status.AETHERCL_INTERNAL == 10
