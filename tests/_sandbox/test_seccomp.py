"""The seccomp filter: its program decoded and emulated here, its effects on a real child.

Filters are only ever installed in a child interpreter (``python -I -c``),
which prints one JSON object of outcomes ("ok" or the errno name). With
``notify=True`` the child sends its listener to the test, which answers
the notifications itself in a plain poll loop (no thread).
"""

from __future__ import annotations

import errno
import json
import os
import re
import select
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Protocol

import pytest

from caplet._errors import SandboxError
from caplet._sandbox._seccomp import (
    AUDIT_ARCH,
    DENIED_SYSCALLS,
    MAX_DENIAL_NAMES,
    DenialCounter,
    build_filter,
    seccomp_available,
    seccomp_enforced,
    seccomp_notify_problem,
    syscall_number,
)
from caplet._sandbox._seccomp_numbers import NEWEST_REVIEWED
from caplet._sandbox._seccomp_policy import (
    ALLOWED,
    CONDITIONAL,
    QUIET_REFUSALS,
    WITH_EXEC,
    WITHOUT_EXEC,
)
from caplet._syscall import (
    SECCOMP_FILTER_FLAG_NEW_LISTENER,
    libseccomp_native_arch,
    libseccomp_syscall_number,
    seccomp_action_available,
    seccomp_filter_flag_supported,
)
from tests._sandbox import bpf

MACHINE = os.uname().machine

_PRELUDE = """
import ctypes, errno, json, os, socket, sys
from caplet._sandbox._seccomp import SYSCALL_NUMBERS, apply_seccomp

ARGS = json.loads(sys.argv[1])
NR = SYSCALL_NUMBERS[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def name(number):
    return errno.errorcode.get(number, str(number))

def attempt(action):
    try:
        action()
    except OSError as exc:
        return name(exc.errno)
    return "ok"

def raw(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return "ok" if result >= 0 else name(ctypes.get_errno())

def done(result):
    print(json.dumps(result))
"""


def _run(script: str, **args: object) -> dict[str, object]:
    code = _PRELUDE + textwrap.dedent(script)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert isinstance(result, dict)
    return result


# -- the program itself, decided by an emulator ----------------------------------------

_EPERM, _ENOSYS = errno.EPERM, errno.ENOSYS
_DENY = bpf.RET_ERRNO | _EPERM
_NOTIFY = bpf.RET_USER_NOTIF
_ALLOW = bpf.RET_ALLOW


def _compiled(name: str, machine: str) -> bool:
    """Whether ``name`` is in ``machine``'s program: a build for another machine (tests
    only) lacks the calls newer than libseccomp's native table (it translates by name)."""
    if syscall_number(name, machine) is None:
        return False
    return machine == MACHINE or (
        libseccomp_syscall_number(libseccomp_native_arch(), name) is not None
    )


def _decider(
    machine: str, *, allow_exec: bool = False, notify: bool = False, memory_bounded: bool = True
) -> Decide:
    program = build_filter(
        allow_exec=allow_exec, machine=machine, notify=notify, memory_bounded=memory_bounded
    )

    def decide(name: str, *args: int) -> int:
        number = syscall_number(name, machine)
        assert number is not None, name
        return bpf.run(program, nr=number, arch=AUDIT_ARCH[machine], args=args)

    return decide


class Decide(Protocol):
    def __call__(self, name: str, *args: int) -> int: ...


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_programs_are_cached_and_fit_the_kernel_limit(machine: str) -> None:
    program = build_filter(allow_exec=False, machine=machine)
    assert program is build_filter(allow_exec=False, machine=machine)  # built once
    assert len(program) % 8 == 0
    assert len(program) // 8 < 4096  # BPF_MAXINSNS
    assert program != build_filter(allow_exec=True, machine=machine)
    assert program != build_filter(allow_exec=False, machine=machine, notify=True)


def test_x86_64_and_aarch64_programs_differ() -> None:
    assert build_filter(allow_exec=False, machine="x86_64") != build_filter(
        allow_exec=False, machine="aarch64"
    )


