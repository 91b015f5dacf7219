"""seccomp-bpf: the system calls a worker may never make (seccomp(2)).

A worker calls :func:`apply_seccomp` after its namespaces, mounts and
Landlock ruleset are in place and before any plugin byte is imported. The
filter is a classic-BPF program written here: libseccomp's Python bindings
are not on PyPI in maintained form (``pyseccomp`` last released in 2021, the
official ``seccomp`` module only ships with the C library's source tree), and
the program is small enough to assemble and review by hand.

What it does, in order:

1. the architecture in ``seccomp_data.arch`` must be the one the filter was
   built for, otherwise the process is killed (SECCOMP_RET_KILL_PROCESS):
   a syscall number means something else under another ABI (i386 via
   ``int 0x80``, 32-bit ARM compat), so the number checks below would be
   meaningless;
2. on x86_64 the x32 ABI (``nr >= __X32_SYSCALL_BIT``) is refused, for the
   same reason;
3. kernel-attack-surface and escape syscalls (ptrace, mount and the new mount
   API, unshare/setns, bpf, perf_event_open, keys, kexec, modules,
   userfaultfd, io_uring, ...) return EPERM;
4. argument checks: ``personality`` only as the query ``personality(0xffffffff)``;
   ``ioctl`` TIOCSTI/TIOCLINUX (terminal input injection); ``clone`` with any
   CLONE_NEW* flag; ``socket``/``socketpair`` with any family but AF_UNIX
   (the network goes through the host's broker); these return EPERM;
5. ``clone3`` returns ENOSYS: its flags live in a struct in memory that BPF
   cannot read, so it cannot be filtered; ENOSYS (not EPERM) makes glibc fall
   back to ``clone``, which is filtered. This is what Docker's and
   containerd's default profiles do (moby/moby#42681, containerd#5982) and
   what Chromium's baseline policy does for the same reason;
6. ``execve``/``execveat`` return EPERM unless ``allow_exec``;
7. everything else is allowed.

Argument checks look at the low 32 bits only: each of those arguments is an
``int``/``unsigned int`` in the kernel's SYSCALL_DEFINE (and ``clone`` uses
``lower_32_bits(clone_flags)``), so the kernel ignores the high half too; a
64-bit comparison would let ``ioctl(fd, 0x1_0000_5412)`` through as TIOCSTI.
Both supported architectures are little-endian, so the low half of
``args[i]`` is at offset ``16 + 8 * i``.

Counting denials ("a denied syscall returns EPERM and is counted"): built
with ``notify=True``, every EPERM above becomes SECCOMP_RET_USER_NOTIF
(seccomp_unotify(2)) and :func:`apply_seccomp` installs the program with
SECCOMP_FILTER_FLAG_NEW_LISTENER, returning the listener fd. The worker
hands that fd to the zygote, whose :class:`DenialCounter` answers every
notification with ``error = -EPERM`` (never SECCOMP_USER_NOTIF_FLAG_CONTINUE:
the syscall is not run) and counts it by name, so the plugin observes exactly
what RET_ERRNO would give it. clone3's ENOSYS and the foreign-architecture
kill are not denials of a plugin's request and stay as they are. RET_TRAP
with a SIGSYS handler was the alternative, rejected: the plugin could
replace the handler. Where the kernel lacks user notification
(:func:`seccomp_notify_problem`), workers get the RET_ERRNO program and
denials go uncounted.

This module runs inside workers: it imports only the standard library and
caplet base modules.
"""

from __future__ import annotations

import errno
import functools
import os
import select
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from caplet._errors import SandboxError
from caplet._syscall import (
    SECCOMP_FILTER_FLAG_NEW_LISTENER,
    SeccompNotif,
    install_seccomp_filter,
    install_seccomp_listener,
    seccomp_action_available,
    seccomp_filter_flag_supported,
    seccomp_notif_recv,
    seccomp_notif_send,
    seccomp_notif_sizes,
    set_no_new_privs,
)

__all__ = [
    "AUDIT_ARCH",
    "DENIED_SYSCALLS",
    "MAX_DENIAL_NAMES",
    "SERVE_BATCH",
    "SYSCALL_NUMBERS",
    "DenialCounter",
    "apply_seccomp",
    "build_filter",
    "prepare_filters",
    "seccomp_available",
    "seccomp_enforced",
    "seccomp_notify_problem",
    "syscall_names",
]

#: include/uapi/linux/audit.h: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
AUDIT_ARCH: Mapping[str, int] = MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})

#: Syscalls that always fail with EPERM (names absent on an architecture are skipped).
DENIED_SYSCALLS: tuple[str, ...] = (
    # other processes' memory and execution
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    # mounts and namespaces (the jail is already built)
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "open_tree_attr",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    # kernel attack surface
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    # whole-system administration
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "syslog",
    "vhangup",
    # x86_64 only: port I/O, LDT changes, a.out libraries
    "iopl",
    "ioperm",
    "modify_ldt",
    "uselib",
)

