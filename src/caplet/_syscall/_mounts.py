"""Namespaces and mounts (unshare(2), mount(2), umount2(2), pivot_root(2),
sethostname(2)) and openat2(2), path resolution that refuses symbolic links.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import cache

from caplet._syscall._libc import check, libc

__all__ = [
    "AT_FDCWD",
    "CLONE_NEWCGROUP",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "MNT_DETACH",
    "MS_BIND",
    "MS_MOVE",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SLAVE",
    "RESOLVE_BENEATH",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "RESOLVE_NO_XDEV",
    "mount",
    "openat2",
    "pivot_root",
    "sethostname",
    "umount2",
    "unshare",
]

# -- namespaces and mounts: unshare(2), mount(2), umount2(2), pivot_root(2) -----

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
MNT_DETACH = 0x2

#: pivot_root has no glibc wrapper; its number differs per architecture
#: (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


@cache
def _unshare() -> Callable[..., int]:
    function = libc().unshare
    function.argtypes = (ctypes.c_int,)
    function.restype = ctypes.c_int
    return function


def unshare(flags: int) -> None:
    """unshare(2): move the calling thread into new namespaces (``CLONE_NEW*``)."""
    check(_unshare()(flags), f"unshare({flags:#x})")


@cache
def _mount() -> Callable[..., int]:
    function = libc().mount
    function.argtypes = (
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    )
    function.restype = ctypes.c_int
    return function


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """mount(2); ``None`` passes NULL for source, type or data."""

    def encode(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    result = _mount()(encode(source), encode(target), encode(fstype), flags, encode(data))
    check(result, f"mount({source!r}, {target!r}, {fstype!r}, {flags:#x})")


@cache
def _umount2() -> Callable[..., int]:
    function = libc().umount2
    function.argtypes = (ctypes.c_char_p, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


def umount2(target: str, flags: int = 0) -> None:
    """umount2(2)."""
    check(_umount2()(os.fsencode(target), flags), f"umount2({target!r})")


@cache
def _syscall_pp() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p, use_errno=True
    )
    return prototype(("syscall", libc()))


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2) (raw syscall: glibc has no wrapper)."""
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"pivot_root: unsupported architecture {os.uname().machine}")
    result = _syscall_pp()(number, os.fsencode(new_root), os.fsencode(put_old))
    check(int(result), f"pivot_root({new_root!r}, {put_old!r})")


def sethostname(name: str) -> None:
    """sethostname(2) (in a new UTS namespace, so the host's name is not shown)."""
    function = libc().sethostname
    function.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    function.restype = ctypes.c_int
    raw = name.encode("ascii")
    check(function(raw, len(raw)), f"sethostname({name!r})")


# -- openat2(2): path resolution that refuses symbolic links ---------------------------

#: openat2 is 437 on every architecture (added after the y2038 renumbering).
_SYS_OPENAT2 = 437
#: include/uapi/linux/openat2.h
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


@cache
def _syscall_openat2() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long,
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(_OpenHow),
        ctypes.c_size_t,
        use_errno=True,
    )
    return prototype(("syscall", libc()))


def openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """openat2(2) (raw syscall: glibc has no wrapper); returns the new descriptor.

    ``flags`` must carry O_CLOEXEC itself; OSError(ENOSYS) on kernels before 5.6.
    """
    how = _OpenHow(flags, 0, resolve)
    result = int(
        _syscall_openat2()(
            _SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how)
        )
    )
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"openat2({path!r}): {os.strerror(errno)}", path)
    return result
