"""The seccomp filter: its program decoded and emulated here, its effects on a real child.

Filters are only ever installed in a child interpreter (``python -I -c``),
which prints one JSON object of outcomes ("ok" or the errno name). With
``notify=True`` the child sends its listener to the test, which answers
the notifications itself in a plain poll loop (no thread).
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from caplet._errors import SandboxError
from caplet._sandbox._seccomp import (
    AUDIT_ARCH,
    DENIED_SYSCALLS,
    MAX_DENIAL_NAMES,
    SYSCALL_NUMBERS,
    DenialCounter,
    build_filter,
    seccomp_available,
    seccomp_enforced,
    seccomp_notify_problem,
    syscall_names,
)
from caplet._syscall import (
    SECCOMP_FILTER_FLAG_NEW_LISTENER,
    seccomp_action_available,
    seccomp_filter_flag_supported,
)

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


# -- the program itself -------------------------------------------------------------

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_KILL_PROCESS, _ERRNO, _ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_USER_NOTIF = 0x7FC00000
_EPERM, _ENOSYS = 1, 38


def _decode(program: bytes) -> list[tuple[int, int, int, int]]:
    return list(struct.iter_unpack("<HBBI", program))


def _emulate(program: bytes, *, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Run the classic-BPF program over one struct seccomp_data, as the kernel would."""
    values = [*args, *[0] * (6 - len(args))]
    data = struct.pack("<iIQ6Q", nr, arch, 0, *values)
    accumulator = 0
    pc = 0
    insns = _decode(program)
    while True:
        code, jt, jf, k = insns[pc]
        if code == _LD_W_ABS:
            (accumulator,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code == _RET:
            return k
        else:
            taken = {
                _JEQ: accumulator == k,
                _JGE: accumulator >= k,
                _JSET: accumulator & k != 0,
            }[code]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", sorted(SYSCALL_NUMBERS))
def test_program_is_deterministic_and_starts_with_the_arch_check(machine: str) -> None:
    program = build_filter(allow_exec=False, machine=machine)
    assert program == build_filter(allow_exec=False, machine=machine)
    assert len(program) % 8 == 0
    insns = _decode(program)
    assert insns[0] == (_LD_W_ABS, 0, 0, 4)  # seccomp_data.arch
    assert insns[1] == (_JEQ, 1, 0, AUDIT_ARCH[machine])
    assert insns[2] == (_RET, 0, 0, _KILL_PROCESS)
    assert insns[3] == (_LD_W_ABS, 0, 0, 0)  # seccomp_data.nr
    assert insns[-1] == (_RET, 0, 0, _ALLOW)
    # allow_exec drops exactly the two execve checks (two instructions each).
    assert len(build_filter(allow_exec=True, machine=machine)) == len(program) - 4 * 8


def test_x86_64_and_aarch64_programs_differ() -> None:
    assert build_filter(allow_exec=False, machine="x86_64") != build_filter(
        allow_exec=False, machine="aarch64"
    )


def test_an_unknown_machine_fails_closed() -> None:
    with pytest.raises(SandboxError, match="'riscv64'"):
        build_filter(allow_exec=False, machine="riscv64")


@pytest.mark.parametrize("machine", sorted(SYSCALL_NUMBERS))
def test_emulated_decisions(machine: str) -> None:
    program = build_filter(allow_exec=False, machine=machine)
    with_exec = build_filter(allow_exec=True, machine=machine)
    arch = AUDIT_ARCH[machine]
    nr = SYSCALL_NUMBERS[machine]

    def decide(name: str, *args: int, prog: bytes = program) -> int:
        return _emulate(prog, nr=nr[name], arch=arch, args=args)

    # Another ABI's numbers are meaningless here: the process dies.
    assert _emulate(program, nr=nr["ptrace"], arch=0x40000003) == _KILL_PROCESS  # i386
    assert _emulate(program, nr=nr["ptrace"], arch=arch ^ 0x40000000) == _KILL_PROCESS
    for denied in DENIED_SYSCALLS:
        if denied in nr:
            assert decide(denied) == _ERRNO | _EPERM, denied
    assert decide("execve") == _ERRNO | _EPERM
    assert decide("execveat") == _ERRNO | _EPERM
    assert decide("execve", prog=with_exec) == _ALLOW
    assert decide("clone3") == _ERRNO | _ENOSYS
    assert decide("clone", 0x01200011) == _ALLOW  # glibc fork(): CHILD_SETTID|CLEARTID|SIGCHLD
    assert decide("clone", 0x003D0F00) == _ALLOW  # pthread_create's flags
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000):
        assert decide("clone", 0x11 | flag) == _ERRNO | _EPERM, hex(flag)
    assert decide("clone", 0x40000000) == _ERRNO | _EPERM  # CLONE_NEWNET
    assert decide("personality", 0xFFFFFFFF) == _ALLOW
    assert decide("personality", 0x0040000) == _ERRNO | _EPERM  # ADDR_NO_RANDOMIZE
    assert decide("ioctl", 0, 0x5412) == _ERRNO | _EPERM
    assert decide("ioctl", 0, 0x1_0000_5412) == _ERRNO | _EPERM  # the kernel drops the high half
    assert decide("ioctl", 0, 0x541C) == _ERRNO | _EPERM
    assert decide("ioctl", 0, 0x5413) == _ALLOW  # TIOCGWINSZ
    assert decide("socket", 1) == _ALLOW
    assert decide("socketpair", 1) == _ALLOW
    for family in (2, 10, 16, 17, 40):  # INET, INET6, NETLINK, PACKET, VSOCK
        assert decide("socket", family) == _ERRNO | _EPERM
        assert decide("socketpair", family) == _ERRNO | _EPERM
    assert decide("socket", 0x1_0000_0002) == _ERRNO | _EPERM
    if machine == "x86_64":
        assert _emulate(program, nr=0x40000000 | 39, arch=arch) == _ERRNO | _EPERM  # x32 getpid
    assert _emulate(program, nr=0, arch=arch) == _ALLOW  # read/io_setup


_HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("machine", sorted(SYSCALL_NUMBERS))
def test_tables_agree_with_the_installed_kernel_headers(machine: str) -> None:
    header = _HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    defined = {
        match[1]: int(match[2])
        for match in re.finditer(
            r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text(encoding="ascii")
        )
    }
    table = SYSCALL_NUMBERS[machine]
    checked = [name for name in table if name in defined]
    assert len(checked) >= len(table) - 2  # the header may predate the newest calls
    assert {name: table[name] for name in checked} == {name: defined[name] for name in checked}


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


def test_only_unix_sockets_can_be_created() -> None:
    result = _run(
        """
        def pair():
            left, right = socket.socketpair(socket.AF_UNIX)
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
            "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
            "socketpair": attempt(pair),
        })
        """
    )
    assert result == {
        "before": "ok",
        "inet": "EPERM",
        "inet6": "EPERM",
        "netlink": "EPERM",
        "unix": "ok",
        "socketpair": "ok",
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
}

#: Calls whose invalid argument is rejected before any privilege check, so the
#: unfiltered result cannot be EPERM on any machine.
_NEVER_EPERM_UNFILTERED = ("pidfd_getfd", "setns", "io_uring_enter", "io_uring_register")


@pytest.mark.parametrize("filtered", [True, False])
def test_denied_calls_fail_with_eperm_only_under_the_filter(filtered: bool) -> None:
    result = _run(
        """
        if ARGS["filtered"]:
            apply_seccomp(allow_exec=False)
        done({call: raw(NR[call], *args) for call, args in ARGS["calls"].items()})
        """,
        filtered=filtered,
        calls=_HARMLESS_CALLS,
    )
    if filtered:
        assert result == dict.fromkeys(_HARMLESS_CALLS, "EPERM")
    else:
        assert all(result[call] not in ("EPERM", "ok") for call in _NEVER_EPERM_UNFILTERED), result