#: Syscall numbers per ``os.uname().machine``: x86_64 from
#: arch/x86/entry/syscalls/syscall_64.tbl, aarch64 from
#: include/uapi/asm-generic/unistd.h (arm64 has no legacy calls such as
#: ``open``, ``fork`` or ``iopl``). Numbers >= 424 are shared by every
#: architecture since the y2038 renumbering.
#: Syscalls added since Linux 5.1 (io_uring onwards) have one number on
#: every architecture but alpha, so both tables share these entries.
_UNIFIED_NUMBERS: Mapping[str, int] = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "open_tree_attr": 467,
}

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
                **_UNIFIED_NUMBERS,
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
                **_UNIFIED_NUMBERS,
            }
        ),
    }
)

# -- seccomp(2) return values (include/uapi/linux/seccomp.h) ---------------------
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_USER_NOTIF = 0x7FC00000
_RET_ALLOW = 0x7FFF0000

# -- classic BPF opcodes (include/uapi/linux/bpf_common.h) -----------------------
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K

# -- struct seccomp_data offsets: int nr; __u32 arch; __u64 ip; __u64 args[6] ----
_OFFSET_NR = 0
_OFFSET_ARCH = 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # little-endian: the low 32 bits come first


_X32_SYSCALL_BIT = 0x40000000  # arch/x86/include/uapi/asm/unistd.h
_AF_UNIX = 1  # include/linux/socket.h
_TIOCSTI = 0x5412  # include/uapi/asm-generic/ioctls.h
_TIOCLINUX = 0x541C
_PERSONALITY_QUERY = 0xFFFFFFFF  # personality(2): 0xffffffff only reads the persona
#: Every CLONE_NEW* flag clone(2) accepts in its 32-bit flags word: NEWNS,
#: NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (CLONE_NEWTIME exists only
#: for clone3 and unshare; its bit is part of the exit signal in clone's flags).
_CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
_CLONE_NEW_FLAGS |= 0x20000000 | 0x40000000

_Insn = tuple[int, int, int, int]


def _stmt(code: int, k: int) -> _Insn:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> _Insn:
    return (code, jt, jf, k)


def _errno(number: int) -> _Insn:
    return _stmt(_RET_K, _RET_ERRNO | number)


def _on_syscall(number: int, block: list[_Insn]) -> list[_Insn]:
    """Run ``block`` (which must end by returning) when nr == number, else skip it."""
    if len(block) > 0xFF:
        raise AssertionError("a BPF conditional jump reaches at most 255 instructions")
    return [_jump(_JEQ_K, number, 0, len(block)), *block]


@functools.cache
def build_filter(*, allow_exec: bool, machine: str | None = None, notify: bool = False) -> bytes:
    """The seccomp program (``struct sock_filter`` entries, 8 bytes each) for ``machine``.

    ``machine`` defaults to ``os.uname().machine``; an architecture without a
    syscall table here raises :class:`SandboxError` (fail closed: a filter
    with another architecture's numbers would deny the wrong calls). With
    ``notify`` every denial returns SECCOMP_RET_USER_NOTIF instead of
    ``RET_ERRNO | EPERM``, for a supervisor to count and answer with EPERM.
    The result depends only on the arguments, so it is cached: the zygote
    builds each variant once (:func:`prepare_filters`) and every worker
    inherits them.
    """
    machine = os.uname().machine if machine is None else machine
    numbers = SYSCALL_NUMBERS.get(machine)
    arch = AUDIT_ARCH.get(machine)
    if numbers is None or arch is None:
        raise SandboxError(
            f"seccomp: no syscall table for machine {machine!r} (supported: "
            f"{', '.join(sorted(SYSCALL_NUMBERS))}); refusing to run a worker with a "
            'filter that cannot be built. Use isolation = "best-effort" to run without it.'
        )
    deny = _stmt(_RET_K, _RET_USER_NOTIF) if notify else _errno(errno.EPERM)
    program: list[_Insn] = [
        _stmt(_LD_W_ABS, _OFFSET_ARCH),
        _jump(_JEQ_K, arch, 1, 0),
        _stmt(_RET_K, _RET_KILL_PROCESS),
        _stmt(_LD_W_ABS, _OFFSET_NR),
    ]
    if machine == "x86_64":
        program += [_jump(_JGE_K, _X32_SYSCALL_BIT, 0, 1), deny]
    denied = list(DENIED_SYSCALLS)
    if not allow_exec:
        denied += ["execve", "execveat"]
    for name in denied:
        number = numbers.get(name)
        if number is not None:
            program += _on_syscall(number, [deny])
    program += _on_syscall(numbers["clone3"], [_errno(errno.ENOSYS)])
    program += _on_syscall(
        numbers["personality"],
        [
            _stmt(_LD_W_ABS, _arg_low(0)),
            _jump(_JEQ_K, _PERSONALITY_QUERY, 0, 1),
            _stmt(_RET_K, _RET_ALLOW),
            deny,
        ],
    )
    program += _on_syscall(
        numbers["ioctl"],
        [
            _stmt(_LD_W_ABS, _arg_low(1)),
            _jump(_JEQ_K, _TIOCSTI, 2, 0),
            _jump(_JEQ_K, _TIOCLINUX, 1, 0),
            _stmt(_RET_K, _RET_ALLOW),
            deny,
        ],
    )
    program += _on_syscall(
        numbers["clone"],
        [
            # clone(2) on x86_64 and arm64: flags is the first argument.
            _stmt(_LD_W_ABS, _arg_low(0)),
            _jump(_JSET_K, _CLONE_NEW_FLAGS, 0, 1),
            deny,
            _stmt(_RET_K, _RET_ALLOW),
        ],
    )
    for name in ("socket", "socketpair"):
        program += _on_syscall(
            numbers[name],
            [
                _stmt(_LD_W_ABS, _arg_low(0)),
                _jump(_JEQ_K, _AF_UNIX, 0, 1),
                _stmt(_RET_K, _RET_ALLOW),
                deny,
            ],
        )
    program.append(_stmt(_RET_K, _RET_ALLOW))
    return b"".join(struct.pack("<HBBI", *insn) for insn in program)