def test_an_unknown_machine_fails_closed() -> None:
    with pytest.raises(SandboxError, match="'riscv64'"):
        build_filter(allow_exec=False, machine="riscv64")


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("notify", [False, True])
def test_another_abi_is_killed(machine: str, notify: bool) -> None:
    program = build_filter(allow_exec=False, machine=machine, notify=notify)
    for arch in (0x40000003, 0x40000028, AUDIT_ARCH[machine] ^ 0x80000000):  # i386, ARM, 32-bit
        for number in (0, 59, 101):
            assert bpf.run(program, nr=number, arch=arch) == bpf.RET_KILL_PROCESS


@pytest.mark.parametrize("notify", [False, True])
def test_x32_is_refused(notify: bool) -> None:
    program = build_filter(allow_exec=False, machine="x86_64", notify=notify)
    refused = _NOTIFY if notify else _DENY
    for number in (0, 1, 39, 59, 512, 0x3FFFFFFF):
        assert bpf.run(program, nr=0x40000000 | number, arch=AUDIT_ARCH["x86_64"]) == refused


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_every_listed_call_is_allowed_and_nothing_else(machine: str) -> None:
    decide = _decider(machine)
    arch = AUDIT_ARCH[machine]
    program = build_filter(allow_exec=False, machine=machine)
    allowed = set()
    for group in ALLOWED:
        for name in group.syscalls:
            if _compiled(name, machine):
                assert decide(name) == _ALLOW, (group.name, name)
                allowed.add(syscall_number(name, machine))
    for refused in WITHOUT_EXEC.syscalls:  # in no worker's filter (memfd29)
        assert decide(refused, 0, 0) == _DENY
    conditional = {syscall_number(c.syscall, machine) for c in CONDITIONAL}
    quiet = {syscall_number(q.syscall, machine) for q in QUIET_REFUSALS}
    # Every other number, reviewed or not, meets the default action.
    for number in range(1024):
        if number in allowed or number in conditional or number in quiet:
            continue
        assert bpf.run(program, nr=number, arch=arch) == _DENY, number


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_dangerous_calls_are_never_allowed(machine: str) -> None:
    decide = _decider(machine)
    notified = _decider(machine, notify=True)
    quiet = {q.syscall for q in QUIET_REFUSALS if not q.rules}  # socket: only AF_UNIX
    for name in DENIED_SYSCALLS:
        if not _compiled(name, machine):
            continue
        assert decide(name) == _DENY, name
        assert notified(name) == (_DENY if name in quiet else _NOTIFY), name


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_exec_only_with_allow_exec(machine: str) -> None:
    without, with_exec = _decider(machine), _decider(machine, allow_exec=True)
    for name in ("execve", "execveat"):
        assert without(name) == _DENY
        assert with_exec(name) == _ALLOW
    # An anonymous file is outside Landlock, and the approved program's ELF
    # interpreter maps one as a program whatever its seals: with exec, no memfd
    # (and without it none either since memfd29: see test_no_worker_gets_a_memfd).
    mfd_cloexec, mfd_noexec_seal, mfd_exec = 0x1, 0x8, 0x10
    for flags in (0, mfd_cloexec, mfd_exec, mfd_noexec_seal, mfd_noexec_seal | mfd_cloexec):
        assert with_exec("memfd_create", 0, flags) == _DENY


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("allow_exec", [False, True])
@pytest.mark.parametrize("memory_bounded", [False, True])
@pytest.mark.parametrize("notify", [False, True])
def test_no_worker_gets_a_memfd(
    machine: str, allow_exec: bool, memory_bounded: bool, notify: bool
) -> None:
    # memfd29: an anonymous file is on no mount, so no noexec mount covers it: a
    # worker wrote a library the plugin shipped as data into one and dlopened it
    # (cffi, libc's dlopen through ctypes), or mapped it a second time with
    # PROT_EXEC. On f0500b3c a worker that cannot exec got one wherever a memory
    # cgroup bounded it (as root): refused and counted now, whatever the flags.
    decide = _decider(machine, allow_exec=allow_exec, notify=notify, memory_bounded=memory_bounded)
    refused = _NOTIFY if notify else _DENY
    mfd_cloexec, mfd_allow_sealing, mfd_noexec_seal = 0x1, 0x2, 0x8
    for flags in (0, mfd_cloexec, mfd_allow_sealing, mfd_noexec_seal | mfd_cloexec):
        assert decide("memfd_create", 0, flags) == refused


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("notify", [False, True])
def test_epoll_instances_only_with_allow_exec(machine: str, notify: bool) -> None:
    # The kernel counts epoll watches per uid, not per jail (attack10): a worker
    # that cannot exec gets no instance (refused and counted); its waits stay.
    without = _decider(machine, notify=notify)
    with_exec = _decider(machine, allow_exec=True, notify=notify)
    refused = _NOTIFY if notify else _DENY
    for name in WITH_EXEC.syscalls:
        if _compiled(name, machine):  # arm64 has epoll_create1 only
            assert without(name, 0) == refused, name
            assert with_exec(name, 0) == _ALLOW, name
    for name in ("epoll_ctl", "epoll_pwait", "poll", "ppoll"):
        if _compiled(name, machine):  # arm64 has ppoll only
            assert without(name, 0) == _ALLOW, name


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("allow_exec", [False, True])
@pytest.mark.parametrize("notify", [False, True])
def test_no_memfd_where_nothing_bounds_its_pages(
    machine: str, allow_exec: bool, notify: bool
) -> None:
    # A worker with a memory limit but no memory cgroup (red-team finding 9):
    # refused and counted, whatever the flags; nothing else changes.
    decide = _decider(machine, allow_exec=allow_exec, notify=notify, memory_bounded=False)
    bounded = _decider(machine, allow_exec=allow_exec, notify=notify)
    refused = _NOTIFY if notify else _DENY
    mfd_cloexec, mfd_noexec_seal = 0x1, 0x8
    for flags in (0, mfd_cloexec, mfd_noexec_seal | mfd_cloexec):
        assert decide("memfd_create", 0, flags) == refused
    # Bounded or not, no memfd at all since memfd29 (WITHOUT_EXEC).
    assert bounded("memfd_create", 0, mfd_noexec_seal | mfd_cloexec) == refused
    for name in ("mmap", "write", "ftruncate", "pipe2", "socketpair", "clone", "tee"):
        if _compiled(name, machine):
            assert decide(name, 0, 0, 0, 0) == bounded(name, 0, 0, 0, 0), name


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("notify", [False, True])
def test_no_socket_holds_more_than_its_buffer_where_nothing_bounds_its_pages(
    machine: str, notify: bool
) -> None:
    # Without a memory cgroup a socket may hold its default send buffer and
    # no more: splice and sendfile put a page per byte in it, SO_SNDBUF and
    # friends raise the buffer 40-fold (tests/_sandbox/test_cgroup.py).
    decide = _decider(machine, notify=notify, memory_bounded=False)
    bounded = _decider(machine, notify=notify)
    refused = _NOTIFY if notify else _DENY
    sol_socket, so_type, so_keepalive, sol_tcp = 1, 3, 9, 6
    assert decide("splice", 3, 0, 4, 0, 16, 0) == refused
    assert bounded("splice", 3, 0, 4, 0, 16, 0) == _ALLOW
    assert decide("sendfile", 4, 3, 0, 1) == _DENY  # quietly: shutil falls back
    assert bounded("sendfile", 4, 3, 0, 1) == _ALLOW
    for option in (7, 8, 32, 33):  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
        assert decide("setsockopt", 3, sol_socket, option) == refused, option
        # the kernel reads ints: a set high half changes nothing
        assert decide("setsockopt", 3, sol_socket | 1 << 32, option | 1 << 32) == refused
        assert bounded("setsockopt", 3, sol_socket, option) == _ALLOW
        assert decide("setsockopt", 3, sol_tcp, option) == _ALLOW  # another level
    for option in (so_type, so_keepalive):
        assert decide("setsockopt", 3, sol_socket, option) == _ALLOW


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
@pytest.mark.parametrize("notify", [False, True])
def test_argument_rules(machine: str, notify: bool) -> None:
    decide = _decider(machine, notify=notify)
    refused = _NOTIFY if notify else _DENY
    # set-id bits, whatever else the mode says (the kernel reads 16 bits of umode_t)
    for name, arg in (("openat", 3), ("mkdirat", 2), ("fchmod", 1), ("fchmodat", 2)):
        args = [0] * 4
        # a changed mode others may write is refused too (attack31), a created one is not
        others_write = refused if name.startswith("fchmod") else _ALLOW
        for mode, verdict in (
            (0o644, _ALLOW),
            (0o1770, _ALLOW),
            (0o1777, others_write),
            (0o666, others_write),
            (0o4755, refused),
        ):
            args[arg] = mode
            assert decide(name, *args) == verdict, (name, oct(mode))
        args[arg] = 0x1_0000 | 0o2755
        assert decide(name, *args) == refused, name
    # device nodes: FIFOs, sockets and regular files only
    for mode, verdict in (
        (0o010644, _ALLOW),
        (0o140644, _ALLOW),
        (0o100644, _ALLOW),
        (0o000644, _ALLOW),
        (0o020644, refused),  # S_IFCHR
        (0o060644, refused),  # S_IFBLK
        (0o014644, refused),  # a FIFO with S_ISUID
    ):
        assert decide("mknodat", 0, 0, mode, 0) == verdict, oct(mode)
    assert decide("renameat2", 0, 0, 0, 0, 1) == _ALLOW  # RENAME_NOREPLACE
    assert decide("renameat2", 0, 0, 0, 0, 4) == refused  # RENAME_WHITEOUT
    # clone: threads and fork, never a namespace
    assert decide("clone", 0x01200011) == _ALLOW  # glibc fork()
    assert decide("clone", 0x003D0F00) == _ALLOW  # pthread_create
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000):
        assert decide("clone", 0x11 | flag) == refused, hex(flag)
    assert decide("clone", 0x40000000) == refused  # CLONE_NEWNET
    # sockets: no socket(), socketpair only AF_UNIX stream/seqpacket, sendto without address
    for family in (1, 2, 10, 16, 17, 40):
        assert decide("socket", family, 1) == (_DENY if family == 1 else refused), family
    assert decide("socket", 0x1_0000_0001, 1) == _DENY  # the kernel reads an int: AF_UNIX
    for socktype in (1, 5, 1 | 0x80000, 5 | 0x800):  # with SOCK_CLOEXEC / SOCK_NONBLOCK
        assert decide("socketpair", 1, socktype) == _ALLOW, hex(socktype)
    for socktype in (2, 3, 2 | 0x80000):  # SOCK_DGRAM, SOCK_RAW
        assert decide("socketpair", 1, socktype) == refused, hex(socktype)
    assert decide("socketpair", 2, 1) == refused
    assert decide("sendto", 3, 0x1000, 8, 0x4000, 0, 0) == _ALLOW
    assert decide("sendto", 3, 0x1000, 8, 0x4000, 0x7FFF_0000_0000, 16) == refused
    assert decide("sendto", 3, 0x1000, 8, 0x4000, 0x1_0000_0000, 16) == refused
    # terminal injection, whatever the high half
    for request in (0x5412, 0x541C, 0x1_0000_5412, 0xFFFF_FFFF_0000_541C):
        assert decide("ioctl", 0, request) == refused, hex(request)
    for request in (0x5401, 0x5413, 0x5421, 0x5451, 0x5410, 0x5416, 0xFFFF_FFFF_8004_5430):
        assert decide("ioctl", 0, request) == _ALLOW, hex(request)
    # prctl: thread names and reads; never dumpable, ptracer, securebits, mm
    assert decide("prctl", 15) == _ALLOW  # PR_SET_NAME
    assert decide("prctl", 23) == _ALLOW  # PR_CAPBSET_READ
    for option in (4, 22, 24, 28, 35, 0x59616D61):
        assert decide("prctl", option) == refused, option
    assert decide("personality", 0xFFFFFFFF) == _ALLOW
    assert decide("personality", 0x0040000) == refused  # ADDR_NO_RANDOMIZE
    # unreadable arguments: ENOSYS so callers fall back to a checked call
    assert decide("clone3") == bpf.RET_ERRNO | _ENOSYS
    assert decide("openat2") == bpf.RET_ERRNO | _ENOSYS
    for name in ("chown", "fchown", "lchown", "fchownat"):
        if syscall_number(name, machine) is not None:
            assert decide(name) == _DENY, name  # refused without counting


