"""`aethercl` / `python -m aethercl`: the command line of the Python package.

    aethercl info [--json]   the OpenCL devices the driver sees, in gpu_index order (exit 1: none)
    aethercl version         the package, library and ABI versions

Nothing is built or installed: the library is loaded and asked; no device is initialised."""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional, Sequence

from . import __version__
from .errors import AetherCLError
from .library import Library

NO_DEVICE_HELP = (
    "no OpenCL device is visible. Install an OpenCL driver (an ICD): pocl-opencl-icd for the CPU, "
    "nvidia-opencl-icd (NVIDIA), mesa-opencl-icd or ROCm (AMD), intel-opencl-icd (Intel GPUs); "
    "check `ls /etc/OpenCL/vendors` and `clinfo -l`, and that AETHERCL_DEVICES does not exclude "
    "every device.")


def _load() -> Library:
    try:
        return Library()
    except (OSError, FileNotFoundError) as error:
        print(f"aethercl: cannot load the library: {error}", file=sys.stderr)
        sys.exit(2)


def device_infos(lib: Library) -> List[dict]:
    """aethercl_device_info of every visible device, in gpu_index order."""
    return [json.loads(lib.json_call("aethercl_device_info", index))
            for index in range(int(lib.aethercl_device_count()))]


def describe(index: int, info: dict) -> str:
    """One line per device: index, name, type, platform, compute units, memory, fp64."""
    return (f"{index}: {info['name']} [{info['type']}] on {info['platform']} - "
            f"{info['compute_units']} CUs, {info['global_mem_bytes'] / 2**30:.1f} GiB, "
            f"fp64 {'yes' if info['fp64'] else 'no'}")


def cmd_info(args: argparse.Namespace) -> int:
    lib = _load()
    try:
        infos = device_infos(lib)
    except AetherCLError as error:
        print(f"aethercl: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"library": str(lib.path), "version": __version__, "devices": infos},
                         indent=1))
    else:
        print(f"AetherCL {__version__} ({lib.path})")
        for index, info in enumerate(infos):
            print(describe(index, info))
    if not infos:
        print(f"aethercl: {NO_DEVICE_HELP}", file=sys.stderr)
        return 1
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    lib = _load()
    print(f"aethercl {__version__} (library {lib.aethercl_version().decode()}, ABI "
          f"{lib.aethercl_abi_version()}, {lib.path})")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="aethercl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"aethercl {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = commands.add_parser("info", help="list the OpenCL devices the driver sees")
    info.add_argument("--json", action="store_true", help="the driver's full JSON per device")
    info.set_defaults(run=cmd_info)
    version = commands.add_parser("version", help="package, library and ABI versions")
    version.set_defaults(run=cmd_version)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
