"""Issue 3, "Done when": hostile plugins against the full sandbox, one case per attack.

Every :class:`HostileCase` is a small plugin (its ``plugin.py`` and manifest
are written by the test) that tries one attack when ``main.run`` is called,
the layer expected to stop it, and a check of what the caller got. All of
them run through the public API: one :class:`caplet.PluginHost` with its
default sandbox launcher (strict isolation: namespaces, rlimits, Landlock,
seccomp, and a pids cgroup) and a real state database under the module's tmp directory. After
every case the plugin's worker is stopped and the test proves the attack was
contained: the jail's whole pid namespace is gone, the host still serves an
unrelated plugin, the plugin sources are byte-for-byte unchanged and the
state database passes ``PRAGMA integrity_check``.

The static scanner would refuse most of these plugins at enable (ctypes,
socket and ``os.fork`` are danger findings). What is tested here is what the
*kernel* does when that review was fooled, so each plugin's audit is
replaced by a clean one, as a fooled auditor would have recorded it; only
the danger-gate case keeps its real audit.

How the stopping layer shows (the errno is the evidence):

- ``namespaces``: the object does not exist in the jail (ENOENT, and ESRCH
  for a pid, ECONNREFUSED for an abstract socket of the host's network
  namespace) or its mount is read-only or small (EROFS, ENOSPC);
- ``landlock``: a path the mounts expose but the ruleset does not grant
  for that access (EACCES at open, landlock(7));
- ``seccomp``: the system call itself fails with EPERM before any lookup
  (seccomp(2), SECCOMP_RET_ERRNO);
- ``rlimits``: EMFILE, ``MemoryError`` (setrlimit(2));
- ``cgroup``: the worker's own pids cgroup refuses a fork with EAGAIN, and
  its ``pids.events`` counts the refusal (cgroups(7), the pids controller);
- ``deadline``: the call times out and the jail is killed;
- ``frame-limit``: a reply larger than the channel's frame limit;
- ``danger-gate``: enable refuses, no worker starts;
- ``declarative-api``: the call protocol itself: only declared functions
  are registered, and whatever a plugin raises comes back as data (its type
  and message), never as a dead worker or host.

:data:`CASES` is a module-level tuple so that a later ``caplet selftest``
can run the same attacks; :func:`case_table` is the table it would show.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import tempfile
import textwrap
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import pytest

from caplet import (
    AuditResult,
    CallTimeoutError,
    CapletError,
    LifecycleError,
    PluginCallError,
    PluginHost,
    ProtocolError,
    RiskLevel,
    SqliteStore,
    Verdict,
)
from tests.conftest import PluginFactory

Layer = Literal[
    "namespaces",
    "landlock",
    "seccomp",
    "rlimits",
    "cgroup",
    "deadline",
    "frame-limit",
    "danger-gate",
    "declarative-api",
]
#: Every layer a case may name; each one is exercised by at least one case.
LAYERS: tuple[Layer, ...] = get_args(Layer)

#: Short enough that the deadline cases stay cheap, long enough for a start.
DEADLINE_MS = 500
#: The policy's default RLIMIT_NPROC (``Policy.processes``).
PROCESS_LIMIT = 64
_MIB = 1024 * 1024
#: How long a killed jail may take to disappear before the test calls it a leak.
_JAIL_EXIT_S = 10.0


@dataclass(frozen=True, slots=True)
class Arena:
    """What the attacks aim at, all owned by the test (under its tmp dir)."""

    root: Path
    host_pid: int
    state_db: Path
    plugins_dir: Path
    #: Holds one directory per plugin, granted to it as ``fs.write``.
    grants_dir: Path
    #: A directory next to the grants that no plugin is granted.
    outside: Path
    tcp_port: int
    udp_port: int
    #: Name of a listening abstract unix socket (without the leading NUL).
    abstract_name: str
    #: Unique prefix for files a plugin creates in its private /tmp.
    token: str

    def out(self, plugin: str) -> Path:
        """The plugin's writable grant."""
        return self.grants_dir / plugin

    @property
    def secret(self) -> Path:
        return self.outside / "secret.txt"