# -- real kernel effects ------------------------------------------------------------


def test_seccomp_probes_see_a_working_filter() -> None:
    assert seccomp_available() is True
    assert seccomp_enforced() is True
    assert seccomp_action_available(0x7FFF0000) is True  # SECCOMP_RET_ALLOW
    assert seccomp_action_available(0x12340000) is False  # no such action
    status = Path("/proc/self/status").read_text(encoding="ascii")
    assert re.search(r"^Seccomp:\s+0$", status, re.MULTILINE), "the probe must not filter us"


def test_exec_is_refused_without_allow_exec() -> None:
    result = _run(
        """
        import subprocess
        apply_seccomp(allow_exec=False)
        done({
            "execv": attempt(lambda: os.execv("/bin/true", ["true"])),
            "subprocess": attempt(lambda: subprocess.run(["/bin/true"], check=True)),
        })
        """
    )
    assert result == {"execv": "EPERM", "subprocess": "EPERM"}


def test_exec_is_allowed_with_allow_exec_and_children_inherit_the_filter() -> None:
    result = _run(
        """
        import subprocess
        apply_seccomp(allow_exec=True)
        true = subprocess.run(["/bin/true"], check=False).returncode
        status = subprocess.run(
            ["/bin/cat", "/proc/self/status"], capture_output=True, text=True, check=True
        ).stdout
        seccomp = [line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:")]
        done({"true": true, "child_seccomp": seccomp})
        """
    )
    assert result == {"true": 0, "child_seccomp": ["2"]}


