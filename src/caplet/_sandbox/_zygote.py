"""The zygote: a warm fork server that turns spawn requests into sandboxed workers.

It runs in its own process (started once per :class:`SandboxLauncher`) with
the interpreter, msgpack and every sandbox layer already imported, so a new
worker costs a ``fork`` plus the layers, not an interpreter start-up.

Protocol (a ``SOCK_SEQPACKET`` pair, so each message is one datagram):

* zygote -> host, once at start: ``{"layers": {...}}``, what this machine
  offers (see :func:`probe_layers`);
* host -> zygote: a msgpack map (the spawn request, :func:`_spawn_request`)
  with three descriptors attached (``SCM_RIGHTS``): the worker's end of its
  channel, the worker's stderr log file, and the write end of a status pipe;
* zygote -> host: ``{"pid": N}`` with a pidfd of the new child attached, or
  ``{"error": "..."}``.

The zygote reaps its children and writes each one's status (4 bytes, the
:attr:`subprocess.Popen.returncode` convention) to that child's status
pipe, which is how the host learns how a worker ended even though it is not
the worker's parent. The zygote dies with the host (``PR_SET_PDEATHSIG``) and
every child dies with the zygote, so nothing outlives the host.

This module runs in the zygote and in workers: stdlib, msgpack and caplet's
base and sandbox modules only.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import msgpack

from caplet._errors import SandboxError
from caplet._sandbox import _worker
from caplet._sandbox._cgroup import PidsRoot, open_pids_root
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._jail import (
    JailSpec,
    enter_jail,
    prepare_jail,
    probe_namespaces,
    runtime_grants,
)
from caplet._sandbox._landlock import apply_landlock, landlock_abi
from caplet._sandbox._rlimits import ResourceLimits, apply_rlimits
from caplet._sandbox._seccomp import apply_seccomp, seccomp_available
from caplet._syscall import set_child_subreaper, set_parent_death_signal

__all__ = ["LAYERS", "OPTIONAL_LAYERS", "STATUS", "SpawnRequest", "main", "probe_layers"]

#: The isolation layers, in the order they are applied in a new worker.
LAYERS = ("namespaces", "rlimits", "landlock", "seccomp")
#: Layers used where the machine allows them, not required by strict isolation.
OPTIONAL_LAYERS = ("cgroup",)
#: Status pipe payload: one signed 32-bit int (returncode convention).
STATUS = struct.Struct("=i")
#: Exit code of a child whose sandbox could not be set up.
EXIT_SANDBOX_FAILED = 71
_MAX_REQUEST = 1 << 20
#: Computed once in the zygote (dozens of stat calls); every fork inherits it.
_RUNTIME_GRANTS: tuple[PathGrant, ...] = ()
#: Inside the jail /tmp is the worker's own tmpfs, not the host's.
_JAIL_TMP = "/tmp"  # noqa: S108
_WORKDIR_IN_JAIL = f"{_JAIL_TMP}/work"


def probe_layers() -> dict[str, str]:
    """Each layer -> "" when usable here, else why not (shown by ``caplet doctor``).

    ``CAPLET_TEST_DISABLE_LAYERS`` (comma-separated layer names) makes
    layers report unavailable: it exists so tests can simulate a machine
    without them, and is read before the zygote clears its environment.
    """
    disabled = _disabled_layers()
    report: dict[str, str] = {}
    for layer in LAYERS:
        if layer in disabled:
            report[layer] = "disabled by CAPLET_TEST_DISABLE_LAYERS (test-only)"
        elif layer == "namespaces":
            report[layer] = probe_namespaces() or ""
        elif layer == "landlock":
            abi = landlock_abi()
            report[layer] = (
                ""
                if abi
                else (
                    "the kernel offers no Landlock ABI (needs Linux >= 5.13 with landlock in the "
                    "lsm= boot list)"
                )
            )
        elif layer == "seccomp":
            report[layer] = "" if seccomp_available() else "seccomp filters are not available"
        else:
            report[layer] = ""
    return report


def _disabled_layers() -> set[str]:
    return {name.strip() for name in os.environ.get("CAPLET_TEST_DISABLE_LAYERS", "").split(",")}


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """One worker to start, as decoded (and checked) from the host's message."""

    layers: tuple[str, ...]
    grants: tuple[PathGrant, ...]
    workdir: str
    allow_exec: bool
    limits: ResourceLimits
    tmp_size_mb: int


