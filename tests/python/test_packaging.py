"""The installable forms: one version everywhere (header, CMake, library, Python package), the
versioned library file and SONAME, the pip package's layout (the CMake "python" component that
`pip install .` puts into the wheel) loading its own library with no path set, the `aethercl`
command line, and the Python conventions: exception classes per status code, Device as a context
manager, pool controls, typed and documented public API, progress output."""
import ctypes
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aethercl
from aethercl import errors
from aethercl.progress import ProgressBar

ROOT = Path(__file__).resolve().parents[2]
HEADER = (ROOT / "include" / "aethercl" / "driver.h").read_text()
VERSION = re.search(r'#define AETHERCL_VERSION_STRING "([^"]+)"', HEADER).group(1)
BUILD = Path(os.environ.get("AETHERCL_BUILD_DIR", ROOT / "build"))


def test_one_version_everywhere(lib):
    major, minor, patch = (re.search(rf"#define AETHERCL_VERSION_{part} (\d+)", HEADER).group(1)
                           for part in ("MAJOR", "MINOR", "PATCH"))
    assert f"{major}.{minor}.{patch}" == VERSION
    cache = (BUILD / "CMakeCache.txt").read_text()
    assert re.search(r"CMAKE_PROJECT_VERSION:STATIC=(\S+)", cache).group(1) == VERSION
    assert lib.aethercl_version().decode() == VERSION
    assert aethercl.__version__ == VERSION
    pyproject = (ROOT / "pyproject.toml").read_text()
    regex = re.search(r"^regex = '(.*)'$", pyproject, re.M).group(1)
    assert re.search(regex.replace("\\\\", "\\"), HEADER).group("value") == VERSION


def test_library_file_is_versioned_with_a_soname(lib):
    real = lib.path.resolve()
    assert real.name == f"libaethercl.so.{VERSION}"
    dynamic = subprocess.run(["readelf", "-d", str(real)], capture_output=True, text=True,
                             check=True).stdout
    major = VERSION.split(".")[0]
    assert f"Library soname: [libaethercl.so.{major}]" in dynamic
    for name in ("driver.so", "driver.dll", "simulated_driver.so", f"libaethercl.so.{major}"):
        link = real.parent / name
        assert link.is_symlink() and link.resolve() == real, name


@pytest.fixture(scope="module")
def installed_package(tmp_path_factory):
    """The package as pip lays it out: the Python files plus the CMake "python" component."""
    prefix = tmp_path_factory.mktemp("site")
    subprocess.run(["cmake", "--install", str(BUILD), "--component", "python", "--prefix",
                    str(prefix)], check=True, capture_output=True)
    package = prefix / "aethercl"
    for source in (ROOT / "python_harness" / "aethercl").iterdir():
        if source.suffix in (".py", ".pyi") or source.name == "py.typed":
            shutil.copy(source, package / source.name)
    return prefix


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("AETHERCL_LIBRARY", "AETHERCL_BUILD_DIR", "AETHERCL_MANIFEST",
                        "PYTHONPATH")}
    env.update(extra)
    return env


