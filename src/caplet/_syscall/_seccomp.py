"""seccomp(2): installing a classic-BPF filter, probing what the kernel supports,
and user notification (seccomp_unotify(2)).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import cache

from caplet._syscall._libc import check, libc
from caplet._syscall._process import PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prctl

__all__ = [
    "SECCOMP_FILTER_FLAG_NEW_LISTENER",
    "SECCOMP_GET_ACTION_AVAIL",
    "SECCOMP_GET_NOTIF_SIZES",
    "SECCOMP_IOCTL_NOTIF_RECV",
    "SECCOMP_IOCTL_NOTIF_SEND",
    "SECCOMP_SET_MODE_FILTER",
    "SeccompData",
    "SeccompNotif",
    "SeccompNotifResp",
    "SeccompNotifSizes",
    "install_seccomp_filter",
    "install_seccomp_listener",
    "seccomp_action_available",
    "seccomp_filter_flag_supported",
    "seccomp_notif_recv",
    "seccomp_notif_send",
    "seccomp_notif_sizes",
]


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install_seccomp_filter(program: bytes) -> None:
    """Load a classic-BPF seccomp program (8-byte ``struct sock_filter`` entries).

    Requires no_new_privs (or CAP_SYS_ADMIN). The filter applies to the
    calling thread and everything it later creates; it cannot be removed.
    """
    if not program or len(program) % 8:
        raise ValueError(
            f"a seccomp program is a non-empty multiple of 8 bytes, got {len(program)}"
        )
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


#: seccomp(2) has no glibc wrapper; arch/x86/entry/syscalls/syscall_64.tbl and
#: include/uapi/asm-generic/unistd.h number it.
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
SECCOMP_GET_ACTION_AVAIL = 2


@cache
def _syscall_uup() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long,
        ctypes.c_long,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        use_errno=True,
    )
    return prototype(("syscall", libc()))


def seccomp_action_available(action: int) -> bool:
    """seccomp(SECCOMP_GET_ACTION_AVAIL): does this kernel's filter mode support ``action``?

    Side-effect free (Linux >= 4.14). False when the kernel lacks
    CONFIG_SECCOMP_FILTER, predates the operation, or the architecture has no
    known seccomp(2) number; the errno is not an error for a probe.
    """
    number = _SYS_SECCOMP.get(os.uname().machine)
    if number is None:
        return False
    value = ctypes.c_uint32(action)
    return int(_syscall_uup()(number, SECCOMP_GET_ACTION_AVAIL, 0, ctypes.addressof(value))) == 0


# -- seccomp user notification (seccomp(2), seccomp_unotify(2)) ------------------
# Layouts and numbers from include/uapi/linux/seccomp.h (Linux >= 5.0).

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_GET_NOTIF_SIZES = 3
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3


class SeccompData(ctypes.Structure):
    """struct seccomp_data: what the filter (and the supervisor) sees of one syscall."""

    _fields_ = (
        ("nr", ctypes.c_int),
        ("arch", ctypes.c_uint32),
        ("instruction_pointer", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class SeccompNotif(ctypes.Structure):
    """struct seccomp_notif: one pending SECCOMP_RET_USER_NOTIF syscall."""

    _fields_ = (
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("data", SeccompData),
    )


class SeccompNotifResp(ctypes.Structure):
    """struct seccomp_notif_resp: the supervisor's answer (``error`` is a negative errno)."""

    _fields_ = (
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    )


class SeccompNotifSizes(ctypes.Structure):
    """struct seccomp_notif_sizes, as SECCOMP_GET_NOTIF_SIZES reports the kernel's."""

    _fields_ = (
        ("seccomp_notif", ctypes.c_uint16),
        ("seccomp_notif_resp", ctypes.c_uint16),
        ("seccomp_data", ctypes.c_uint16),
    )


def _ioc_readwrite(number: int, size: int) -> int:
    # include/uapi/asm-generic/ioctl.h (used by x86_64 and arm64): direction
    # in bits 30-31 (_IOC_READ | _IOC_WRITE = 3), size in 16-29, type in 8-15.
    return 3 << 30 | size << 16 | ord("!") << 8 | number  # SECCOMP_IOC_MAGIC '!'


