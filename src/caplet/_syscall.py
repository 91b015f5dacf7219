"""Every ctypes call caplet makes lives here.

Rules (docs/architecture.md): each foreign function has ``argtypes`` and
``restype`` declared; the return value is checked before errno is read
(``use_errno=True`` makes ctypes save errno right after the call, so no
Python code in between can clobber it); failures become ``OSError`` with the
real errno, which callers translate into a :class:`CapletError` at their
boundary.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable
from functools import cache

__all__ = [
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "drop_effective_capabilities",
    "effective_capabilities",
    "raise_effective_capabilities",
]

# linux/capability.h
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
CAP_FOWNER = 3


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


_CapDataPair = _CapData * 2  # version 3 uses two 32-bit words per set


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for name in ("capget", "capset"):
        function = getattr(libc, name)
        function.argtypes = (ctypes.POINTER(_CapHeader), ctypes.POINTER(_CapData))
        function.restype = ctypes.c_int
    return libc


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _capget() -> tuple[_CapHeader, ctypes.Array[_CapData]]:
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()
    _check(_libc().capget(ctypes.byref(header), data), "capget(2)")
    return header, data


def effective_capabilities() -> frozenset[int]:
    """The calling thread's effective capability numbers (capget(2))."""
    _, data = _capget()
    mask = data[0].effective | (data[1].effective << 32)
    return frozenset(bit for bit in range(64) if mask >> bit & 1)


def drop_effective_capabilities(capabilities: Iterable[int]) -> None:
    """Clear capabilities from the calling thread's effective set (capset(2)).

    They stay in the permitted set, so this is a way to make even root obey
    file permission bits (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER),
    not a way to give them up for good; the sandbox drops the bounding set.
    """
    _set_effective(capabilities, enabled=False)


def raise_effective_capabilities(capabilities: Iterable[int]) -> None:
    """Put permitted capabilities back into the effective set (capset(2))."""
    _set_effective(capabilities, enabled=True)


def _set_effective(capabilities: Iterable[int], *, enabled: bool) -> None:
    header, data = _capget()
    for capability in capabilities:
        word, bit = divmod(capability, 32)
        if enabled:
            data[word].effective |= 1 << bit
        else:
            data[word].effective &= ~(1 << bit) & 0xFFFFFFFF
    _check(_libc().capset(ctypes.byref(header), data), "capset(2)")
