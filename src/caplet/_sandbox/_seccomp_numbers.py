"""Which number is which system call, per machine: for compiling and for counting.

The filter names calls; the kernel and a denial notification number them.
libseccomp's tables translate (it knows every architecture's numbering),
completed by :data:`UNIFIED_NUMBERS` for
calls newer than the installed libseccomp, and by :data:`SYSCALL_NUMBERS`,
a small table of its own that ``caplet selftest`` and the tests use to make
raw calls (and that works without libseccomp).

This module runs inside workers: standard library and caplet base and
sandbox modules only.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Mapping
from types import MappingProxyType

from caplet._syscall import (
    SCMP_ARCH_AARCH64,
    SCMP_ARCH_X86_64,
    libseccomp_syscall_name,
    libseccomp_syscall_number,
)

__all__ = [
    "ARCH_TOKEN",
    "AUDIT_ARCH",
    "NEWEST_REVIEWED",
    "SYSCALL_NUMBERS",
    "UNIFIED_NUMBERS",
    "X32_SYSCALL_BIT",
    "denial_errno",
    "machine_or_native",
    "syscall_names",
    "syscall_number",
]

#: Syscalls added since Linux 5.1 have one number on every architecture but
#: alpha (the y2038 renumbering), so x86_64 and arm64 share these; they also
#: name calls newer than the installed libseccomp's table.
UNIFIED_NUMBERS: Mapping[str, int] = MappingProxyType(
    {
        "pidfd_send_signal": 424,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "pidfd_open": 434,
        "clone3": 435,
        "close_range": 436,
        "openat2": 437,
        "pidfd_getfd": 438,
        "faccessat2": 439,
        "process_madvise": 440,
        "epoll_pwait2": 441,
        "mount_setattr": 442,
        "quotactl_fd": 443,
        "landlock_create_ruleset": 444,
        "landlock_add_rule": 445,
        "landlock_restrict_self": 446,
        "memfd_secret": 447,
        "process_mrelease": 448,
        "futex_waitv": 449,
        "set_mempolicy_home_node": 450,
        "cachestat": 451,
        "fchmodat2": 452,
        "map_shadow_stack": 453,
        "futex_wake": 454,
        "futex_wait": 455,
        "futex_requeue": 456,
        "statmount": 457,
        "listmount": 458,
        "lsm_get_self_attr": 459,
        "lsm_set_self_attr": 460,
        "lsm_list_modules": 461,
        "mseal": 462,
        "setxattrat": 463,
        "getxattrat": 464,
        "listxattrat": 465,
        "removexattrat": 466,
        "open_tree_attr": 467,
        "file_getattr": 468,
        "file_setattr": 469,
    }
)

#: The newest syscall number this allowlist was reviewed against (Linux 6.18:
#: file_setattr). A refused call up to here was considered and left out, so it
#: fails with EPERM; a number above it is newer than the review (or a gap in
#: the table) and fails with ENOSYS, as on a kernel without it, so that
#: libraries take the fallback they have for older kernels.
NEWEST_REVIEWED = 469

#: include/uapi/linux/audit.h: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
AUDIT_ARCH: Mapping[str, int] = MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})
#: libseccomp's token for each machine (the same values, see caplet._syscall).
ARCH_TOKEN: Mapping[str, int] = MappingProxyType(
    {"x86_64": SCMP_ARCH_X86_64, "aarch64": SCMP_ARCH_AARCH64}
)

#: Syscall numbers caplet's tests and ``caplet selftest`` refer to by name, per
#: ``os.uname().machine`` (x86_64: arch/x86/entry/syscalls/syscall_64.tbl;
#: aarch64: include/uapi/asm-generic/unistd.h). The filter itself resolves
#: names through libseccomp (:func:`syscall_number`).
SYSCALL_NUMBERS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "x86_64": MappingProxyType(
            {
                "ioctl": 16,
                "socket": 41,
                "socketpair": 53,
                "clone": 56,
                "execve": 59,
                "ptrace": 101,
                "syslog": 103,
                "uselib": 134,
                "personality": 135,
                "vhangup": 153,
                "modify_ldt": 154,
                "pivot_root": 155,
                "adjtimex": 159,
                "chroot": 161,
                "acct": 163,
                "settimeofday": 164,
                "mount": 165,
                "umount2": 166,
                "swapon": 167,
                "swapoff": 168,
                "reboot": 169,
                "iopl": 172,
                "ioperm": 173,
                "init_module": 175,
                "delete_module": 176,
                "quotactl": 179,
                "lookup_dcookie": 212,
                "clock_settime": 227,
                "kexec_load": 246,
                "add_key": 248,
                "request_key": 249,
                "keyctl": 250,
                "unshare": 272,
                "perf_event_open": 298,
                "fanotify_init": 300,
                "name_to_handle_at": 303,
                "open_by_handle_at": 304,
                "clock_adjtime": 305,
                "setns": 308,
                "process_vm_readv": 310,
                "process_vm_writev": 311,
                "finit_module": 313,
                "kexec_file_load": 320,
                "bpf": 321,
                "execveat": 322,
                "userfaultfd": 323,
                **UNIFIED_NUMBERS,
            }
        ),
        "aarch64": MappingProxyType(
            {
                "lookup_dcookie": 18,
                "ioctl": 29,
                "umount2": 39,
                "mount": 40,
                "pivot_root": 41,
                "chroot": 51,
                "vhangup": 58,
                "quotactl": 60,
                "acct": 89,
                "personality": 92,
                "unshare": 97,
                "kexec_load": 104,
                "init_module": 105,
                "delete_module": 106,
                "clock_settime": 112,
                "syslog": 116,
                "ptrace": 117,
                "reboot": 142,
                "settimeofday": 170,
                "adjtimex": 171,
                "socket": 198,
                "socketpair": 199,
                "add_key": 217,
                "request_key": 218,
                "keyctl": 219,
                "clone": 220,
                "execve": 221,
                "swapon": 224,
                "swapoff": 225,
                "perf_event_open": 241,
                "fanotify_init": 262,
                "name_to_handle_at": 264,
                "open_by_handle_at": 265,
                "clock_adjtime": 266,
                "setns": 268,
                "process_vm_readv": 270,
                "process_vm_writev": 271,
                "finit_module": 273,
                "bpf": 280,
                "execveat": 281,
                "userfaultfd": 282,
                "kexec_file_load": 294,
                **UNIFIED_NUMBERS,
            }
        ),
    }
)


X32_SYSCALL_BIT = 0x40000000  # arch/x86/include/uapi/asm/unistd.h


def machine_or_native(machine: str | None) -> str:
    """``machine``, or this machine's ``os.uname().machine`` when None."""
    return os.uname().machine if machine is None else machine


