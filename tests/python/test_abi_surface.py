"""The exported ABI equals the manifest: dynamic symbols, header prototypes, dependencies, names."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from aethercl import abi

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "aethercl" / "driver.h"


@pytest.fixture(scope="module")
def manifest():
    return abi.parse_manifest((ROOT / "abi" / "driver.abi").read_text())


def test_manifest_has_the_38_seed_functions_and_unique_names(manifest):
    names = [s.name for s in manifest]
    assert len(names) == len(set(names))
    assert len([s for s in manifest if s.version == "DRIVER_1"]) == 38
    assert all(s.name.startswith("aethercl_") for s in manifest if s.version != "DRIVER_1")


def test_dynamic_symbols_equal_the_manifest(lib, manifest):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib.path)], check=True,
                         capture_output=True, text=True).stdout
    exported = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) != 3 or fields[1] == "A":  # "A": version-node names, not symbols
            continue
        name, _, version = fields[2].partition("@@")
        exported[name] = version
    expected = {s.name: s.version for s in manifest}
    assert set(exported) - set(expected) == set(), "exported but not in the manifest"
    assert set(expected) - set(exported) == set(), "in the manifest but not exported"
    assert exported == expected, "symbol version nodes differ from the manifest"


def _header_prototypes():
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    prototypes = {}
    for match in re.finditer(r"AETHERCL_API\s+([^;]+?)\s*\(([^)]*)\)\s*;", text):
        head, params = " ".join(match.group(1).split()), " ".join(match.group(2).split())
        head = head.replace(" *", "* ").replace("  ", " ")
        return_type, _, name = head.strip().rpartition(" ")
        prototypes[name] = (return_type.strip(), params)
    return prototypes


def test_header_prototypes_equal_the_manifest(manifest):
    prototypes = _header_prototypes()
    assert set(prototypes) == {s.name for s in manifest}
    for symbol in manifest:
        return_type, params = prototypes[symbol.name]
        assert return_type == symbol.return_type, symbol.name
        parsed = () if params == "void" else tuple(
            abi._parse_parameter(p) for p in params.split(","))
        assert parsed == symbol.parameters, f"{symbol.name}: {params}"


def test_every_symbol_is_declared_with_its_manifest_signature(lib, manifest):
    for symbol in manifest:
        function = getattr(lib.cdll, symbol.name)
        assert function.restype == symbol.restype, symbol.name
        assert list(function.argtypes) == symbol.argtypes, symbol.name


def test_runtime_dependencies_are_only_opencl_and_the_c_cxx_runtime(lib):
    out = subprocess.run(["readelf", "-d", str(lib.path)], check=True, capture_output=True,
                         text=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))
    allowed = {"libOpenCL.so.1", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6",
               "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2"}
    if os.environ.get("ASAN_OPTIONS") or os.environ.get("TSAN_OPTIONS"):
        # a sanitizer build (ctest sets these): its runtimes are expected dependencies
        allowed |= {n for n in needed if re.match(r"lib(a|ub|t)san\.so", n)}
    assert "libOpenCL.so.1" in needed
    assert needed <= allowed, f"unexpected dependencies: {needed - allowed}"
    ldd = subprocess.run(["ldd", str(lib.path)], capture_output=True, text=True).stdout
    assert "not found" not in ldd
    assert "spdlog" not in ldd and "fmt" not in ldd


def test_client_file_names_load_the_same_library(lib):
    directory = lib.path.resolve().parent
    for name in ("driver.dll", "simulated_driver.so"):
        assert (directory / name).resolve() == lib.path.resolve()


def test_versions_match_the_header(lib):
    text = HEADER.read_text()
    version = re.search(r'#define AETHERCL_VERSION_STRING "([^"]+)"', text).group(1)
    abi_version = int(re.search(r"#define AETHERCL_ABI_VERSION (\d+)", text).group(1))
    assert lib.aethercl_version().decode() == version
    assert lib.aethercl_abi_version() == abi_version
    assert lib.aethercl_status_name(3) == b"AETHERCL_OUT_OF_RANGE"
    assert lib.aethercl_status_name(999) == b"AETHERCL_UNKNOWN_STATUS"
