"""OpenCL C -> SPIR-V with Debian's tools: clang (OpenCL C to LLVM bitcode for spir64) and
llvm-spirv of the same LLVM version (bitcode to SPIR-V). `tools/aethercl setup` installs them
(clang-14, llvm-spirv-14). Used by the SPIR-V example and the tests; the driver itself needs no
compiler for SPIR-V."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence, Tuple


class SpirvToolsMissing(RuntimeError):
    """clang and a matching llvm-spirv were not found on PATH."""


def find_tools() -> Optional[Tuple[str, str]]:
    """(clang, llvm-spirv) of one LLVM version, newest first; None when there is no pair."""
    names = set()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names.update(os.listdir(directory))
        except OSError:
            continue
    versions = sorted({int(m.group(1)) for n in names
                       if (m := re.fullmatch(r"llvm-spirv-(\d+)", n))}, reverse=True)
    for version in versions:
        clang = shutil.which(f"clang-{version}")
        spirv = shutil.which(f"llvm-spirv-{version}")
        if clang and spirv:
            return clang, spirv
    clang, spirv = shutil.which("clang"), shutil.which("llvm-spirv")
    return (clang, spirv) if clang and spirv else None


def available() -> bool:
    return find_tools() is not None


def compile_to_spirv(source: str, options: Sequence[str] = ()) -> bytes:
    """SPIR-V bytes of an OpenCL C 1.2 source (kernels only; options go to clang, e.g. -DN=4)."""
    tools = find_tools()
    if tools is None:
        raise SpirvToolsMissing("clang and llvm-spirv of one LLVM version are needed "
                                "(tools/aethercl setup installs clang-14 and llvm-spirv-14)")
    clang, spirv = tools
    with tempfile.TemporaryDirectory(prefix="aethercl-spirv-") as directory:
        folder = Path(directory)
        (folder / "kernel.cl").write_text(source)
        subprocess.run([clang, "-cl-std=CL1.2", "-target", "spir64", "-O1", "-emit-llvm", "-c",
                        "-Xclang", "-finclude-default-header", *options,
                        str(folder / "kernel.cl"), "-o", str(folder / "kernel.bc")],
                       check=True, capture_output=True, text=True)
        subprocess.run([spirv, str(folder / "kernel.bc"), "-o", str(folder / "kernel.spv")],
                       check=True, capture_output=True, text=True)
        return (folder / "kernel.spv").read_bytes()


__all__ = ["SpirvToolsMissing", "available", "compile_to_spirv", "find_tools"]