def syscall_number(name: str, machine: str | None = None) -> int | None:
    """The number of ``name`` on ``machine`` (default: this one); None where it has none.

    libseccomp's table first; calls added since Linux 5.1 also from
    :data:`UNIFIED_NUMBERS`, so that an
    older libseccomp still knows them. Raises OSError without libseccomp.
    """
    machine = machine_or_native(machine)
    unified = UNIFIED_NUMBERS.get(name)
    if unified is not None:
        return unified
    return libseccomp_syscall_number(ARCH_TOKEN[machine], name)


@functools.cache
def syscall_names(machine: str | None = None) -> Mapping[int, str]:
    """Syscall number -> name on ``machine`` (default: this one), for counting denials.

    Every number up to the newest one reviewed, from libseccomp's table and
    :data:`UNIFIED_NUMBERS`; without
    libseccomp, from :data:`SYSCALL_NUMBERS` alone (nothing is filtered
    then anyway). Empty for a machine caplet has no table for.
    """
    machine = machine_or_native(machine)
    if machine not in ARCH_TOKEN:
        return MappingProxyType({})
    names = {number: name for name, number in SYSCALL_NUMBERS[machine].items()}
    try:
        for number in range(NEWEST_REVIEWED + 1):
            name = libseccomp_syscall_name(ARCH_TOKEN[machine], number)
            if name is not None:
                names[number] = name
    except OSError:
        pass  # no libseccomp: the small table it is
    names.update({number: name for name, number in UNIFIED_NUMBERS.items()})
    return MappingProxyType(names)


def denial_errno(number: int, machine: str | None = None) -> int:
    """The errno a refused call ``number`` fails with (the supervisor's answer).

    EPERM for a call this allowlist was reviewed against and left out (a
    number up to :data:`NEWEST_REVIEWED`
    with a syscall behind it) and for the x32 ABI; ENOSYS for a number
    newer than the review or with no call behind it, as on a kernel without
    it, so that libraries fall back (:mod:`caplet._sandbox._seccomp`).
    """
    machine = machine_or_native(machine)
    if machine == "x86_64" and number & X32_SYSCALL_BIT:
        return errno.EPERM  # the x32 ABI is refused, as every x32 call was before
    if 0 <= number <= NEWEST_REVIEWED and number in syscall_names(machine):
        return errno.EPERM
    return errno.ENOSYS
