"""Landlock (landlock(7)): rulesets of file and port access a thread restricts
itself to.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import cache

from caplet._syscall._libc import check, libc

__all__ = [
    "LANDLOCK_CREATE_RULESET_VERSION",
    "LANDLOCK_RULE_NET_PORT",
    "LANDLOCK_RULE_PATH_BENEATH",
    "LandlockNetPortAttr",
    "LandlockPathBeneathAttr",
    "LandlockRulesetAttr",
    "landlock_abi_version",
    "landlock_add_net_rule",
    "landlock_add_path_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
]

# -- Landlock (landlock(7); the syscall numbers are the same on every architecture) --

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RULE_NET_PORT = 2


class LandlockRulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr (ABI 1: fs; ABI 4: + net; ABI 6: + scoped)."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class LandlockPathBeneathAttr(ctypes.Structure):
    """struct landlock_path_beneath_attr (packed in the UAPI header)."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class LandlockNetPortAttr(ctypes.Structure):
    """struct landlock_net_port_attr."""

    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


@cache
def _syscall_vsu() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long,
        ctypes.c_long,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint32,
        use_errno=True,
    )
    return prototype(("syscall", libc()))


@cache
def _syscall_iivu() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long,
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_uint32,
        use_errno=True,
    )
    return prototype(("syscall", libc()))


@cache
def _syscall_iu() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long, ctypes.c_long, ctypes.c_int, ctypes.c_uint32, use_errno=True
    )
    return prototype(("syscall", libc()))


def landlock_abi_version() -> int:
    """The Landlock ABI the kernel offers, 0 when it has none (or it is disabled)."""
    result = _syscall_vsu()(_SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return int(result) if result > 0 else 0


def landlock_create_ruleset(attr: LandlockRulesetAttr, size: int) -> int:
    """A new ruleset fd (close-on-exec). ``size`` selects the struct size of the ABI in use."""
    result = int(_syscall_vsu()(_SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), size, 0))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock_create_ruleset: {os.strerror(errno)}")
    return result


def landlock_add_path_rule(ruleset_fd: int, allowed_access: int, parent_fd: int) -> None:
    """Allow ``allowed_access`` beneath the directory or file open as ``parent_fd`` (O_PATH)."""
    attr = LandlockPathBeneathAttr(allowed_access, parent_fd)
    result = _syscall_iivu()(
        _SYS_LANDLOCK_ADD_RULE, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, ctypes.addressof(attr), 0
    )
    check(int(result), "landlock_add_rule(path_beneath)")


def landlock_add_net_rule(ruleset_fd: int, allowed_access: int, port: int) -> None:
    """Allow ``allowed_access`` (bind/connect TCP) for one port (Landlock ABI >= 4)."""
    attr = LandlockNetPortAttr(allowed_access, port)
    result = _syscall_iivu()(
        _SYS_LANDLOCK_ADD_RULE, ruleset_fd, LANDLOCK_RULE_NET_PORT, ctypes.addressof(attr), 0
    )
    check(int(result), "landlock_add_rule(net_port)")


def landlock_restrict_self(ruleset_fd: int) -> None:
    """Enforce the ruleset on the calling thread and its future children (needs no_new_privs)."""
    check(int(_syscall_iu()(_SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)), "landlock_restrict_self")
