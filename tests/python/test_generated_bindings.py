"""The Rust and C++ sides of the ABI follow its sources of truth (tools/gen_bindings.py through
tools/gen_abi.py): a manifest line gives a Rust `extern "C"` declaration with the C types mapped
exactly, a header field or enum constant reaches sys.rs, both halves of the layout test and
aethercl_enums.hpp, and a C type without a Rust spelling is an error, not a guess. (The crate's own
tests run in ctest rust_bindings; that the committed files are current is test_generated's.)"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_abi  # noqa: E402
import gen_bindings  # noqa: E402

MANIFEST = (ROOT / "abi" / "driver.abi").read_text()
HEADER = (ROOT / "include" / "aethercl" / "driver.h").read_text()
STATUS_TABLE = (ROOT / "abi" / "status.def").read_text()


def committed(path: str) -> str:
    return (ROOT / path).read_text()


def test_every_manifest_symbol_is_declared_once_in_rust():
    sys_rs = committed(gen_bindings.RUST_SYS)
    for line in MANIFEST.splitlines():
        if line.strip() and not line.startswith("#"):
            name = line.split("|")[2].strip()
            assert sys_rs.count(f"pub fn {name}(") == 1, name


@pytest.mark.parametrize("c_type, rust", [
    ("int", "c_int"), ("unsigned int", "c_uint"), ("size_t", "usize"),
    ("unsigned long long", "c_ulonglong"), ("long long", "c_longlong"), ("float", "f32"),
    ("void*", "*mut c_void"), ("const void*", "*const c_void"), ("const char*", "*const c_char"),
    ("char*", "*mut c_char"), ("int*", "*mut c_int"), ("const int*", "*const c_int"),
    ("void* const*", "*const *mut c_void"), ("const size_t*", "*const usize"),
    ("const aethercl_gemm_desc*", "*const aethercl_gemm_desc"),
    ("const aethercl_arg*", "*const aethercl_arg"),
])
def test_c_types_map_to_rust_exactly(c_type, rust):
    assert gen_bindings.rust_type(c_type) == rust


def test_an_unknown_c_type_is_refused():
    with pytest.raises(ValueError, match="long double"):
        gen_bindings.rust_type("long double")


def test_a_new_manifest_line_reaches_the_rust_declarations():
    extra_line = "AETHERCL_3 | int | aethercl_example_op | int gpu_index, void* in, const size_t* sizes\n"
    extra_doc = ("/* Does an example thing. */\n"
                 "AETHERCL_API int aethercl_example_op(int gpu_index, void* in, const size_t* sizes);\n")
    files = gen_abi.generate_bindings(MANIFEST + extra_line, HEADER + extra_doc, STATUS_TABLE)
    assert files[gen_bindings.RUST_SYS] != committed(gen_bindings.RUST_SYS)
    assert ("    /// Does an example thing.\n    pub fn aethercl_example_op(gpu_index: c_int, "
            "in_: *mut c_void, sizes: *const usize) -> c_int;") in files[gen_bindings.RUST_SYS]


def test_a_header_field_and_constant_reach_rust_c_and_cpp():
    header = HEADER.replace("  int compute;                     /* compute mode */",
                            "  int compute;\n  float extra;", 1)
    header = header.replace("AETHERCL_POOL_AVG = 1", "AETHERCL_POOL_AVG = 1, AETHERCL_POOL_LP = 2", 1)
    files = gen_abi.generate_bindings(MANIFEST, header, STATUS_TABLE)
    for path in (gen_bindings.RUST_SYS, gen_bindings.RUST_LAYOUT, gen_bindings.C_LAYOUT,
                 gen_bindings.CPP_ENUMS):
        assert files[path] != committed(path), path
    assert "    pub compute: c_int,\n    pub extra: f32,\n}" in files[gen_bindings.RUST_SYS]
    assert "pub const AETHERCL_POOL_LP: c_int = 2;" in files[gen_bindings.RUST_SYS]
    assert "offsetof(aethercl_gemm_desc, extra)" in files[gen_bindings.C_LAYOUT]
    assert "(*base).extra" in files[gen_bindings.RUST_LAYOUT]
    assert "  LP = AETHERCL_POOL_LP," in files[gen_bindings.CPP_ENUMS]


def test_layout_programs_list_the_same_facts_in_the_same_order():
    c_lines = [line for line in committed(gen_bindings.C_LAYOUT).splitlines() if "printf(" in line]
    rust_lines = [line for line in committed(gen_bindings.RUST_LAYOUT).splitlines()
                  if "lines.push(" in line]
    assert len(c_lines) == len(rust_lines) > 100
    for c_line, rust_line in zip(c_lines, rust_lines):
        assert c_line.split('"')[1].split(" %zu")[0] == rust_line.split('"')[1].split(" {}")[0]


def test_cpp_enum_members_drop_only_a_shared_prefix():
    assert gen_bindings._enum_members(["POOL_MAX", "POOL_AVG"]) == ["MAX", "AVG"]
    # COMPUTE_3XTF32 would start with a digit: the names stay whole.
    assert gen_bindings._enum_members(["COMPUTE_FP32", "COMPUTE_3XTF32"]) == ["COMPUTE_FP32",
                                                                               "COMPUTE_3XTF32"]
    assert gen_bindings._enum_members(["SUM", "NO_REDUCTION"]) == ["SUM", "NO_REDUCTION"]
