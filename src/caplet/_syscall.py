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
from collections.abc import Callable, Iterable
from functools import cache

__all__ = [
    "AT_FDCWD",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CLONE_NEWCGROUP",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "LANDLOCK_CREATE_RULESET_VERSION",
    "LANDLOCK_RULE_NET_PORT",
    "LANDLOCK_RULE_PATH_BENEATH",
    "LIBSECCOMP_MIN_VERSION",
    "LIBSECCOMP_SONAME",
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
    "PR_CAPBSET_DROP",
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "PR_SET_SECCOMP",
    "RESOLVE_BENEATH",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "RESOLVE_NO_XDEV",
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_NOTIFY",
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_X86_64",
    "SCMP_CMP_MASKED_EQ",
    "SCMP_FLTATR_ACT_BADARCH",
    "SCMP_FLTATR_CTL_OPTIMIZE",
    "SECCOMP_FILTER_FLAG_NEW_LISTENER",
    "SECCOMP_GET_ACTION_AVAIL",
    "SECCOMP_GET_NOTIF_SIZES",
    "SECCOMP_IOCTL_NOTIF_RECV",
    "SECCOMP_IOCTL_NOTIF_SEND",
    "SECCOMP_MODE_FILTER",
    "SECCOMP_SET_MODE_FILTER",
    "LandlockNetPortAttr",
    "LandlockPathBeneathAttr",
    "LandlockRulesetAttr",
    "ScmpArgCmp",
    "SeccompCompiler",
    "SeccompData",
    "SeccompNotif",
    "SeccompNotifResp",
    "SeccompNotifSizes",
    "clear_capabilities",
    "close_fds_except",
    "drop_effective_capabilities",
    "effective_capabilities",
    "install_seccomp_filter",
    "install_seccomp_listener",
    "landlock_abi_version",
    "landlock_add_net_rule",
    "landlock_add_path_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "libseccomp_native_arch",
    "libseccomp_syscall_name",
    "libseccomp_syscall_number",
    "libseccomp_version",
    "mount",
    "openat2",
    "pivot_root",
    "prctl",
    "raise_effective_capabilities",
    "scmp_act_errno",
    "seccomp_action_available",
    "seccomp_filter_flag_supported",
    "seccomp_notif_recv",
    "seccomp_notif_send",
    "seccomp_notif_sizes",
    "set_child_subreaper",
    "set_dumpable",
    "set_no_new_privs",
    "set_parent_death_signal",
    "sethostname",
    "umount2",
    "unshare",
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


def clear_capabilities() -> None:
    """Empty the calling thread's effective, permitted and inheritable sets (capset(2)).

    Irreversible: a capability that is not permitted can never be raised
    again, and the ambient set empties with the permitted one
    (capabilities(7)). The bounding set is separate (``PR_CAPBSET_DROP``).
    """
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()  # ctypes zero-fills: every set empty
    _check(_libc().capset(ctypes.byref(header), data), "capset(2)")


def _set_effective(capabilities: Iterable[int], *, enabled: bool) -> None:
    header, data = _capget()
    for capability in capabilities:
        word, bit = divmod(capability, 32)
        if enabled:
            data[word].effective |= 1 << bit
        else:
            data[word].effective &= ~(1 << bit) & 0xFFFFFFFF
    _check(_libc().capset(ctypes.byref(header), data), "capset(2)")


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
    return prototype(("prctl", _libc()))


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
    return prototype(("syscall", _libc()))


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
    function = _libc().unshare
    function.argtypes = (ctypes.c_int,)
    function.restype = ctypes.c_int
    return function


def unshare(flags: int) -> None:
    """unshare(2): move the calling thread into new namespaces (``CLONE_NEW*``)."""
    _check(_unshare()(flags), f"unshare({flags:#x})")


@cache
def _mount() -> Callable[..., int]:
    function = _libc().mount
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
    _check(result, f"mount({source!r}, {target!r}, {fstype!r}, {flags:#x})")


@cache
def _umount2() -> Callable[..., int]:
    function = _libc().umount2
    function.argtypes = (ctypes.c_char_p, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


def umount2(target: str, flags: int = 0) -> None:
    """umount2(2)."""
    _check(_umount2()(os.fsencode(target), flags), f"umount2({target!r})")


@cache
def _syscall_pp() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p, use_errno=True
    )
    return prototype(("syscall", _libc()))


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2) (raw syscall: glibc has no wrapper)."""
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"pivot_root: unsupported architecture {os.uname().machine}")
    result = _syscall_pp()(number, os.fsencode(new_root), os.fsencode(put_old))
    _check(int(result), f"pivot_root({new_root!r}, {put_old!r})")


def sethostname(name: str) -> None:
    """sethostname(2) (in a new UTS namespace, so the host's name is not shown)."""
    function = _libc().sethostname
    function.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    function.restype = ctypes.c_int
    raw = name.encode("ascii")
    _check(function(raw, len(raw)), f"sethostname({name!r})")


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
    return prototype(("syscall", _libc()))


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
    return prototype(("syscall", _libc()))


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
    return prototype(("syscall", _libc()))


@cache
def _syscall_iu() -> Callable[..., int]:
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_long, ctypes.c_long, ctypes.c_int, ctypes.c_uint32, use_errno=True
    )
    return prototype(("syscall", _libc()))


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
    _check(int(result), "landlock_add_rule(path_beneath)")


