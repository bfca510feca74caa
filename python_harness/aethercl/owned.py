"""OwnedHandle: the base of Python objects that own one driver handle and release it once."""
from __future__ import annotations

from typing import Optional


class OwnedHandle:
    """Owns `handle` (None once released). destroy() releases it through _release and is
    idempotent; a `with` block destroys it on exit, and garbage collection destroys a forgotten
    one."""

    handle: Optional[int] = None

    def _release(self, handle: int) -> None:
        raise NotImplementedError

    def destroy(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self._release(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # interpreter shutdown or the driver already shut down
            pass


__all__ = ["OwnedHandle"]