def test_no_socket_can_be_created_but_socketpairs_work() -> None:
    result = _run(
        """
        def pair(kind):
            left, right = socket.socketpair(socket.AF_UNIX, kind)
            with left, right:
                left.sendall(b"ping")
                assert right.recv(4) == b"ping"

        before = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
        apply_seccomp(allow_exec=False)
        done({
            "before": before,
            "inet": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
            "inet6": attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
            "netlink": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
            "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
            "stream_pair": attempt(lambda: pair(socket.SOCK_STREAM)),
            "seqpacket_pair": attempt(lambda: pair(socket.SOCK_SEQPACKET)),
            "dgram_pair": attempt(lambda: pair(socket.SOCK_DGRAM)),
        })
        """
    )
    assert result == {
        "before": "ok",
        "inet": "EPERM",
        "inet6": "EPERM",
        "netlink": "EPERM",
        "unix": "EPERM",
        "stream_pair": "ok",
        "seqpacket_pair": "ok",
        "dgram_pair": "EPERM",
    }


def test_ptrace_traceme_and_unshare_are_refused() -> None:
    result = _run(
        """
        from caplet._syscall import CLONE_NEWNS, CLONE_NEWUSER, unshare
        libc.ptrace.restype = ctypes.c_long
        libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
        apply_seccomp(allow_exec=False)
        ctypes.set_errno(0)
        traceme = libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
        done({
            "ptrace": [traceme, name(ctypes.get_errno())],
            "unshare_user": attempt(lambda: unshare(CLONE_NEWUSER)),
            "unshare_mount": attempt(lambda: unshare(CLONE_NEWNS)),
        })
        """
    )
    assert result == {
        "ptrace": [-1, "EPERM"],
        "unshare_user": "EPERM",
        "unshare_mount": "EPERM",
    }