def _spawn_request(message: object) -> SpawnRequest:
    """Decode a spawn request; the host is trusted, but malformed input must not crash us."""
    if not isinstance(message, dict):
        raise SandboxError("spawn request must be a map")
    try:
        layers = tuple(str(layer) for layer in message["layers"])
        grants = tuple(PathGrant(str(p), bool(w), bool(x)) for p, w, x in message["grants"])
        limits: Mapping[str, int | None] = message["limits"]
        return SpawnRequest(
            layers=layers,
            grants=grants,
            workdir=str(message["workdir"]),
            allow_exec=bool(message["allow_exec"]),
            limits=ResourceLimits(
                memory_mb=limits["memory_mb"],
                cpu_s=limits["cpu_s"],
                open_files=int(limits["open_files"] or 256),
                # Counted per user namespace since Linux 5.14 (ucounts), so
                # it bounds a fork bomb even when the worker's uid is root.
                processes=limits.get("processes"),
                file_size_mb=int(limits["file_size_mb"] or 64),
            ),
            tmp_size_mb=int(message["tmp_size_mb"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SandboxError(f"malformed spawn request: {exc!r}") from exc


def _child(
    request: SpawnRequest, channel_fd: int, log_fd: int, zygote_pid: int, cgroup: Path | None
) -> int:
    """In the forked child: apply every requested layer, then serve as a worker."""
    if cgroup is not None:
        # First of all, before anything could fork: every descendant is counted.
        PidsRoot.join(cgroup)
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote_pid:  # the zygote died before the signal was armed
        return EXIT_SANDBOX_FAILED
    os.setsid()  # a session of its own: no controlling terminal, its own group
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # RLIMIT_FSIZE should surface as OSError(EFBIG), not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.dup2(log_fd, 2)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    os.dup2(null, 0)
    os.dup2(null, 1)
    # The channel moves to fd 3 and everything else the zygote had open (its
    # control socket, other children's status pipes) is closed before any
    # layer runs: the jail's monitor process must not hold them either.
    os.dup2(channel_fd, 3)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    grants = (*_RUNTIME_GRANTS, *request.grants)
    if "namespaces" in request.layers:
        enter_jail(
            JailSpec(
                grants=_visible(grants), tmp_size_mb=request.tmp_size_mb, workdir=_WORKDIR_IN_JAIL
            )
        )
        writable_tmp = PathGrant(_JAIL_TMP, writable=True)
        devices = (PathGrant("/dev", writable=True), PathGrant("/proc"))
    else:
        os.chdir(request.workdir)
        writable_tmp = PathGrant(request.workdir, writable=True)
        devices = (PathGrant(os.devnull, writable=True), PathGrant("/dev/urandom"))
    if "rlimits" in request.layers:
        apply_rlimits(request.limits)
    if "landlock" in request.layers:
        apply_landlock((*grants, writable_tmp, *devices))
    if "seccomp" in request.layers:
        apply_seccomp(allow_exec=request.allow_exec)
    return _worker.main(["3"])


@dataclass(slots=True)
class _Children:
    """The zygote's live children: status pipe and pids cgroup of each."""

    status: dict[int, int]
    cgroups: dict[int, Path]
    #: Cgroups whose processes were still exiting when their leader was reaped.
    pending: list[Path]


def _visible(grants: tuple[PathGrant, ...]) -> tuple[PathGrant, ...]:
    """The grants the jail must mount: an executable grant already inside another
    grant (a program's ELF interpreter under /usr/lib) is visible without a
    mount of its own and only needs its Landlock execute rule."""
    plain = [g for g in grants if not g.executable]

    def inside(path: str) -> bool:
        return any(path == g.path or path.startswith(g.path.rstrip("/") + "/") for g in plain)

    return tuple(g for g in grants if not g.executable or not inside(g.path))


def _reap(children: _Children) -> None:
    """Reap every exited child, write its status to its status pipe, drop its cgroup."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        code = os.waitstatus_to_exitcode(status)
        status_fd = children.status.pop(pid, None)
        if status_fd is not None:
            try:
                os.write(status_fd, STATUS.pack(code))
            except OSError:
                pass  # the host stopped listening; nothing to tell
            os.close(status_fd)
        cgroup = children.cgroups.pop(pid, None)
        if cgroup is not None:
            children.pending.append(cgroup)
    children.pending[:] = [c for c in children.pending if not _remove_cgroup(c)]


def _remove_cgroup(cgroup: Path) -> bool:
    try:
        return PidsRoot.remove(cgroup)
    except OSError:
        return True  # not ours to fix; forget it rather than retry for ever


def _serve(control: socket.socket) -> int:
    zygote_pid = os.getpid()
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    children = _Children(status={}, cgroups={}, pending=[])
    layers = probe_layers()
    pids_root: PidsRoot | None = None
    if "cgroup" in _disabled_layers():
        layers["cgroup"] = "disabled by CAPLET_TEST_DISABLE_LAYERS (test-only)"
    else:
        pids_root, layers["cgroup"] = open_pids_root(f"caplet-zygote-{zygote_pid}")
    try:
        return _loop(
            control,
            wake_r=wake_r,
            layers=layers,
            pids_root=pids_root,
            children=children,
            zygote_pid=zygote_pid,
        )
    finally:
        if pids_root is not None:
            for cgroup in [*children.cgroups.values(), *children.pending]:
                _remove_cgroup(cgroup)
            pids_root.close()


def _loop(
    control: socket.socket,
    *,
    wake_r: int,
    layers: dict[str, str],
    pids_root: PidsRoot | None,
    children: _Children,
    zygote_pid: int,
) -> int:
    control.send(msgpack.packb({"layers": layers}))
    # Probing was the last use of the environment (the test-only switch):
    # workers are forked from here and must inherit nothing.
    os.environ.clear()
    while True:
        readable, _, _ = select.select([control.fileno(), wake_r], [], [])
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            _reap(children)
        if control.fileno() not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 3)
        if not message:
            return 0  # the host closed the channel: our children die with us
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            control.send(msgpack.packb({"error": "spawn request needs 3 descriptors"}))
            continue
        channel_fd, log_fd, status_fd = fds
        try:
            request = _spawn_request(msgpack.unpackb(message, raw=False))
        except (SandboxError, ValueError) as exc:
            for fd in fds:
                os.close(fd)
            control.send(msgpack.packb({"error": str(exc)}))
            continue
        cgroup = None
        if pids_root is not None and request.limits.processes is not None:
            cgroup = pids_root.create(
                f"worker-{len(children.status)}-{os.urandom(4).hex()}", request.limits.processes
            )
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, observed by the sandbox tests
            code = EXIT_SANDBOX_FAILED
            try:
                control.close()
                code = _child(request, channel_fd, log_fd, zygote_pid, cgroup)
            except BaseException as exc:  # report, never return into the zygote loop
                try:
                    message_text = f"caplet sandbox setup failed: {type(exc).__name__}: {exc}\n"
                    os.write(2, message_text.encode("utf-8", "replace"))
                    traceback.print_exc()
                except BaseException:  # noqa: S110 - nothing is left to report to
                    pass
            finally:
                os._exit(code)
        os.close(channel_fd)
        os.close(log_fd)
        children.status[pid] = status_fd
        if cgroup is not None:
            children.cgroups[pid] = cgroup
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(control, [msgpack.packb({"pid": pid})], [pidfd])
        finally:
            os.close(pidfd)


def main(argv: list[str] | None = None) -> int:
    """Run the zygote on the control socket whose fd number is ``argv[0]``."""
    args = sys.argv[1:] if argv is None else argv
    fd = int(args[0])
    set_parent_death_signal(signal.SIGKILL)
    # A killed jail monitor orphans the jail's pid 1 for a moment; as a
    # subreaper the zygote inherits and reaps it (its _reap loop takes any
    # child), instead of leaving a zombie for an init that may never reap.
    set_child_subreaper()
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    sys.dont_write_bytecode = True
    # Warm what every worker needs (libc through ctypes, cap_last_cap, the
    # runtime grants) once, here: forked workers inherit it for free.
    prepare_jail()
    global _RUNTIME_GRANTS
    _RUNTIME_GRANTS = runtime_grants()
    with socket.socket(fileno=fd) as control:
        return _serve(control)