# -- counting denials: SECCOMP_RET_USER_NOTIF --------------------------------------


@pytest.mark.parametrize("machine", sorted(SYSCALL_NUMBERS))
def test_notify_turns_every_eperm_into_a_notification_and_nothing_else(machine: str) -> None:
    plain = build_filter(allow_exec=False, machine=machine)
    notify = build_filter(allow_exec=False, machine=machine, notify=True)
    assert len(notify) == len(plain)
    arch = AUDIT_ARCH[machine]
    nr = SYSCALL_NUMBERS[machine]
    cases: list[tuple[int, int, tuple[int, ...]]] = [
        (nr[name], arch, ()) for name in (*DENIED_SYSCALLS, "execve", "execveat") if name in nr
    ]
    cases += [
        (nr["clone3"], arch, ()),
        (nr["clone"], arch, (0x10000011,)),
        (nr["clone"], arch, (0x01200011,)),
        (nr["socket"], arch, (2,)),
        (nr["socket"], arch, (1,)),
        (nr["ioctl"], arch, (0, 0x5412)),
        (nr["personality"], arch, (0x0040000,)),
        (nr["ptrace"], 0x40000003, ()),  # i386: still killed, never notified
        (0, arch, ()),
    ]
    if machine == "x86_64":
        cases.append((0x40000000 | 39, arch, ()))
    for number, audit_arch, args in cases:
        before = _emulate(plain, nr=number, arch=audit_arch, args=args)
        after = _emulate(notify, nr=number, arch=audit_arch, args=args)
        expected = _USER_NOTIF if before == _ERRNO | _EPERM else before
        assert after == expected, (number, hex(before), hex(after))
    assert _emulate(notify, nr=nr["ptrace"], arch=arch) == _USER_NOTIF
    assert _emulate(notify, nr=nr["clone3"], arch=arch) == _ERRNO | _ENOSYS


def test_counting_is_available_here_and_probing_it_installs_nothing() -> None:
    assert seccomp_notify_problem() is None
    assert seccomp_action_available(_USER_NOTIF) is True
    assert seccomp_filter_flag_supported(SECCOMP_FILTER_FLAG_NEW_LISTENER) is True
    assert seccomp_filter_flag_supported(1 << 30) is False  # no such flag
    status = Path("/proc/self/status").read_text(encoding="ascii")
    assert re.search(r"^Seccomp:\s+0$", status, re.MULTILINE), "the probe must not filter us"


def test_syscall_names_invert_the_table() -> None:
    names = syscall_names("x86_64")
    assert names[101] == "ptrace"
    assert names[41] == "socket"
    assert len(names) == len(SYSCALL_NUMBERS["x86_64"])
    assert syscall_names("riscv64") == {}


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
    "x32": [raw(0x40000000 | n) for n in range(ARGS["x32"])] if ARGS["x32"] else [],
})
"""


def _supervise(x32: int = 0) -> tuple[dict[str, object], DenialCounter, bool]:
    """Run _NOTIFY_CHILD, answering its notifications here; (its result, counter, hung up)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours:
        with theirs:
            code = _PRELUDE + _NOTIFY_CHILD
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code, json.dumps({"x32": x32}), str(theirs.fileno())],
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


def test_notify_filter_returns_eperm_from_the_supervisor_and_counts_by_name() -> None:
    result, counter, hung_up = _supervise()
    assert result == {
        "inet": ["EPERM", "EPERM", "EPERM"],
        "ptrace": "EPERM",
        "unix": "ok",
        "clone3": "ENOSYS",
        "x32": [],
    }
    assert counter.counts == {"socket": 3, "ptrace": 1}
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
    named_x32 = MAX_DENIAL_NAMES - 1 - 2
    assert counter.counts["other"] == MAX_DENIAL_NAMES + 10 - named_x32
    assert counter.counts["syscall 1073741824"] == 1
    assert sum(counter.counts.values()) == MAX_DENIAL_NAMES + 10 + 4