def test_fork_works_and_the_child_inherits_the_filter() -> None:
    result = _run(
        """
        apply_seccomp(allow_exec=False)
        pid = os.fork()
        if pid == 0:
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except PermissionError:
                os._exit(0)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        done({"child_exit": os.waitstatus_to_exitcode(status)})
        """
    )
    assert result == {"child_exit": 0}


def test_terminal_injection_ioctls_are_refused() -> None:
    result = _run(
        """
        import fcntl, struct, termios
        controller, terminal = os.openpty()
        apply_seccomp(allow_exec=False)
        done({
            "tiocsti": attempt(lambda: fcntl.ioctl(terminal, termios.TIOCSTI, b"x")),
            "tiocsti_high_bits": attempt(lambda: fcntl.ioctl(terminal, 0x1_0000_5412, b"x")),
            "tioclinux": attempt(lambda: fcntl.ioctl(terminal, 0x541C, b"\\x00")),
            "tiocgwinsz": attempt(lambda: fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\\0" * 8)),
        })
        """
    )
    assert result == {
        "tiocsti": "EPERM",
        "tiocsti_high_bits": "EPERM",
        "tioclinux": "EPERM",
        "tiocgwinsz": "ok",
    }


@pytest.mark.parametrize("filtered", [True, False])
def test_namespace_clones_are_refused_and_threads_still_start(filtered: bool) -> None:
    result = _run(
        """
        import threading
        if ARGS["filtered"]:
            apply_seccomp(allow_exec=False)
        CLONE_FS, CLONE_NEWUSER = 0x200, 0x10000000
        # CLONE_NEWUSER|CLONE_FS is invalid (EINVAL), so no child is made unfiltered either.
        clone = raw(NR["clone"], CLONE_NEWUSER | CLONE_FS | 17, 0, 0, 0, 0)
        clone3 = raw(NR["clone3"], 0, 0)  # size 0 is EINVAL when the kernel sees it
        seen = []
        worker = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
        worker.start()
        worker.join()
        ctypes.set_errno(0)
        persona = libc.personality(ctypes.c_ulong(0xFFFFFFFF))
        done({
            "clone": clone,
            "clone3": clone3,
            "thread_ran": len(seen) == 1,
            "personality_query": persona >= 0,
            "personality_set": raw(NR["personality"], 0x0040000),
        })
        """,
        filtered=filtered,
    )
    if filtered:
        assert result == {
            "clone": "EPERM",
            "clone3": "ENOSYS",
            "thread_ran": True,
            "personality_query": True,
            "personality_set": "EPERM",
        }
    else:
        assert result["clone"] == "EINVAL"
        assert result["clone3"] == "EINVAL"
        assert result["personality_set"] == "ok"


