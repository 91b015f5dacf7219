"""libseccomp, used only to compile the worker's seccomp program."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterable
from functools import cache

from caplet._syscall._libc import libc

__all__ = [
    "LIBSECCOMP_MIN_VERSION",
    "LIBSECCOMP_SONAME",
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_NOTIFY",
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_X86_64",
    "SCMP_CMP_MASKED_EQ",
    "SCMP_FLTATR_ACT_BADARCH",
    "SCMP_FLTATR_CTL_OPTIMIZE",
    "ScmpArgCmp",
    "SeccompCompiler",
    "libseccomp_native_arch",
    "libseccomp_syscall_name",
    "libseccomp_syscall_number",
    "libseccomp_version",
    "scmp_act_errno",
]

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
    function = libc().free
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


def _libseccompcheck(result: int, what: str) -> None:
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
        _libseccompcheck(result, f"seccomp_attr_set({attribute}, {value:#x})")

    def add_arch(self, arch: int) -> None:
        _libseccompcheck(self._lib.seccomp_arch_add(self._context(), arch), "seccomp_arch_add")

    def remove_arch(self, arch: int) -> None:
        result = self._lib.seccomp_arch_remove(self._context(), arch)
        _libseccompcheck(result, "seccomp_arch_remove")

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
        _libseccompcheck(result, f"seccomp_rule_add({action:#x}, syscall {number})")

    def export(self) -> bytes:
        """The compiled program (``struct sock_filter`` entries), via a memfd."""
        fd = os.memfd_create("caplet-seccomp", os.MFD_CLOEXEC)
        try:
            result = self._lib.seccomp_export_bpf(self._context(), fd)
            _libseccompcheck(result, "seccomp_export_bpf")
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