def prepare_filters() -> None:
    """Build every variant of the filter now (in the zygote, before it forks)."""
    for allow_exec in (False, True):
        for notify in (False, True):
            build_filter(allow_exec=allow_exec, notify=notify)


def apply_seccomp(*, allow_exec: bool, notify: bool = False) -> int | None:
    """Install the filter on the calling thread; it is inherited and never removed.

    Sets no_new_privs first (seccomp(2): without CAP_SYS_ADMIN a filter may
    only be installed under no_new_privs, which also stops a set-uid program
    from gaining privileges the filter was written against). The filter
    covers the calling thread and everything it creates afterwards, not
    threads that already exist: call it before any thread is started.

    Without ``notify`` the filter is installed with prctl(PR_SET_SECCOMP)
    and None is returned. With ``notify`` it is the counting program,
    installed with seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER), and the
    listener fd is returned: until a supervisor serves it, a denied syscall
    blocks (and once every copy of the fd is closed it fails with ENOSYS,
    seccomp_unotify(2)), so the caller must hand it over before making any
    denied call and must never run plugin code if that fails.
    """
    program = build_filter(allow_exec=allow_exec, notify=notify)
    try:
        set_no_new_privs()
        if notify:
            return install_seccomp_listener(program)
        install_seccomp_filter(program)
    except OSError as exc:
        raise SandboxError(
            f"seccomp: the kernel refused the worker's filter ({exc.strerror}); it needs "
            "CONFIG_SECCOMP_FILTER (and Linux >= 5.0 to count denials). Use isolation = "
            '"best-effort" to run without it.'
        ) from exc
    return None


def seccomp_available() -> bool:
    """Whether this kernel can run the worker's filter (the cheap, in-process probe).

    True when ``/proc/self/status`` has a ``Seccomp:`` line (CONFIG_SECCOMP,
    proc(5)), seccomp(SECCOMP_GET_ACTION_AVAIL) confirms every action the
    filter returns (so CONFIG_SECCOMP_FILTER is there), and this machine has
    a syscall table. Nothing is installed and no process is started, so the
    zygote can call it at start-up; :func:`seccomp_enforced` is the thorough
    check for ``caplet doctor``.
    """
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return False
    if not any(line.startswith("Seccomp:") for line in status.splitlines()):
        return False
    if os.uname().machine not in SYSCALL_NUMBERS:
        return False
    return all(
        seccomp_action_available(action) for action in (_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW)
    )


def seccomp_notify_problem() -> str | None:
    """None when denials can be counted here, else why not (``caplet doctor`` shows it).

    Side-effect free: SECCOMP_GET_ACTION_AVAIL for SECCOMP_RET_USER_NOTIF,
    the NEW_LISTENER flag probed with a NULL program (see
    :func:`caplet._syscall.seccomp_filter_flag_supported`), and the kernel's
    struct seccomp_notif and seccomp_notif_resp sizes, which must be the
    ones the RECV and SEND ioctl numbers were built from.
    """
    if not seccomp_available():
        return "seccomp filters are not available"
    if not seccomp_action_available(_RET_USER_NOTIF):
        return "the kernel has no SECCOMP_RET_USER_NOTIF (needs Linux >= 5.0)"
    if not seccomp_filter_flag_supported(SECCOMP_FILTER_FLAG_NEW_LISTENER):
        return "the kernel refuses SECCOMP_FILTER_FLAG_NEW_LISTENER (needs Linux >= 5.0)"
    sizes = seccomp_notif_sizes()
    if sizes is None or (sizes.seccomp_notif, sizes.seccomp_notif_resp) != (80, 24):
        return "the kernel's struct seccomp_notif layout is not the one caplet knows"
    return None