# Every one of these is called with invalid arguments, so even unfiltered (as
# root) it changes nothing: bad fds, NULL pointers, out-of-range flags.
_HARMLESS_CALLS: dict[str, tuple[int, ...]] = {
    "ptrace": (-1, 0, 0, 0),
    "process_vm_readv": (0, 0, 0, 0, 0, 0),
    "process_vm_writev": (0, 0, 0, 0, 0, 0),
    "pidfd_getfd": (-1, -1, 0),
    "mount": (0, 0, 0, 0, 0),
    "umount2": (0, 0),
    "pivot_root": (0, 0),
    "chroot": (0,),
    "setns": (-1, 0),
    "mount_setattr": (-1, 0, 0, 0, 0),
    "move_mount": (-1, 0, -1, 0, 0xFFFFFFFF),
    "open_tree": (-1, 0, 0xFFFFFFFF),
    "fsopen": (0, 0xFFFFFFFF),
    "fsconfig": (-1, 0, 0, 0, 0),
    "fsmount": (-1, 0, 0),
    "fspick": (-1, 0, 0xFFFFFFFF),
    "bpf": (-1, 0, 0),
    "perf_event_open": (0, 0, -1, -1, 0),
    "keyctl": (-1, 0, 0, 0, 0),
    "add_key": (0, 0, 0, 0, 0),
    "request_key": (0, 0, 0, 0),
    "userfaultfd": (0xFFFFFFFF,),
    "io_uring_setup": (0, 0),
    "io_uring_enter": (-1, 0, 0, 0, 0, 0),
    "io_uring_register": (-1, 0, 0, 0),
    "open_by_handle_at": (-1, 0, 0),
    "name_to_handle_at": (-1, 0, 0, 0, 0xFFFFFFFF),
    "fanotify_init": (0xFFFFFFFF, 0),
    "finit_module": (-1, 0, 0),
    "delete_module": (0, 0),
    "quotactl_fd": (-1, 0, 0, 0),
    "execve": (0, 0, 0),
    "execveat": (-1, 0, 0, 0, 0xFFFFFFFF),
    "kcmp": (0, 0, 99, 0, 0),
    "setresuid": (-1, -1, -1),  # "leave every id as it is": a no-op when allowed
    "setresgid": (-1, -1, -1),
    "setgroups": (-1, 0),
    "capset": (0, 0),
    "setxattr": (0, 0, 0, 0, 0),
    "fsetxattr": (-1, 0, 0, 0, 0),
    "removexattr": (0, 0),
    "fremovexattr": (-1, 0),
    "setxattrat": (-1, 0, 0xFFFFFFFF, 0, 0, 0),
    "removexattrat": (-1, 0, 0xFFFFFFFF, 0),
    "connect": (-1, 0, 0),
    "bind": (-1, 0, 0),
    "listen": (-1, 0),
    "accept4": (-1, 0, 0, 0),
    "shmget": (0, 0, 0xFFFFFFFF),
}

