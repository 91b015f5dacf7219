"""The C library, loaded once, and the one check of a libc call's result.

Every binding in this package goes through :func:`libc` (``use_errno=True``,
so ctypes saves errno right after the call) and :func:`check` (the result is
read before errno).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

__all__ = ["check", "libc"]


@cache
def libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