def syscall_names(machine: str | None = None) -> Mapping[int, str]:
    """Syscall number -> name on ``machine`` (default: this one), from :data:`SYSCALL_NUMBERS`."""
    table = SYSCALL_NUMBERS.get(os.uname().machine if machine is None else machine, {})
    return MappingProxyType({number: name for name, number in table.items()})


#: Most notifications one listener gets answered per turn of the zygote's loop,
#: so a plugin flooding denied syscalls delays spawn requests and other
#: workers' notifications by at most this many round trips (each a few µs).
SERVE_BATCH = 16
#: Most distinct names counted per worker; the rest are counted as "other".
#: Names come from a fixed table, but an x32 number (any value with
#: __X32_SYSCALL_BIT set) is denied under its own number, and a plugin must
#: not be able to grow the zygote's memory or the status report with them.
MAX_DENIAL_NAMES = 64
_OVERFLOW_NAME = "other"


class DenialCounter:
    """The supervisor side of one worker's listener: answer with EPERM, count by name.

    Runs in the zygote, which polls :attr:`fd` with its other descriptors and
    calls :meth:`serve` when it is ready. Never blocks: each RECV follows a
    poll that reported POLLIN, and with one supervisor thread a pending
    notification cannot be taken by anyone else (a target killed in
    between makes RECV fail with ENOENT, it does not block).
    """

    __slots__ = ("_names", "_notification", "_poller", "counts", "fd")

    def __init__(self, fd: int, *, machine: str | None = None) -> None:
        self.fd: int | None = fd
        #: Syscall name -> times denied (kept after the listener is closed).
        self.counts: dict[str, int] = {}
        self._names = syscall_names(machine)
        self._notification = SeccompNotif()
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)

    def serve(self, limit: int = SERVE_BATCH) -> bool:
        """Answer up to ``limit`` pending notifications; False once the listener hung up.

        POLLHUP means no process uses the filter any more (seccomp_unotify(2)):
        the caller then closes the listener. OSError for anything but the
        target's death (the caller closes the listener; the worker's denied
        calls then fail with ENOSYS, still denied).
        """
        if self.fd is None:
            return False
        for _ in range(limit):
            events = self._poller.poll(0)
            if not events:
                return True
            revents = events[0][1]
            if revents & select.POLLIN:
                self._answer(self.fd)
            elif revents & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return False
        return True

    def _answer(self, fd: int) -> None:
        notification = self._notification
        try:
            seccomp_notif_recv(fd, notification)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EINTR):
                return  # the target died (or a signal came) before we took it
            raise
        self._count(int(notification.data.nr))
        try:
            # error = -EPERM, val = 0, flags = 0: the syscall fails as with
            # RET_ERRNO|EPERM and never runs (no USER_NOTIF_FLAG_CONTINUE).
            seccomp_notif_send(fd, int(notification.id), error=-errno.EPERM)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the target died waiting
                raise

    def _count(self, number: int) -> None:
        name = self._names.get(number)
        if name is None:
            name = f"syscall {number}"
        counts = self.counts
        if name not in counts and len(counts) >= MAX_DENIAL_NAMES - 1:
            name = _OVERFLOW_NAME
        counts[name] = counts.get(name, 0) + 1

    def close(self) -> None:
        """Close the listener (idempotent); :attr:`counts` stays readable."""
        if self.fd is not None:
            self._poller.unregister(self.fd)
            os.close(self.fd)
            self.fd = None


# The thorough probe applies the real filter in a throwaway interpreter and
# checks that a denied call (an AF_INET socket) is refused: seccomp is never
# tried on the calling process, and a fork from a possibly threaded host is
# avoided. The package root comes first on sys.path so that the probe runs
# this very copy of caplet.
_PROBE = """
import socket, sys
sys.path.insert(0, sys.argv[1])
from caplet._sandbox._seccomp import apply_seccomp
apply_seccomp(allow_exec=False)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
except PermissionError:
    sys.exit(0)
sys.exit(3)
"""


def seccomp_enforced() -> bool:
    """Whether a child interpreter under this module's filter is really refused a denied call.

    Costs one interpreter start (tens of milliseconds): meant for ``caplet
    doctor``, not for every worker start.
    """
    import subprocess

    if not seccomp_available():
        return False
    package_root = str(Path(__file__).resolve().parents[2])
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, package_root],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={},
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0
