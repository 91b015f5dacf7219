"""The calling process's own state: capabilities (capget(2), capset(2)), prctl(2)
and its descriptors.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterable
from functools import cache

from caplet._syscall._libc import check, libc

__all__ = [
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "PR_CAPBSET_DROP",
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "PR_SET_SECCOMP",
    "SECCOMP_MODE_FILTER",
    "clear_capabilities",
    "close_fds_except",
    "drop_effective_capabilities",
    "effective_capabilities",
    "prctl",
    "raise_effective_capabilities",
    "set_child_subreaper",
    "set_dumpable",
    "set_no_new_privs",
    "set_parent_death_signal",
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
def _cap_functions() -> ctypes.CDLL:
    lib = libc()
    for name in ("capget", "capset"):
        function = getattr(lib, name)
        function.argtypes = (ctypes.POINTER(_CapHeader), ctypes.POINTER(_CapData))
        function.restype = ctypes.c_int
    return lib


def _capget() -> tuple[_CapHeader, ctypes.Array[_CapData]]:
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()
    check(_cap_functions().capget(ctypes.byref(header), data), "capget(2)")
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


def clear_capabilities() -> None:
    """Empty the calling thread's effective, permitted and inheritable sets (capset(2)).

    Irreversible: a capability that is not permitted can never be raised
    again, and the ambient set empties with the permitted one
    (capabilities(7)). The bounding set is separate (``PR_CAPBSET_DROP``).
    """
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()  # ctypes zero-fills: every set empty
    check(_cap_functions().capset(ctypes.byref(header), data), "capset(2)")


def _set_effective(capabilities: Iterable[int], *, enabled: bool) -> None:
    header, data = _capget()
    for capability in capabilities:
        word, bit = divmod(capability, 32)
        if enabled:
            data[word].effective |= 1 << bit
        else:
            data[word].effective &= ~(1 << bit) & 0xFFFFFFFF
    check(_cap_functions().capset(ctypes.byref(header), data), "capset(2)")


# -- prctl(2) -------------------------------------------------------------------

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2


@cache
def _prctl() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        use_errno=True,
    )
    return prototype(("prctl", libc()))


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2) with its result checked; returns the (non-negative) result."""
    result = _prctl()(option, arg2, arg3, arg4, arg5)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")
    return int(result)


def set_no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: execve can never grant privileges again (needed for seccomp)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_parent_death_signal(signal_number: int) -> None:
    """PR_SET_PDEATHSIG: the kernel sends this signal when the parent thread dies."""
    prctl(PR_SET_PDEATHSIG, signal_number)


def set_child_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: orphaned descendants are reparented to us, not to init."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_dumpable(dumpable: bool) -> None:
    """PR_SET_DUMPABLE: 0 also makes /proc/<pid> root-owned and blocks ptrace attach."""
    prctl(PR_SET_DUMPABLE, int(dumpable))


def close_fds_except(keep: Iterable[int]) -> None:
    """Close every descriptor of the calling process except those in ``keep``.

    Never passes an empty range to :func:`os.closerange`: CPython hands
    ``fd_high - 1`` to close_range(2) as an unsigned int, so
    ``os.closerange(0, 0)`` becomes ``close_range(0, ~0U, 0)``, which closes
    *every* descriptor (close_range(2): ``last`` is inclusive and ``~0U``
    means "up to the highest open one"). A "close all but 0, 1, 2, ..."
    loop that started with ``closerange(0, 0)`` closed the descriptors it
    meant to keep, stderr included.
    """
    try:
        high = max(os.sysconf("SC_OPEN_MAX"), 256)
    except (OSError, ValueError):
        high = 65536
    low = 0
    for fd in sorted({fd for fd in keep if fd >= 0}):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    if low < high:
        os.closerange(low, high)