@dataclass(frozen=True, slots=True)
class Attempt:
    """What the caller got from one attack.

    ``enabled``/``reason``: the enable outcome; ``value`` or ``error``: what
    ``main.run`` returned or raised; ``followup``: what a ``main.ping`` right
    after it returned (the worker's pid, 1 in its pid namespace) or the error
    it raised; ``same_worker``: whether that ping reached the worker that ran
    the attack (False when the host had to start a fresh one);
    ``rejected``: what the worker refused to register; ``jail_pid``: pid 1
    of the attacking worker's jail, as the host sees it (0 when none ran).
    """

    plugin: str
    enabled: bool
    reason: str = ""
    jail_pid: int = 0
    value: object = None
    error: CapletError | None = None
    followup: object = None
    same_worker: bool = False
    rejected: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for the case table."""
        if not self.enabled:
            return _clip(f"enable refused: {self.reason}")
        if self.error is not None:
            return _clip(f"{type(self.error).__name__}: {self.error}")
        return _clip(f"returned {self.value!r}")


Check = Callable[[Attempt, Arena, PluginHost], None]
Args = Callable[[Arena, str], tuple[object, ...]]


def _no_args(_arena: Arena, _plugin: str) -> tuple[object, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class HostileCase:
    """One attack: the plugin that tries it, who should stop it, and how that shows.

    ``body`` is the plugin's own code, appended to :data:`PRELUDE`; it
    defines ``run`` (and may redefine ``create_functions``). ``args`` builds
    the arguments of ``main.run`` from the arena. ``gated`` keeps the
    plugin's real static audit (the danger-gate case); every other plugin is
    enabled with a clean audit. ``gap`` is non-empty when the expected layer
    is known not to stop the attack yet: the case is then an expected
    failure (strict), and it still has to be *contained*.
    """

    plugin: str
    attack: str
    layer: Layer
    body: str
    check: Check
    args: Args = _no_args
    timeout_ms: int | None = None
    gated: bool = False
    gap: str = ""


class LayerMismatchError(AssertionError):
    """The attack was contained, but not by the layer the case expects (or not as expected)."""


# -- the plugins ----------------------------------------------------------------------

#: Shared by every hostile plugin: helpers, ``ping`` and a ``create_functions``
#: that registers ``run`` (defined by the case's body) and ``ping``.
PRELUDE = """
import errno
import os

CONFIG = {}


def errname(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))


def attempt(action, *args):
    try:
        value = action(*args)
    except OSError as exc:
        return {"errno": errname(exc)}
    return {"escaped": repr(value)[:200]}


def read(path):
    with open(path, "rb") as handle:
        return handle.read(64)


def write(path):
    with open(path, "wb") as handle:
        return handle.write(b"pwned by a plugin")


def ping():
    return os.getpid()


def create_functions(config):
    CONFIG.update(config)
    return {"main": {"run": run, "ping": ping}}
"""

READ = """
def run(path):
    return attempt(read, path)
"""

WRITE = """
def run(path):
    return attempt(write, path)
"""

WRITE_OWN_SNAPSHOT = """
def run():
    return attempt(write, __file__)
"""

SYMLINK = """
def run(target):
    link = os.path.join(CONFIG["out"], "link")
    os.symlink(target, link)
    return attempt(read, link)
"""

HARDLINK = """
def run(target):
    return attempt(os.link, target, os.path.join(CONFIG["out"], "hard"))
"""

UID_MAP = """
def remap():
    fd = os.open("/proc/self/uid_map", os.O_WRONLY)
    try:
        return os.write(fd, b"0 0 4294967295")
    finally:
        os.close(fd)


def run():
    return attempt(remap)
"""

TCP = """
import socket