#: SECCOMP_IOWR(0, struct seccomp_notif) and SECCOMP_IOWR(1, struct seccomp_notif_resp).
SECCOMP_IOCTL_NOTIF_RECV = _ioc_readwrite(0, ctypes.sizeof(SeccompNotif))
SECCOMP_IOCTL_NOTIF_SEND = _ioc_readwrite(1, ctypes.sizeof(SeccompNotifResp))


@cache
def _ioctl() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, use_errno=True
    )
    return prototype(("ioctl", libc()))


def _seccomp_number() -> int:
    number = _SYS_SECCOMP.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"seccomp: unsupported architecture {os.uname().machine}")
    return number


def install_seccomp_listener(program: bytes) -> int:
    """Load a seccomp program with SECCOMP_FILTER_FLAG_NEW_LISTENER; return the listener fd.

    Like :func:`install_seccomp_filter` (needs no_new_privs, covers the
    calling thread and what it creates later), but through seccomp(2), which
    alone can return the notification fd (close-on-exec) on which a
    supervisor answers the program's SECCOMP_RET_USER_NOTIF results.
    """
    if not program or len(program) % 8:
        raise ValueError(
            f"a seccomp program is a non-empty multiple of 8 bytes, got {len(program)}"
        )
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    result = int(
        _syscall_uup()(
            _seccomp_number(),
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_NEW_LISTENER,
            ctypes.addressof(fprog),
        )
    )
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(
            errno, f"seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): {os.strerror(errno)}"
        )
    return result


def seccomp_filter_flag_supported(flag: int) -> bool:
    """Does seccomp(SECCOMP_SET_MODE_FILTER) accept ``flag``? Installs nothing.

    The kernel validates the flags before it reads the program, so a NULL
    program fails with EFAULT when the flag is known and EINVAL when it is
    not (the probe libseccomp uses); no filter and no listener is created.
    """
    number = _SYS_SECCOMP.get(os.uname().machine)
    if number is None:
        return False
    result = int(_syscall_uup()(number, SECCOMP_SET_MODE_FILTER, flag, None))
    return result < 0 and ctypes.get_errno() == 14  # EFAULT


def seccomp_notif_sizes() -> SeccompNotifSizes | None:
    """SECCOMP_GET_NOTIF_SIZES: the kernel's struct sizes, None when it has no user notification."""
    number = _SYS_SECCOMP.get(os.uname().machine)
    if number is None:
        return None
    sizes = SeccompNotifSizes()
    result = int(_syscall_uup()(number, SECCOMP_GET_NOTIF_SIZES, 0, ctypes.addressof(sizes)))
    return sizes if result == 0 else None


def seccomp_notif_recv(listener: int, notification: SeccompNotif) -> None:
    """SECCOMP_IOCTL_NOTIF_RECV into ``notification`` (zeroed first, as the kernel requires).

    Blocks while nothing is pending: poll the listener for POLLIN first.
    ENOENT means the target died between the poll and this call.
    """
    ctypes.memset(ctypes.addressof(notification), 0, ctypes.sizeof(notification))
    result = _ioctl()(listener, SECCOMP_IOCTL_NOTIF_RECV, ctypes.addressof(notification))
    check(result, "ioctl(SECCOMP_IOCTL_NOTIF_RECV)")


def seccomp_notif_send(
    listener: int, notification_id: int, *, error: int, val: int = 0, flags: int = 0
) -> None:
    """SECCOMP_IOCTL_NOTIF_SEND: finish notification ``notification_id``.

    ``error`` is 0 or a negative errno (the syscall then fails with it);
    ENOENT means the target is gone (killed while it waited), which is not
    an error for the supervisor.
    """
    response = SeccompNotifResp(notification_id, val, error, flags)
    result = _ioctl()(listener, SECCOMP_IOCTL_NOTIF_SEND, ctypes.addressof(response))
    check(result, "ioctl(SECCOMP_IOCTL_NOTIF_SEND)")