#: Calls whose invalid argument is rejected before any privilege check, so the
#: unfiltered result cannot be EPERM on any machine.
_NEVER_EPERM_UNFILTERED = (
    "pidfd_getfd",
    "setns",
    "io_uring_enter",
    "io_uring_register",
    "connect",
    "fsetxattr",
)


@pytest.mark.parametrize("filtered", [True, False])
def test_denied_calls_fail_with_eperm_only_under_the_filter(filtered: bool) -> None:
    result = _run(
        """
        if ARGS["filtered"]:
            apply_seccomp(allow_exec=False)
        done({call: raw(ARGS["numbers"][call], *args) for call, args in ARGS["calls"].items()})
        """,
        filtered=filtered,
        calls=_HARMLESS_CALLS,
        numbers={call: syscall_number(call) for call in _HARMLESS_CALLS},
    )
    if filtered:
        assert result == dict.fromkeys(_HARMLESS_CALLS, "EPERM")
    else:
        assert all(result[call] not in ("EPERM", "ok") for call in _NEVER_EPERM_UNFILTERED), result


# -- counting denials: SECCOMP_RET_USER_NOTIF --------------------------------------


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_notify_turns_every_counted_refusal_into_a_notification_and_nothing_else(
    machine: str,
) -> None:
    plain = build_filter(allow_exec=False, machine=machine)
    notify = build_filter(allow_exec=False, machine=machine, notify=True)
    arch = AUDIT_ARCH[machine]

    def number(name: str) -> int:
        found = syscall_number(name, machine)
        assert found is not None, name
        return found

    quiet = {number(q.syscall) for q in QUIET_REFUSALS if _compiled(q.syscall, machine)}
    cases: list[tuple[int, int, tuple[int, ...]]] = [
        (number(name), arch, ())
        for name in (*DENIED_SYSCALLS, "execve")
        if _compiled(name, machine)
    ]
    cases += [(nr, arch, ()) for nr in range(NEWEST_REVIEWED + 10)]
    cases += [
        (number("clone"), arch, (0x10000011,)),
        (number("clone"), arch, (0x01200011,)),
        (number("socket"), arch, (2,)),
        (number("socket"), arch, (1,)),
        (number("ioctl"), arch, (0, 0x5412)),
        (number("openat"), arch, (0, 0, 0, 0o4755)),
        (number("personality"), arch, (0x0040000,)),
        (number("ptrace"), 0x40000003, ()),  # i386: still killed, never notified
    ]
    if machine == "x86_64":
        cases.append((0x40000000 | 39, arch, ()))
    for nr, audit_arch, args in cases:
        before = bpf.run(plain, nr=nr, arch=audit_arch, args=args)
        after = bpf.run(notify, nr=nr, arch=audit_arch, args=args)
        counted = before == _DENY and not (nr in quiet and after == _DENY)
        assert after == (_NOTIFY if counted else before), (nr, args, hex(before), hex(after))
    assert bpf.run(notify, nr=number("ptrace"), arch=arch) == _NOTIFY
    assert bpf.run(notify, nr=number("clone3"), arch=arch) == bpf.RET_ERRNO | _ENOSYS