def connect(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(("127.0.0.1", port))
        return "connected"


def run(port):
    return attempt(connect, port)
"""

UDP = """
import socket


def send(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return sock.sendto(b"exfiltrated", ("127.0.0.1", port))


def run(port):
    return attempt(send, port)
"""

RAW = """
import socket


def raw():
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        return sock.fileno()


def run():
    return attempt(raw)
"""

ABSTRACT = """
import socket


def connect(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect("\\0" + name)
        return "connected"


def run(name):
    return attempt(connect, name)
"""

EXECVE = """
def run():
    return attempt(os.execv, "/bin/sh", ["sh", "-c", "echo escaped"])
"""

PTRACE = """
import ctypes

PTRACE_ATTACH = 16


def attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return "attached"


def run(pid):
    return attempt(attach, pid)
"""

UNSHARE = """
import ctypes

CLONE_NEWUSER = 0x10000000


def unshare():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    if libc.unshare(CLONE_NEWUSER) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return "a fresh user namespace, with every capability in it"


def run():
    return attempt(unshare)
"""

KILL = """
import signal


def run(pid):
    return attempt(os.kill, pid, signal.SIGKILL)
"""

FORK_BOMB = """
import time


def run(limit):
    # Bounded so a missing process limit cannot exhaust the test machine's
    # pids: fork until the kernel refuses, and if it never does, hang so the
    # deadline has to kill the whole jail.
    read_end, write_end = os.pipe()
    forked = 0
    try:
        while forked < limit:
            if os.fork() == 0:
                try:
                    os.close(write_end)
                    os.read(read_end, 1)
                finally:
                    os._exit(0)
            forked += 1
    except OSError as exc:
        return {"forked": forked, "errno": errname(exc)}
    time.sleep(3600)
"""

FORK_AND_HANG = """
import time


def run(children):
    for _ in range(children):
        if os.fork() == 0:
            try:
                time.sleep(3600)
            finally:
                os._exit(0)
    time.sleep(3600)
"""

MEMORY_BOMB = """
def run():
    return len(bytearray(2 * 1024 * 1024 * 1024))
"""

SPIN = """
def run():
    while True:
        pass
"""

SLEEP = """
import time


def run():
    time.sleep(60)
"""

FLOOD = """
import sys


def run():
    line = "x" * 4095
    while True:
        print(line)
        try:
            print(line, file=sys.stderr)
        except OSError:
            pass  # the log hit RLIMIT_FSIZE: keep flooding stdout
"""

HUGE_RETURN = """
def run():
    return b"\\0" * (64 * 1024 * 1024)
"""

FORGED_FRAME = """
import struct
import time


def run():
    # Straight onto the channel (fd 3): a header announcing a 64 MiB reply.
    os.write(3, struct.pack(">I", 64 * 1024 * 1024))
    time.sleep(60)
"""

RECURSION = """
def run():
    def dive(depth):
        return dive(depth + 1)

    return dive(0)
"""

DEEP_NESTING = """
def run():
    value = []
    for _ in range(100_000):
        value = [value]
    return value
"""

FD_EXHAUSTION = """
def run():
    opened = []
    try:
        while True:
            opened.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as exc:
        return {"opened": len(opened), "errno": errname(exc)}
    finally:
        for fd in opened:
            os.close(fd)
"""

DISK_FILL = """
def run(token):
    chunk = b"\\0" * (1024 * 1024)
    written = 0
    index = 0
    try:
        while True:
            with open(f"/tmp/{token}-{index}", "wb", buffering=0) as handle:
                for _ in range(16):
                    written += handle.write(chunk)
            index += 1
    except OSError as exc:
        return {"written": written, "errno": errname(exc)}
"""

UNDECLARED = """
def run():
    return "declared"


def shell():
    return "undeclared code ran"


def create_functions(config):
    return {
        "main": {"run": run, "ping": ping, "extra": shell},
        "backdoor": {"shell": shell},
    }
"""

DANGER_GATED = """
import subprocess


def run():
    return subprocess.run(["/bin/sh", "-c", "id"], capture_output=True).stdout


def create_functions(config):
    with open(os.path.join(config["out"], "create_functions-ran"), "w") as handle:
        handle.write("ran")
    return {"main": {"run": run, "ping": ping}}
"""


# -- checks ------------------------------------------------------------------------------

AlsoTrue = Callable[[Attempt, Arena], bool]


def refused(errno_name: str, *also: AlsoTrue) -> Check:
    """The attack ran and the kernel refused it with ``errno_name``; ``also`` must hold."""

    def check(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
        assert attempt.enabled, attempt.reason
        assert attempt.error is None, attempt.describe()
        assert attempt.value == {"errno": errno_name}, attempt.describe()
        for condition in also:
            assert condition(attempt, arena), f"{condition.__name__} failed: {attempt.describe()}"

    return check


def raised(
    error: type[CapletError], *, exc_type: str | None = None, says: str = "", worker_lives: bool
) -> Check:
    """``main.run`` raised ``error`` (with the plugin's ``exc_type``) mentioning ``says``.

    ``worker_lives``: whether the follow-up ping must reach the same worker
    (an exception reply) or a fresh one (a killed jail, respawned lazily).
    """

    def check(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
        assert attempt.enabled, attempt.reason
        assert isinstance(attempt.error, error), attempt.describe()
        if exc_type is not None:
            assert isinstance(attempt.error, PluginCallError)
            assert attempt.error.exc_type == exc_type, attempt.describe()
        assert says in str(attempt.error), attempt.describe()
        assert attempt.followup == 1, f"the host could not call the plugin again: {attempt}"
        assert attempt.same_worker is worker_lives, attempt

    return check


def timed_out(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
    raised(CallTimeoutError, says=f"timed out after {DEADLINE_MS} ms", worker_lives=False)(
        attempt, arena, host
    )


def host_file_absent(attempt: Attempt, arena: Arena) -> bool:
    return not (arena.outside / f"{attempt.plugin}.txt").exists()


def no_hard_link(attempt: Attempt, arena: Arena) -> bool:
    return not (arena.out(attempt.plugin) / "hard").exists()


def symlink_was_made(attempt: Attempt, arena: Arena) -> bool:
    # The plugin may make links inside its grant; following one is what fails.
    link = arena.out(attempt.plugin) / "link"
    return link.is_symlink() and os.readlink(link) == str(arena.state_db)


def fork_bomb_stopped(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    # RLIMIT_NPROC alone would not do: copy_process() exempts the initial
    # user namespace's root (INIT_USER), which a worker of a root host is.
    assert attempt.error is None, attempt.describe()
    assert isinstance(attempt.value, dict), attempt.describe()
    assert attempt.value["errno"] == "EAGAIN", attempt.describe()
    assert attempt.value["forked"] < PROCESS_LIMIT, attempt.describe()
    events = _pids_events(attempt.jail_pid)
    assert events.get("max", 0) > 0, f"pids.max of the worker's cgroup did not refuse: {events}"


def _pids_events(pid: int) -> dict[str, int]:
    """The ``pids.events`` counters of the pids cgroup ``pid`` is in (cgroups(7))."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    where = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1 with the pids controller
            where = Path("/sys/fs/cgroup/pids", path.lstrip("/"))
        elif controllers == "" and where is None:  # the cgroup v2 line
            where = Path("/sys/fs/cgroup", path.lstrip("/"))
    assert where is not None, lines
    return {
        key: int(value)
        for key, value in (
            line.split() for line in (where / "pids.events").read_text().splitlines()
        )
    }


def fds_exhausted(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    assert attempt.error is None, attempt.describe()
    assert isinstance(attempt.value, dict), attempt.describe()
    assert attempt.value["errno"] == "EMFILE", attempt.describe()
    assert 0 < attempt.value["opened"] < 256, attempt.describe()  # WorkerSpec.open_files
    assert attempt.same_worker, attempt


def disk_full(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    assert attempt.error is None, attempt.describe()
    assert isinstance(attempt.value, dict), attempt.describe()
    assert attempt.value["errno"] == "ENOSPC", attempt.describe()
    # WorkerSpec.tmp_size_mb bounds the private /tmp; the host's /tmp never saw a byte.
    assert 0 < attempt.value["written"] <= 64 * _MIB, attempt.describe()
    assert not Path(tempfile.gettempdir(), f"{arena.token}-0").exists()


def undeclared_rejected(attempt: Attempt, _arena: Arena, host: PluginHost) -> None:
    assert attempt.value == "declared", attempt.describe()
    assert attempt.rejected == ("main.extra", "backdoor"), attempt
    logged = {
        d.target
        for d in host.manager.store.decisions(attempt.plugin)
        if d.action == "register" and not d.allowed
    }
    assert logged == {"main.extra", "backdoor"}
    for target in ("backdoor.shell", "main.extra"):
        with pytest.raises(LifecycleError, match="does not declare"):
            host.call(attempt.plugin, target)


def danger_gate_refused(attempt: Attempt, arena: Arena, host: PluginHost) -> None:
    assert not attempt.enabled
    assert "CPL-PROC-001" in attempt.reason, attempt.reason
    assert "danger finding" in attempt.reason, attempt.reason
    # create_functions would have written this (its grant is writable): it never ran.
    assert not (arena.out(attempt.plugin) / "create_functions-ran").exists()
    assert host.worker_pid(attempt.plugin) is None
    refusals = [
        d
        for d in host.manager.store.decisions(attempt.plugin)
        if d.action == "enable" and not d.allowed
    ]
    assert refusals, "the refusal must be in the permission log"
    with pytest.raises(LifecycleError, match="not enabled"):
        host.call(attempt.plugin, "main.run")


def _state_db_path(arena: Arena, _plugin: str) -> tuple[object, ...]:
    return (str(arena.state_db),)


def _through(prefix: str) -> Args:
    def args(arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (prefix.format(host_pid=arena.host_pid) + str(arena.state_db),)

    return args


# -- the cases ----------------------------------------------------------------------------

CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "read-etc-passwd",
        "read /etc/passwd",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=lambda _arena, _plugin: ("/etc/passwd",),
    ),
    HostileCase(
        "read-state-db",
        "read the host's state database",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=_state_db_path,
    ),
    HostileCase(
        "read-plugin-source",
        "read its own live source directory (not the snapshot)",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=lambda arena, plugin: (str(arena.plugins_dir / plugin / "plugin.py"),),
    ),
    HostileCase(
        "write-outside-grant",
        "write a file outside its fs.write grant",
        "namespaces",
        WRITE,
        refused("ENOENT", host_file_absent),
        args=lambda arena, plugin: (str(arena.outside / f"{plugin}.txt"),),
    ),
    HostileCase(
        "write-own-snapshot",
        "overwrite its own code in the verified snapshot",
        "namespaces",
        WRITE_OWN_SNAPSHOT,
        refused("EROFS"),
    ),
    HostileCase(
        "dotdot-escape",
        "climb out of its grant with '..'",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=lambda arena, plugin: (f"{arena.out(plugin)}/../../outside/secret.txt",),
    ),
    HostileCase(
        "symlink-escape",
        "make a symlink in its grant to the state db and read through it",
        "namespaces",
        SYMLINK,
        refused("ENOENT", symlink_was_made),
        args=_state_db_path,
    ),
    HostileCase(
        "hardlink-in",
        "hard-link the state db into its writable grant",
        "namespaces",
        HARDLINK,
        refused("ENOENT", no_hard_link),
        args=_state_db_path,
    ),
    HostileCase(
        "proc-self-root",
        "reach the host's files through /proc/self/root",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=_through("/proc/self/root"),
    ),
    HostileCase(
        "proc-1-root",
        "reach the host's files through /proc/1/root",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=_through("/proc/1/root"),
    ),
    HostileCase(
        "proc-host-root",
        "reach the host's files through /proc/<host pid>/root",
        "namespaces",
        READ,
        refused("ENOENT"),
        args=_through("/proc/{host_pid}/root"),
    ),
    HostileCase(
        "uid-map-rewrite",
        "open its user namespace's uid_map for writing (map every uid)",
        "landlock",
        UID_MAP,
        refused("EACCES"),
    ),
    HostileCase(
        "tcp-connect",
        "connect over TCP to a listener on 127.0.0.1",
        "seccomp",
        TCP,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.tcp_port,),
    ),
    HostileCase(
        "udp-send",
        "send a UDP datagram to 127.0.0.1",
        "seccomp",
        UDP,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.udp_port,),
    ),
    # Without seccomp this is EPERM too (no CAP_NET_RAW is left, capabilities(7)):
    # the errno cannot tell the two layers apart, the seccomp tests do.
    HostileCase("raw-socket", "open a raw ICMP socket", "seccomp", RAW, refused("EPERM")),
    HostileCase(
        "abstract-unix",
        "connect to the host's abstract unix socket",
        "namespaces",
        ABSTRACT,
        refused("ECONNREFUSED"),
        args=lambda arena, _plugin: (arena.abstract_name,),
    ),
    HostileCase("execve-sh", "execve /bin/sh", "seccomp", EXECVE, refused("EPERM")),
    HostileCase(
        "ptrace-host",
        "ptrace(PTRACE_ATTACH) the host's pid",
        "seccomp",
        PTRACE,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.host_pid,),
    ),
    # Pid 1 is the worker itself, which ptrace(2) refuses with EPERM anyway.
    HostileCase(
        "ptrace-pid-1",
        "ptrace(PTRACE_ATTACH) pid 1",
        "seccomp",
        PTRACE,
        refused("EPERM"),
        args=lambda _arena, _plugin: (1,),
    ),
    HostileCase(
        "unshare-userns",
        "unshare(CLONE_NEWUSER) to regain capabilities in a nested namespace",
        "seccomp",
        UNSHARE,
        refused("EPERM"),
    ),
    HostileCase(
        "kill-host",
        "SIGKILL the host's pid",
        "namespaces",
        KILL,
        refused("ESRCH"),
        args=lambda arena, _plugin: (arena.host_pid,),
    ),
    HostileCase(
        "fork-bomb",
        f"fork in a loop (up to {4 * PROCESS_LIMIT} processes, then hang)",
        "cgroup",
        FORK_BOMB,
        fork_bomb_stopped,
        args=lambda _arena, _plugin: (4 * PROCESS_LIMIT,),
        timeout_ms=1500,
    ),
    HostileCase(
        "fork-and-hang",
        "fork 8 children that sleep, then sleep past the deadline",
        "deadline",
        FORK_AND_HANG,
        timed_out,
        args=lambda _arena, _plugin: (8,),
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "memory-bomb",
        "allocate a 2 GiB bytearray",
        "rlimits",
        MEMORY_BOMB,
        raised(PluginCallError, exc_type="MemoryError", worker_lives=True),
    ),
    HostileCase(
        "cpu-spin",
        "spin the CPU forever",
        "deadline",
        SPIN,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "sleep-past-deadline",
        "block in time.sleep(60)",
        "deadline",
        SLEEP,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "infinite-output",
        "print to stdout and stderr forever",
        "deadline",
        FLOOD,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "huge-return",
        "return 64 MiB of bytes",
        "frame-limit",
        HUGE_RETURN,
        raised(PluginCallError, exc_type="ValueError", says="frame limit", worker_lives=True),
    ),
    HostileCase(
        "forged-frame",
        "write a frame header announcing 64 MiB straight onto the channel",
        "frame-limit",
        FORGED_FRAME,
        raised(ProtocolError, says="exceeds the limit", worker_lives=False),
    ),
    HostileCase(
        "deep-recursion",
        "recurse without end",
        "declarative-api",
        RECURSION,
        raised(PluginCallError, exc_type="RecursionError", worker_lives=True),
    ),
    HostileCase(
        "deep-nesting",
        "return a list nested 100000 deep",
        "declarative-api",
        DEEP_NESTING,
        raised(PluginCallError, exc_type="TypeError", says="nested deeper", worker_lives=True),
    ),
    HostileCase(
        "fd-exhaustion",
        "open /dev/null until it cannot",
        "rlimits",
        FD_EXHAUSTION,
        fds_exhausted,
    ),
    HostileCase(
        "disk-fill",
        "fill its /tmp until the disk is full",
        "namespaces",
        DISK_FILL,
        disk_full,
        args=lambda arena, _plugin: (arena.token,),
    ),
    HostileCase(
        "undeclared-module",
        "register a module and a function the manifest does not declare",
        "declarative-api",
        UNDECLARED,
        undeclared_rejected,
    ),
    HostileCase(
        "danger-gated",
        "run a program through subprocess without proc.exec",
        "danger-gate",
        DANGER_GATED,
        danger_gate_refused,
        gated=True,
    ),
)

#: What the issue's "Done when" lists, and the cases that cover each.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "reading /etc/passwd": ("read-etc-passwd",),
    "reading the host's state dir": ("read-state-db", "read-plugin-source"),
    "writing outside the grant": ("write-outside-grant", "write-own-snapshot"),
    "symlink escape": ("symlink-escape",),
    "hard-link escape": ("hardlink-in",),
    "'..' escape": ("dotdot-escape",),
    "/proc escape": ("proc-self-root", "proc-1-root", "proc-host-root"),
    "opening a socket": ("tcp-connect", "udp-send", "raw-socket", "abstract-unix"),
    "execve": ("execve-sh",),
    "ptrace of the host": ("ptrace-host", "ptrace-pid-1"),
    "signalling the host": ("kill-host",),
    "fork bomb": ("fork-bomb", "fork-and-hang"),
    "memory bomb": ("memory-bomb",),
    "CPU spin": ("cpu-spin", "sleep-past-deadline"),
    "infinite output": ("infinite-output", "huge-return", "forged-frame"),
    "fd exhaustion": ("fd-exhaustion",),
    "disk fill": ("disk-fill",),
}


def case_table(outcomes: Mapping[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(attack, expected layer, outcome) per case; ``outcomes`` maps plugin -> outcome."""
    return tuple((case.attack, case.layer, outcomes.get(case.plugin, "not run")) for case in CASES)


# -- running a case -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Jail:
    """One worker's jail as the host sees it: pid 1 of its pid namespace."""

    pid_one: int
    pidfd: int
    namespace: str


def _find_jail(monitor: int) -> Jail:
    """The jail under a worker's monitor (its only child, pid 1 inside)."""
    children = Path(f"/proc/{monitor}/task/{monitor}/children").read_text().split()
    assert len(children) == 1, f"the monitor {monitor} should have one child: {children}"
    pid_one = int(children[0])
    pidfd = os.pidfd_open(pid_one)
    namespace = os.readlink(f"/proc/{pid_one}/ns/pid")
    return Jail(pid_one, pidfd, namespace)


def _running_members(namespace: str) -> list[str]:
    """Every process on the machine in pid namespace ``namespace`` that is not a zombie.

    A zombie holds nothing but its pid: when the host kills a jail's
    monitor, the jail's pid 1 is reparented to the zygote (a child
    subreaper), which reaps it on its next SIGCHLD.
    """
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") != namespace:
                continue
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue  # exited while we looked, or a kernel thread
        # proc(5): the state follows the parenthesised command name.
        state = stat.rpartition(")")[2].split()[0]
        if state not in ("Z", "X"):
            found.append(stat)
    return found


def _assert_jail_gone(jail: Jail) -> None:
    """Pid 1 of the jail exited, so the kernel has killed its whole pid namespace.

    pid_namespaces(7): when pid 1 of a namespace terminates, every other
    process in it is killed, and pid 1's exit completes only once they are
    reaped; the pidfd turns readable at that exit (pidfd_open(2)).
    """
    try:
        poller = select.poll()
        poller.register(jail.pidfd, select.POLLIN)
        assert poller.poll(round(_JAIL_EXIT_S * 1000)), f"jail pid {jail.pid_one} still runs"
    finally:
        os.close(jail.pidfd)
    assert _running_members(jail.namespace) == [], "processes of the jail outlived it"


def _fool_the_review(host: PluginHost, plugin: str) -> None:
    """Record a clean audit of the plugin's current content (see the module docstring)."""
    audit = AuditResult(
        plugin=plugin,
        content_hash=host.manager.current_hash(plugin),
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="hostile-plugin test: the review was fooled, only the sandbox stands",
        findings=(),
        provider="hostile-test",
    )
    assert host.manager.set_audit_result(plugin, audit)


def _digest_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _idle(sock: socket.socket) -> bool:
    """True when nothing reached this (non-blocking) listener or receiver."""
    try:
        if sock.type == socket.SOCK_DGRAM:
            sock.recv(1)
        else:
            connection, _ = sock.accept()
            connection.close()
    except BlockingIOError:
        return True
    return False


@dataclass
class Bench:
    """One host for the whole module, the arena, and what each case produced."""

    arena: Arena
    host: PluginHost
    listeners: tuple[socket.socket, ...]
    sources: dict[str, str]
    outcomes: dict[str, str] = field(default_factory=dict)

    def attack(self, case: HostileCase) -> tuple[Attempt, list[Jail]]:
        host, plugin = self.host, case.plugin
        if not case.gated:
            _fool_the_review(host, plugin)
        enabled = host.enable(plugin, config={"out": str(self.arena.out(plugin))})
        if not enabled:
            return Attempt(plugin, enabled=False, reason=enabled.reason), []
        monitor = host.worker_pid(plugin)
        assert monitor is not None
        jails = [_find_jail(monitor)]
        rejected = tuple(host.rejected_registrations(plugin))
        value: object = None
        error: CapletError | None = None
        try:
            value = host.call(plugin, "main.run", *case.args(self.arena, plugin))
        except CapletError as exc:
            error = exc
        followup: object
        try:
            followup = host.call(plugin, "main.ping")
        except CapletError as exc:
            followup = f"{type(exc).__name__}: {exc}"
        now = host.worker_pid(plugin)
        if now is not None and now != monitor:
            jails.append(_find_jail(now))
        attempt = Attempt(
            plugin,
            enabled=True,
            value=value,
            error=error,
            followup=followup,
            same_worker=now == monitor,
            rejected=rejected,
            jail_pid=jails[0].pid_one,
        )
        return attempt, jails

    def contain(self, case: HostileCase, jails: list[Jail]) -> None:
        """Stop the plugin and prove the attack left nothing behind."""
        self.host.disable(case.plugin)
        for jail in jails:
            _assert_jail_gone(jail)
        assert self.host.call("canary", "main.run") == {"args": [], "config": {}}
        assert _digest_tree(self.arena.plugins_dir) == self.sources
        store = self.host.manager.store
        assert isinstance(store, SqliteStore)
        assert store.integrity_check() == ("ok",)
        assert all(_idle(sock) for sock in self.listeners), "a plugin reached a host socket"


#: Every hostile plugin declares one writable directory (its own, under the arena).
GRANT = 'capabilities = ["fs.write:${config.out}"]\n\n[config.out]\ntype = "string"\n'


def _modules(case: HostileCase) -> str:
    text = '[modules.main]\nfunctions = ["run", "ping"]\n'
    if case.timeout_ms is not None:
        text += f"\n[limits]\ntimeout_ms = {case.timeout_ms}\n"
    return text


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    root = tmp_path_factory.mktemp("hostile")
    token = f"caplet-hostile-{uuid.uuid4().hex}"
    with pytest.MonkeyPatch.context() as patch, ExitStack() as stack:
        # The module-scoped host outlives each test's own HOME override.
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("XDG_STATE_HOME", str(root / "home" / ".state"))
        patch.setenv("XDG_CONFIG_HOME", str(root / "home" / ".config"))
        tcp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        udp.bind(("127.0.0.1", 0))
        unix = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        unix.bind("\0" + token)
        unix.listen()
        listeners = (tcp, udp, unix)
        for sock in listeners:
            sock.setblocking(False)
        arena = Arena(
            root=root,
            host_pid=os.getpid(),
            state_db=root / "state" / "caplet.db",
            plugins_dir=root / "plugins",
            grants_dir=root / "grants",
            outside=root / "outside",
            tcp_port=tcp.getsockname()[1],
            udp_port=udp.getsockname()[1],
            abstract_name=token,
            token=token,
        )
        arena.outside.mkdir()
        arena.secret.write_text("the host's secret\n")
        factory = PluginFactory(arena.plugins_dir)
        factory("canary")
        for case in CASES:
            arena.out(case.plugin).mkdir(parents=True)
            factory(
                case.plugin,
                source=textwrap.dedent(PRELUDE) + textwrap.dedent(case.body),
                extra=GRANT,
                modules=_modules(case),
            )
        host = stack.enter_context(PluginHost(arena.plugins_dir, state_dir=root / "state"))
        # Strict isolation: every layer is in force, or no plugin would start;
        # the pids cgroup is optional for strict, but the fork bomb needs it.
        assert "missing" not in host.isolation, host.isolation
        for layer in ("namespaces", "rlimits", "landlock", "seccomp", "cgroup"):
            assert layer in host.isolation, host.isolation
        assert host.enable("canary")
        assert arena.state_db.is_file()
        yield Bench(arena, host, listeners, _digest_tree(arena.plugins_dir))


def _param(case: HostileCase) -> object:
    marks = (
        [pytest.mark.xfail(strict=True, raises=LayerMismatchError, reason=case.gap)]
        if case.gap
        else []
    )
    return pytest.param(case, id=case.plugin, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_hostile_plugin_is_contained(case: HostileCase, bench: Bench) -> None:
    attempt, jails = bench.attack(case)
    bench.outcomes[case.plugin] = attempt.describe()
    try:
        try:
            case.check(attempt, bench.arena, bench.host)
        except AssertionError as exc:
            raise LayerMismatchError(
                f"{case.attack}: expected {case.layer} to stop it, got {attempt.describe()}"
            ) from exc
    finally:
        # Containment is proved whatever the check said: a known gap in one
        # layer must still leave the host and its state intact.
        bench.contain(case, jails)


def test_every_case_is_accounted_for(bench: Bench, request: pytest.FixtureRequest) -> None:
    names = [case.plugin for case in CASES]
    assert len(set(names)) == len(names), "plugin names must be unique"
    assert len({case.attack for case in CASES}) == len(CASES), "attacks must be unique"
    assert {case.layer for case in CASES} == set(LAYERS), "every layer must be exercised"
    covered = {plugin for plugins in REQUIRED.values() for plugin in plugins}
    assert covered <= set(names), covered - set(names)
    ran = [
        item.callspec.params["case"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_hostile_plugin_is_contained"
    ]
    table = case_table(bench.outcomes)
    assert [row[0] for row in table] == [case.attack for case in CASES]
    by_attack = {attack: (layer, outcome) for attack, layer, outcome in table}
    for case in ran:
        assert isinstance(case, HostileCase)
        layer, outcome = by_attack[case.attack]
        assert layer in LAYERS
        assert outcome != "not run", f"{case.plugin} was collected but recorded no outcome"


def _clip(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
