"""Exceptions raised for failed driver calls: AetherCLError and one subclass per status code of
aethercl_last_error_code(). Each subclass also derives from the Python built-in exception for the
same kind of failure, so `except MemoryError` catches device memory exhaustion and
`except ValueError` a refused argument."""
from __future__ import annotations

from typing import Dict, Type, Union

from . import status as _status

# Status codes and their names (generated into aethercl.status from abi/status.def).
STATUS_NAMES: Dict[int, str] = dict(_status.NAMES)


class AetherCLError(RuntimeError):
    """A driver call failed. `function` is the entry point, `code` its status code (see
    STATUS_NAMES) and `message` the text of aethercl_last_error(), which names the argument."""

    def __init__(self, function: str, code: int, message: str) -> None:
        super().__init__(message or f"{function} failed ({_status.describe(code)})")
        self.function = function
        self.code = int(code)
        self.message = message

    @property
    def status(self) -> Union[_status.Status, int]:
        """The code as an aethercl.status.Status member (the plain int for an unknown code)."""
        return _status.as_status(self.code)

    @property
    def status_name(self) -> str:
        """The code's name, e.g. "AETHERCL_OUT_OF_MEMORY"."""
        return STATUS_NAMES.get(self.code, "AETHERCL_UNKNOWN_STATUS")


class InvalidArgumentError(AetherCLError, ValueError):
    """A NULL, negative, overflowing or inconsistent argument (AETHERCL_INVALID_ARGUMENT)."""


class KernelArgumentError(InvalidArgumentError, TypeError):
    """Arguments of a kernel launch refused before the driver saw them: the wrong count, or a
    value of the wrong kind for its parameter (a number where a buffer belongs). Also a TypeError,
    as Python calls with wrong arguments raise; code 1, function "aethercl_launch"."""

    def __init__(self, message: str) -> None:
        super().__init__("aethercl_launch", 1, message)


class InvalidHandleError(AetherCLError, ValueError):
    """An unknown, freed or other-device buffer handle or address (AETHERCL_INVALID_HANDLE)."""


class OutOfRangeError(AetherCLError, ValueError):
    """A buffer is too small for the requested bytes or elements (AETHERCL_OUT_OF_RANGE)."""


class OutOfMemoryError(AetherCLError, MemoryError):
    """Device or host memory exhausted, after the pool released its cache
    (AETHERCL_OUT_OF_MEMORY)."""


class NotInitializedError(AetherCLError):
    """No device is initialised, or the call came after shutdown (AETHERCL_NOT_INITIALIZED)."""


class NoDeviceError(AetherCLError, LookupError):
    """No OpenCL device, or gpu_index out of range (AETHERCL_NO_DEVICE)."""


class BuildFailedError(AetherCLError):
    """A kernel program failed to build; the message holds the compiler log
    (AETHERCL_BUILD_FAILED)."""


class DeviceError(AetherCLError):
    """An OpenCL call failed; the message names it and its code (AETHERCL_DEVICE_ERROR)."""


class UnsupportedError(AetherCLError, NotImplementedError):
    """The device or this build lacks the feature (AETHERCL_NOT_IMPLEMENTED)."""


class InternalError(AetherCLError):
    """A bug in the driver; please report the message (AETHERCL_INTERNAL)."""


ERROR_CLASSES: Dict[int, Type[AetherCLError]] = {
    1: InvalidArgumentError,
    2: InvalidHandleError,
    3: OutOfRangeError,
    4: OutOfMemoryError,
    5: NotInitializedError,
    6: NoDeviceError,
    7: BuildFailedError,
    8: DeviceError,
    9: UnsupportedError,
    10: InternalError,
}


def error_for(function: str, code: int, message: str) -> AetherCLError:
    """The exception for a failed call: the status code's subclass, AetherCLError itself for a
    code the table does not know (a newer library)."""
    return ERROR_CLASSES.get(int(code), AetherCLError)(function, code, message)


__all__ = ["AetherCLError", "BuildFailedError", "DeviceError", "ERROR_CLASSES", "InternalError",
           "InvalidArgumentError", "InvalidHandleError", "KernelArgumentError", "NoDeviceError",
           "NotInitializedError", "OutOfMemoryError", "OutOfRangeError", "STATUS_NAMES",
           "UnsupportedError", "error_for"]