def test_counting_is_available_here_and_probing_it_installs_nothing() -> None:
    assert seccomp_notify_problem() is None
    assert seccomp_action_available(bpf.RET_USER_NOTIF) is True
    assert seccomp_filter_flag_supported(SECCOMP_FILTER_FLAG_NEW_LISTENER) is True
    assert seccomp_filter_flag_supported(1 << 30) is False  # no such flag
    status = Path("/proc/self/status").read_text(encoding="ascii")
    assert re.search(r"^Seccomp:\s+0$", status, re.MULTILINE), "the probe must not filter us"


_NOTIFY_CHILD = """
handover = socket.socket(fileno=int(sys.argv[2]))
listener = apply_seccomp(allow_exec=False, notify=True)
assert isinstance(listener, int) and listener > 2, listener
socket.send_fds(handover, [b"listener"], [listener])
os.close(listener)
handover.close()
inet = [attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(3)]
done({
    "inet": inet,
    "ptrace": raw(NR["ptrace"], -1, 0, 0, 0),
    "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
    "clone3": raw(NR["clone3"], 0, 0),
    "newer": raw(ARGS["newer"], 0, 0),
    "x32": [raw(0x40000000 | n) for n in range(ARGS["x32"])] if ARGS["x32"] else [],
})
"""


def _supervise(x32: int = 0) -> tuple[dict[str, object], DenialCounter, bool]:
    """Run _NOTIFY_CHILD, answering its notifications here; (its result, counter, hung up)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    args = {"x32": x32, "newer": NEWEST_REVIEWED + 1}
    with ours:
        with theirs:
            code = _PRELUDE + _NOTIFY_CHILD
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-c",
                    code,
                    json.dumps(args),
                    str(theirs.fileno()),
                ],
                pass_fds=(theirs.fileno(),),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        _, fds, _, _ = socket.recv_fds(ours, 64, 1)
    assert len(fds) == 1, proc.communicate()
    counter = DenialCounter(fds[0])
    pidfd = os.pidfd_open(proc.pid)
    try:
        poller = select.poll()
        poller.register(fds[0], select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        # The child blocks in each denied call until this loop answers it,
        # so it can only exit once every notification was served.
        while True:
            ready = dict(poller.poll(60_000))
            assert ready, "the child neither made a denied call nor exited"
            counter.serve()
            if pidfd in ready:
                break
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        os.close(pidfd)
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    # Reaped: nothing uses the filter any more, the listener reports POLLHUP.
    hung_up = not counter.serve()
    counter.close()
    result = json.loads(stdout.splitlines()[-1])
    assert isinstance(result, dict)
    return result, counter, hung_up


def test_notify_filter_refuses_from_the_supervisor_and_counts_by_name() -> None:
    result, counter, hung_up = _supervise()
    assert result == {
        "inet": ["EPERM", "EPERM", "EPERM"],
        "ptrace": "EPERM",
        "unix": "EPERM",  # refused without a notification: glibc's nscd probe
        "clone3": "ENOSYS",  # likewise: glibc falls back to clone
        "newer": "ENOSYS",  # newer than the review: as on a kernel without it
        "x32": [],
    }
    assert counter.counts == {"socket": 3, "ptrace": 1, f"syscall {NEWEST_REVIEWED + 1}": 1}
    assert hung_up
    assert counter.fd is None
    assert counter.serve() is False  # closed: nothing more to serve


@pytest.mark.skipif(MACHINE != "x86_64", reason="the x32 ABI exists only on x86_64")
def test_distinct_names_are_bounded() -> None:
    result, counter, _ = _supervise(x32=MAX_DENIAL_NAMES + 10)
    assert result["x32"] == ["EPERM"] * (MAX_DENIAL_NAMES + 10)
    # socket and ptrace came first; the x32 numbers fill the rest of the
    # table, and everything past it is counted as "other".
    assert len(counter.counts) == MAX_DENIAL_NAMES
    named_x32 = MAX_DENIAL_NAMES - 1 - 3
    assert counter.counts["other"] == MAX_DENIAL_NAMES + 10 - named_x32
    assert counter.counts["syscall 1073741824"] == 1
    assert sum(counter.counts.values()) == MAX_DENIAL_NAMES + 10 + 5