def landlock_add_net_rule(ruleset_fd: int, allowed_access: int, port: int) -> None:
    """Allow ``allowed_access`` (bind/connect TCP) for one port (Landlock ABI >= 4)."""
    attr = LandlockNetPortAttr(allowed_access, port)
    result = _syscall_iivu()(
        _SYS_LANDLOCK_ADD_RULE, ruleset_fd, LANDLOCK_RULE_NET_PORT, ctypes.addressof(attr), 0
    )
    _check(int(result), "landlock_add_rule(net_port)")


def landlock_restrict_self(ruleset_fd: int) -> None:
    """Enforce the ruleset on the calling thread and its future children (needs no_new_privs)."""
    _check(int(_syscall_iu()(_SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)), "landlock_restrict_self")


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
    return prototype(("ioctl", _libc()))


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
    _check(result, "ioctl(SECCOMP_IOCTL_NOTIF_RECV)")


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
    _check(result, "ioctl(SECCOMP_IOCTL_NOTIF_SEND)")


# -- libseccomp (seccomp_init(3), seccomp_rule_add(3), seccomp_export_bpf(3)) ---
# Used only to *compile* the worker's seccomp program (in the zygote, once);
# workers install the exported bytes with the calls above. Values from
# libseccomp's include/seccomp.h (stable ABI of libseccomp.so.2).

LIBSECCOMP_SONAME = "libseccomp.so.2"
#: Oldest release with what caplet uses: SCMP_FLTATR_CTL_OPTIMIZE, SCMP_ACT_NOTIFY.
LIBSECCOMP_MIN_VERSION = (2, 5, 0)
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_ACT_NOTIFY = 0x7FC00000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
SCMP_FLTATR_ACT_BADARCH = 2
SCMP_FLTATR_CTL_OPTIMIZE = 8
#: SCMP_ARCH_* tokens: the kernel's AUDIT_ARCH_* values, except x32, which
#: libseccomp tells apart from x86_64 by dropping __AUDIT_ARCH_64BIT.
SCMP_ARCH_X86_64 = 0xC000003E
SCMP_ARCH_X32 = 0x4000003E
SCMP_ARCH_AARCH64 = 0xC00000B7
_NR_SCMP_ERROR = -1


def scmp_act_errno(number: int) -> int:
    """SCMP_ACT_ERRNO(number): fail the call with ``number`` without running it."""
    return 0x00050000 | (number & 0xFFFF)


class ScmpArgCmp(ctypes.Structure):
    """struct scmp_arg_cmp: one comparison of a system call argument."""

    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _ScmpVersion(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint))


@cache
def _libseccomp() -> ctypes.CDLL:
    """The loaded library; OSError when it is not installed (the caller says how to get it)."""
    lib = ctypes.CDLL(LIBSECCOMP_SONAME, use_errno=True)
    lib.seccomp_version.argtypes = ()
    lib.seccomp_version.restype = ctypes.POINTER(_ScmpVersion)
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.restype = None
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_attr_set.restype = ctypes.c_int
    for name in ("seccomp_arch_add", "seccomp_arch_remove"):
        function = getattr(lib, name)
        function.argtypes = (ctypes.c_void_p, ctypes.c_uint32)
        function.restype = ctypes.c_int
    lib.seccomp_arch_native.argtypes = ()
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ScmpArgCmp),
    )
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name_arch.argtypes = (ctypes.c_uint32, ctypes.c_char_p)
    lib.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    # Returns a malloc(3)ed string the caller frees (seccomp_syscall_resolve_name(3)).
    lib.seccomp_syscall_resolve_num_arch.argtypes = (ctypes.c_uint32, ctypes.c_int)
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p
    return lib