def test_installed_package_loads_its_own_library_with_no_path_set(installed_package, tmp_path):
    package = installed_package / "aethercl"
    major = VERSION.split(".")[0]
    assert {f"libaethercl.so.{major}", "driver.abi", "_version.py", "py.typed",
            "__main__.py"} <= {p.name for p in package.iterdir()}
    code = ("import aethercl, json; lib = aethercl.Library(); "
            "print(json.dumps([aethercl.__version__, str(lib.path), lib.aethercl_abi_version()]))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, env=_clean_env(PYTHONPATH=str(installed_package)))
    assert result.returncode == 0, result.stderr
    version, path, abi_version = json.loads(result.stdout)
    assert version == VERSION and Path(path).parent == package
    assert abi_version == int(re.search(r"#define AETHERCL_ABI_VERSION (\d+)", HEADER).group(1))


def test_command_line_info_lists_devices_and_fails_without_one(installed_package, tmp_path):
    env = _clean_env(PYTHONPATH=str(installed_package))
    result = subprocess.run([sys.executable, "-m", "aethercl", "info"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^0: .+ \[(cpu|gpu|accelerator)\] on ", result.stdout, re.M), result.stdout
    as_json = subprocess.run([sys.executable, "-m", "aethercl", "info", "--json"], cwd=tmp_path,
                             capture_output=True, text=True, env=env, timeout=60)
    assert json.loads(as_json.stdout)["devices"][0]["compute_units"] >= 1
    env["AETHERCL_DEVICES"] = "no-such-device"
    none = subprocess.run([sys.executable, "-m", "aethercl", "info"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=60)
    assert none.returncode == 1
    assert "no OpenCL device is visible" in none.stderr and "pocl-opencl-icd" in none.stderr


def test_pyproject_declares_the_console_entry_and_typing():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'aethercl = "aethercl.__main__:main"' in pyproject
    assert (ROOT / "python_harness" / "aethercl" / "py.typed").is_file()


def test_status_codes_map_to_exception_classes(lib):
    enum = dict((int(v), n) for n, v in re.findall(r"(AETHERCL_[A-Z_]+) = (\d+)", HEADER))
    assert errors.STATUS_NAMES == enum
    for code, name in enum.items():
        assert lib.aethercl_status_name(code).decode() == name
        if code:
            error = errors.error_for("f", code, "f: message")
            assert isinstance(error, aethercl.AetherCLError) and error.status_name == name
    assert isinstance(errors.error_for("f", 4, ""), MemoryError)
    for code in (1, 2, 3):
        assert isinstance(errors.error_for("f", code, ""), ValueError)
    assert isinstance(errors.error_for("f", 9, ""), NotImplementedError)
    assert type(errors.error_for("f", 99, "")) is aethercl.AetherCLError


def test_refusals_raise_the_matching_class(device, lib):
    with pytest.raises(aethercl.InvalidArgumentError) as info:
        lib.check("execute_add_on_gpu", device.index, None, None, None, 4)
    assert isinstance(info.value, ValueError) and info.value.code == 1
    assert info.value.function == "execute_add_on_gpu"
    with pytest.raises(aethercl.InvalidHandleError):
        lib.check("aethercl_set_buffer_label", device.index, 0x7777, b"x")
    with pytest.raises(MemoryError):
        lib.check_handle("allocate_gpu_memory", device.index, 1 << 62)
    with pytest.raises(aethercl.NoDeviceError):
        lib.check("initialize_gpu", lib.aethercl_device_count())


def test_device_is_a_context_manager_and_the_current_device(device):
    assert aethercl.current_device() is None
    with aethercl.Device(device.index) as outer:
        assert aethercl.current_device() is outer
        with aethercl.Device(device.index) as inner:
            assert aethercl.current_device() is inner
            buffer = inner.zeros((5,))
        assert aethercl.current_device() is outer
        assert (buffer.to_numpy() == 0).all()
        buffer.free()
    assert aethercl.current_device() is None
    with pytest.raises(KeyError):
        with aethercl.Device(device.index):
            raise KeyError("the block's own error passes through")
    assert aethercl.current_device() is None


def test_empty_cache_and_peak_reset_from_python(device):
    dev = aethercl.Device(device.index)
    dev.alloc(1 << 20).free()
    assert dev.memory_stats()["bytes_cached"] > 0
    aethercl.empty_cache(dev)
    assert dev.memory_stats()["bytes_cached"] == 0
    dev.alloc(2 << 20).free()
    dev.reset_peak_memory_stats()
    stats = aethercl.memory_stats(dev)
    assert stats["peak_bytes_reserved"] == stats["bytes_reserved"]


def _public_callables():
    modules = [aethercl.errors, aethercl.device, aethercl.library, aethercl.progress]
    for module in modules:
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(value):
                yield f"{module.__name__}.{name}", value
                for member, function in vars(value).items():
                    if (inspect.isfunction(function) and not member.startswith("_")) or (
                            member == "__init__" and inspect.isfunction(function)):
                        yield f"{module.__name__}.{name}.{member}", function
            elif inspect.isfunction(value):
                yield f"{module.__name__}.{name}", value


def test_public_api_has_docstrings_and_type_hints():
    missing_doc, missing_hints = [], []
    for name, value in _public_callables():
        if not inspect.isclass(value) and not name.endswith("__init__") and not value.__doc__:
            missing_doc.append(name)
        if inspect.isclass(value):
            if not value.__doc__:
                missing_doc.append(name)
            continue
        signature = inspect.signature(value)
        unannotated = [p for p in signature.parameters.values()
                       if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
        if unannotated or signature.return_annotation is inspect.Signature.empty:
            missing_hints.append(name)
    assert not missing_doc, missing_doc
    assert not missing_hints, missing_hints


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_plain_lines_off_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar(50, stream=stream)
    for step in range(1, 51):
        bar.update(step, 1.0 / step, step * 100)
    bar.message("a message")
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text.count("\n") >= 25 and "a message\n" in text


def test_progress_eta_leaves_out_the_first_step(monkeypatch):
    clock = iter([0.0, 100.0, 101.0])  # start; step 1 took 100 s (kernel builds); step 2 1 s
    monkeypatch.setattr("aethercl.progress.time.perf_counter", lambda: next(clock))
    stream = io.StringIO()
    bar = ProgressBar(100, stream=stream, use_tqdm=False)
    bar.update(1, 2.0, 10, force=True)
    assert "ETA --" in stream.getvalue()
    bar.update(2, 2.0, 20, force=True)
    assert "ETA 1m38s" in stream.getvalue()  # 98 steps left at 1 s each, not 100 s each


def test_progress_with_tqdm_on_a_terminal_has_no_ansi_codes_with_no_color(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setenv("NO_COLOR", "1")
    stream = _Terminal()
    bar = ProgressBar(20, stream=stream)
    assert bar.tqdm is not None
    for step in range(1, 21):
        bar.update(step, 0.5, step)
    bar.message("between")
    bar.close()
    text = stream.getvalue()
    assert "\x1b" not in text and "between" in text and "20/20" in text