@cache
def _free() -> Callable[..., None]:
    function = _libc().free
    function.argtypes = (ctypes.c_void_p,)
    function.restype = None
    return function


def libseccomp_version() -> tuple[int, int, int]:
    """The installed libseccomp's version; OSError when the library cannot be loaded."""
    version = _libseccomp().seccomp_version().contents
    return int(version.major), int(version.minor), int(version.micro)


def libseccomp_native_arch() -> int:
    """The SCMP_ARCH_* token of the running kernel's native ABI."""
    return int(_libseccomp().seccomp_arch_native())


def _libseccomp_check(result: int, what: str) -> None:
    # libseccomp returns -errno itself and does not promise to set errno.
    if result < 0:
        raise OSError(-result, f"{what}: {os.strerror(-result)}")


def libseccomp_syscall_number(arch: int, name: str) -> int | None:
    """The number of syscall ``name`` on ``arch``; None when libseccomp has none there.

    libseccomp answers a negative pseudo number (``__PNR_*``) for a call it
    knows that this architecture lacks (``open`` on arm64), and
    ``__NR_SCMP_ERROR`` for one it does not know at all (newer than its table).
    """
    number = int(_libseccomp().seccomp_syscall_resolve_name_arch(arch, name.encode("ascii")))
    return None if number < 0 or number == _NR_SCMP_ERROR else number


def libseccomp_syscall_name(arch: int, number: int) -> str | None:
    """The name of syscall ``number`` on ``arch``; None when libseccomp's table has none."""
    pointer = _libseccomp().seccomp_syscall_resolve_num_arch(arch, number)
    if not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode("ascii")
    finally:
        _free()(pointer)


class SeccompCompiler:
    """A libseccomp filter context, used to compile rules into a classic-BPF program.

    Nothing is ever loaded into the kernel from here (``seccomp_load`` is
    not bound): :meth:`export` returns the program's bytes, which the caller
    installs itself with :func:`install_seccomp_filter` or
    :func:`install_seccomp_listener`. Use as a context manager; the
    context is released on exit.
    """

    __slots__ = ("_ctx", "_lib")

    def __init__(self, default_action: int) -> None:
        self._lib = _libseccomp()
        context = self._lib.seccomp_init(default_action)
        if not context:
            raise OSError(22, f"seccomp_init({default_action:#x}) failed (unsupported action?)")
        self._ctx: int | None = context

    def __enter__(self) -> SeccompCompiler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._ctx is not None:
            self._lib.seccomp_release(self._ctx)
            self._ctx = None

    def _context(self) -> int:
        if self._ctx is None:
            raise ValueError("the libseccomp context was released")
        return self._ctx

    def set_attribute(self, attribute: int, value: int) -> None:
        result = self._lib.seccomp_attr_set(self._context(), attribute, value)
        _libseccomp_check(result, f"seccomp_attr_set({attribute}, {value:#x})")

    def add_arch(self, arch: int) -> None:
        _libseccomp_check(self._lib.seccomp_arch_add(self._context(), arch), "seccomp_arch_add")

    def remove_arch(self, arch: int) -> None:
        result = self._lib.seccomp_arch_remove(self._context(), arch)
        _libseccomp_check(result, "seccomp_arch_remove")

    def add_rule(
        self, action: int, number: int, comparisons: Iterable[tuple[int, int, int, int]] = ()
    ) -> None:
        """seccomp_rule_add_array: ``action`` for syscall ``number`` when every
        (argument, operator, datum_a, datum_b) comparison holds."""
        items = [ScmpArgCmp(arg, op, a, b) for arg, op, a, b in comparisons]
        array = (ScmpArgCmp * max(len(items), 1))(*items)
        result = self._lib.seccomp_rule_add_array(
            self._context(), action, number, len(items), array
        )
        _libseccomp_check(result, f"seccomp_rule_add({action:#x}, syscall {number})")

    def export(self) -> bytes:
        """The compiled program (``struct sock_filter`` entries), via a memfd."""
        fd = os.memfd_create("caplet-seccomp", os.MFD_CLOEXEC)
        try:
            result = self._lib.seccomp_export_bpf(self._context(), fd)
            _libseccomp_check(result, "seccomp_export_bpf")
            size = os.fstat(fd).st_size
            chunks = []
            offset = 0
            while offset < size:
                chunk = os.pread(fd, size - offset, offset)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
