"""The zygote: a warm fork server that turns spawn requests into sandboxed workers.

It runs in its own process (started once per :class:`SandboxLauncher`) with
the interpreter, msgpack and every sandbox layer already imported, so a new
worker costs a ``fork`` plus the layers, not an interpreter start-up.

Protocol (a ``SOCK_SEQPACKET`` pair, so each message is one datagram):

* zygote -> host, once at start: ``{"layers": {...}, "seccomp_counting": "",
  "memory_cgroup": ""}``, what this machine offers (see :func:`probe_layers`;
  ``seccomp_counting`` is "" when denials can be counted, ``memory_cgroup``
  "" when workers get a memory cgroup, else why not);
* host -> zygote: a msgpack map (the spawn request, :func:`_spawn_request`)
  with three descriptors attached (``SCM_RIGHTS``): the worker's end of its
  channel, the worker's stderr log file, and the write end of a status pipe;
* zygote -> host: ``{"pid": N}`` with a pidfd of the new child attached, or
  ``{"error": "..."}``.

The zygote reaps its children and writes each one's status (4 bytes, the
:attr:`subprocess.Popen.returncode` convention) to that child's status
pipe, which is how the host learns how a worker ended even though it is not
the worker's parent, followed by a msgpack map ``{"denials": {syscall name:
count}, "oom_kills": N}``: the seccomp denials it counted for that worker
(empty when none, or when counting is off) and how many of its processes
the OOM killer took at its memory cgroup's limit, in one write of at most
PIPE_BUF bytes so that it is atomic and cannot block on the fresh pipe
(pipe(7)).

Counting denials (``count_denials`` in the spawn request, when the seccomp
layer is on and :func:`~caplet._sandbox._seccomp.seccomp_notify_problem`
finds nothing wrong): the zygote makes a socketpair per spawn; the worker
installs its filter with a listener (seccomp_unotify(2)), sends the
listener fd over that socketpair, closes its copies and only then runs
plugin code. The zygote's loop polls every listener with its control
socket and answers each notification with EPERM through a
:class:`~caplet._sandbox._seccomp.DenialCounter`, at most
:data:`~caplet._sandbox._seccomp.SERVE_BATCH` per listener per turn, so a
flooding plugin costs CPU but delays spawn requests and other workers by
at most that many round trips per turn. A listener is closed when it
reports POLLHUP (no process uses the filter any more).

Spares: the zygote keeps one child forked ahead of the next request (see
:class:`_Spare`). It places the spare in its cgroups, then tells it so
(``_PLACED``): only then may the spare fork. Where the namespaces layer
exists, the spare gets as far as it can without its request: its own
session, the namespaces and pid 1 (the spare becomes the monitor), the
shared part of the root (:func:`~caplet._sandbox._jail.build_root`) and a
warm-up of the start's code paths; the request then adds its own grants and
the layers that depend on it (:func:`~caplet._sandbox._jail.finish_jail`).
The next spare is forked when the host says the start it waits for is over
(:data:`REFILL`: the worker's first call answered), not when the request is
claimed: forked at once, it built its namespaces and root on the machine's
other core while the claimed spare finished its jail, and the two contended
for CPU and for the kernel's mount locks (1-2 ms of a 8 ms cold start on the
2-core VM); forked right after READY, it slowed the first call from ~0.3 to
~4 ms. Without a REFILL the spare is forked ``_REFILL_AFTER_S`` after the
claim. A request that finds no spare meanwhile (two starts at once, or a
REFILL lost) is forked directly, as before, and the next spare forked right
after it: no start ever waits for a spare.

The zygote dies with the host (``PR_SET_PDEATHSIG``) and every child dies
with the zygote, so nothing outlives the host. When the host closes the
control socket (an orderly close) the zygote kills and reaps its spare and
any worker left before it exits, so nothing is left even as a zombie.

This module runs in the zygote and in workers: stdlib, msgpack and caplet's
base and sandbox modules only.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import gc
import math
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import msgpack

from caplet._errors import SandboxError
from caplet._sandbox import _worker
from caplet._sandbox._cgroup import CgroupRoot, WorkerCgroup, open_cgroups
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail import (
    DISABLE_LAYERS_ENV,
    PRIVATE_TMP_ASIDE,
    JailSpec,
    PreparedRoot,
    build_root,
    disabled_layers,
    enter_jail,
    enter_namespaces,
    finish_jail,
    prepare_jail,
    probe_namespaces,
    runtime_grants,
    unsearchable_roots,
)
from caplet._sandbox._landlock import apply_landlock, landlock_abi
from caplet._sandbox._relocate import RUNTIME_ROOT, relocation_problem, zygote_started
from caplet._sandbox._rlimits import ResourceLimits, apply_rlimits
from caplet._sandbox._seccomp import (
    DenialCounter,
    apply_seccomp,
    prepare_filters,
    seccomp_notify_problem,
    seccomp_problem,
)
from caplet._syscall import close_fds_except, set_child_subreaper, set_parent_death_signal

__all__ = [
    "DIES_AT_SPARE_ENV",
    "LATE_SPARE_ENV",
    "LATE_SPARE_FAILS",
    "LAYERS",
    "OPTIONAL_LAYERS",
    "REFILL",
    "SECCOMP_COUNTING",
    "SNAPSHOT_FD",
    "STATUS",
    "SpawnRequest",
    "main",
    "probe_counting",
    "probe_layers",
]

#: The isolation layers, in the order they are applied in a new worker.
LAYERS = ("namespaces", "rlimits", "landlock", "seccomp")
#: Layers used where the machine allows them, not required by strict isolation.
OPTIONAL_LAYERS = ("cgroup",)
#: Status pipe payload: one signed 32-bit int (returncode convention), then
#: the msgpack map of denial counts.
STATUS = struct.Struct("=i")
#: The whole status report fits in one atomic pipe write (pipe(7): PIPE_BUF).
_PIPE_BUF = 4096
#: Exit code of a child whose sandbox could not be set up.
EXIT_SANDBOX_FAILED = 71
_MAX_REQUEST = 1 << 20
#: Computed once in the zygote (dozens of stat calls); every fork inherits it.
_RUNTIME_GRANTS: tuple[PathGrant, ...] = ()
#: Inside the jail /tmp is the worker's own tmpfs, not the host's.
_JAIL_TMP = "/tmp"  # noqa: S108
#: Where the child keeps its end of the listener handover socket (the channel is fd 3).
_HANDOVER_FD = 4
#: Without a jail, a root host's worker reads its snapshot through this
#: descriptor (``/proc/self/fd/5``): its uid cannot walk the run directory.
SNAPSHOT_FD = 5
#: host -> zygote, no descriptors, no reply: the start that claimed the spare (or
#: forked a worker directly) is over, fork the next spare now. Sent when the
#: worker's first call has been answered, when it is closed without one, or
#: when its start failed; without it the zygote forks the spare
#: ``_REFILL_AFTER_S`` after the claim.
REFILL = b"refill"
#: Test-only name in CAPLET_TEST_DISABLE_LAYERS that turns denial counting off.
SECCOMP_COUNTING = "seccomp_counting"
#: Test-only: "1" makes every spare wait until its request is queued before it
#: sets itself up (the interleaving a loaded machine produces), LATE_SPARE_FAILS
#: also makes that set-up fail (with EIO); read once by the zygote.
LATE_SPARE_ENV = "CAPLET_TEST_LATE_SPARE"
LATE_SPARE_FAILS = "fail"
_LATE_SPARE = ""
#: Test-only: "N" makes the zygote SIGKILL itself right after forking its N-th
#: spare, before placing it: where a zygote whose host exited dies
#: (PR_SET_PDEATHSIG) when the host's last start sent :data:`REFILL` just before
#: it exited; read once by the zygote.
DIES_AT_SPARE_ENV = "CAPLET_TEST_ZYGOTE_DIES_AT_SPARE"
_DIES_AT_SPARE = 0
#: Who every worker of this zygote runs as (set by :func:`main`; None: the
#: zygote's own ids, as before the host told it otherwise).
_IDENTITY: WorkerIdentity | None = None


def probe_layers() -> dict[str, str]:
    """Each layer -> "" when usable here, else why not (shown by ``caplet doctor``).

    ``CAPLET_TEST_DISABLE_LAYERS`` (comma-separated layer names) makes
    layers report unavailable: it exists so tests can simulate a machine
    without them, and is read before the zygote clears its environment.
    """
    disabled = disabled_layers()
    report: dict[str, str] = {}
    for layer in LAYERS:
        if layer in disabled:
            report[layer] = f"disabled by {DISABLE_LAYERS_ENV} (test-only)"
        elif layer == "namespaces":
            report[layer] = probe_namespaces(_IDENTITY) or ""
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
            report[layer] = seccomp_problem() or ""
        else:
            report[layer] = ""
    return report


def probe_counting(layers: Mapping[str, str]) -> str:
    """ "" when seccomp denials can be counted here, else why not (``caplet doctor``).

    ``seccomp_counting`` in ``CAPLET_TEST_DISABLE_LAYERS`` turns it off (test-only).
    """
    if layers.get("seccomp"):
        return f"the seccomp layer is unavailable ({layers['seccomp']})"
    if SECCOMP_COUNTING in disabled_layers():
        return f"disabled by {DISABLE_LAYERS_ENV} (test-only)"
    return seccomp_notify_problem() or ""


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """One worker to start, as decoded (and checked) from the host's message."""

    layers: tuple[str, ...]
    grants: tuple[PathGrant, ...]
    workdir: str
    allow_exec: bool
    limits: ResourceLimits
    tmp_size_mb: int
    #: Install the seccomp filter with a listener the zygote counts denials on.
    count_denials: bool = False
    #: Directories hidden inside the grants (JailSpec.masks).
    masks: tuple[str, ...] = ()
    #: The snapshot's host path (opened at SNAPSHOT_FD without a jail on a root host).
    snapshot: str = ""


def _spawn_request(message: object) -> SpawnRequest:
    """Decode a spawn request; the host is trusted, but malformed input must not crash us."""
    if not isinstance(message, dict):
        raise SandboxError("spawn request must be a map")
    try:
        layers = tuple(str(layer) for layer in message["layers"])
        grants = tuple(
            PathGrant(str(p), bool(w), bool(x), str(t), int(d), int(i), bool(c), str(h))
            for p, w, x, t, d, i, c, h in message["grants"]
        )
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
            masks=tuple(str(path) for path in message.get("masks", ())),
            snapshot=str(message.get("snapshot", "")),
            count_denials=bool(message.get("count_denials", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SandboxError(f"malformed spawn request: {exc!r}") from exc


def _child(
    request: SpawnRequest,
    channel_fd: int,
    log_fd: int,
    zygote_pid: int,
    cgroup: WorkerCgroup | None,
    *,
    handover_fd: int | None = None,
    prepared: PreparedRoot | None = None,
    memory_cgroup: bool = False,
) -> int:
    """In the forked child: apply every requested layer, then serve as a worker.

    With ``prepared`` this is pid 1 of a spare's namespaces, whose shared
    root is already built (:func:`_spare_main`): its process set-up
    (cgroup, session, parent-death signal) was done before the fork, and the
    jail only has to be finished. ``memory_cgroup``: the worker is in a
    memory cgroup whose limit the zygote set to the request's.

    With ``handover_fd`` (one end of a socketpair whose other end the zygote
    polls) the seccomp filter is installed with a listener, which is sent
    to the zygote before plugin code can run; any failure raises, and the
    child exits without running the worker (fail closed). Every failure
    raises an exception naming the step (and the errno), and stderr is the
    worker's log from the first line on, so the host's error quotes it.
    """
    # First of all: what fails from here on is explained in the worker's own
    # log, which the host quotes when the start fails.
    with _step("redirecting stderr to the worker's log"):
        os.dup2(log_fd, 2)
    if prepared is None:
        _own_process(zygote_pid, cgroup)
    with _step("moving the worker's descriptors into place"):
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, 0)
        os.dup2(null, 1)
        if handover_fd == 3:  # the channel is about to take fd 3
            handover_fd = fcntl.fcntl(handover_fd, fcntl.F_DUPFD, _HANDOVER_FD + 1)
        # The channel moves to fd 3 (and the listener handover socket to fd 4)
        # and everything else the zygote had open (its control socket, other
        # children's status pipes and seccomp listeners) is closed before any
        # layer runs: the jail's monitor process must not hold them either.
        os.dup2(channel_fd, 3)
        keep = {0, 1, 2, 3}
        if handover_fd is not None:
            os.dup2(handover_fd, _HANDOVER_FD)
            keep.add(_HANDOVER_FD)
        if prepared is not None:
            keep |= {prepared.host_root_fd, prepared.covered_fd}
        close_fds_except(keep)
    grants = (*_runtime_for(request.grants), *request.grants)
    if prepared is not None and "namespaces" not in request.layers:
        raise SandboxError(
            "sandbox setup: a spare with a namespace jail got a request without the "
            "namespaces layer; restart the host (the zygote and the host disagree on layers)"
        )
    if "namespaces" in request.layers:
        # The runtime's own grants do not count (see _private_tmp): only a plugin's.
        private_tmp = _private_tmp(request.grants)
        spec = JailSpec(
            grants=_visible(grants),
            tmp_size_mb=request.tmp_size_mb,
            workdir=f"{private_tmp}/work",
            identity=_IDENTITY,
            masks=request.masks,
            private_tmp=private_tmp,
        )
        if prepared is not None:
            finish_jail(prepared, spec)
        else:
            enter_jail(spec)
        with _step("reopening stdin and stdout on the jail's /dev/null"):
            # The ones opened above are the host's node on a mount outside
            # the jail: harmless, but nothing the worker holds should be.
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.close(null)
        writable_tmp = PathGrant(private_tmp, writable=True)
        devices = (PathGrant("/dev", writable=True), PathGrant("/proc"))
    else:
        os.chdir(request.workdir)
        writable_tmp = PathGrant(request.workdir, writable=True)
        devices = (PathGrant(os.devnull, writable=True), PathGrant("/dev/urandom"))
    if "rlimits" in request.layers:
        apply_rlimits(_limits_for(request))
    if "landlock" in request.layers:
        if "namespaces" in request.layers:
            # Inside the jail a grant lives at its target (the snapshot at /plugin).
            grants = tuple(PathGrant(g.inside, g.writable, g.executable) for g in grants)
        apply_landlock((*grants, writable_tmp, *devices))
    snapshot_fd = None
    if "namespaces" not in request.layers:
        # Without a jail the switch to the worker's ids happens here: after
        # Landlock opened the paths it rules (the host's run directory is
        # root's alone), before seccomp refuses set*id(2).
        snapshot_fd = _become_worker(request.workdir, request.snapshot, zygote_pid)
    if "seccomp" in request.layers:
        # Nothing but a memory cgroup bounds what a memfd holds (RLIMIT_AS
        # never sees its pages: red-team finding 9, _cgroup's docstring), nor
        # what splice/sendfile and sized buffers put in a socket.
        memory_bounded = memory_cgroup or request.limits.memory_mb is None
        listener = apply_seccomp(
            allow_exec=request.allow_exec,
            notify=handover_fd is not None,
            memory_bounded=memory_bounded,
        )
        if listener is not None:
            _hand_over(listener)
    return _worker.main(["3"] if snapshot_fd is None else ["3", str(snapshot_fd)])


#: Where a pids cgroup bounds each worker, RLIMIT_NPROC sits this many
#: processes above its pids.max: the cgroup is exact per worker and refuses
#: first; the rlimit (counted per user namespace and uid, Linux 5.14) is the
#: backstop for a cgroup that failed or is missing.
_NPROC_MARGIN = 8
#: Whether workers get a pids cgroup (set by :func:`_serve`).
_CGROUPS = False
_MIB = 1024 * 1024


def _memory_bytes(request: SpawnRequest) -> int | None:
    """The worker's memory cgroup limit: its memory_mb and its /tmp (a tmpfs is memory)."""
    if request.limits.memory_mb is None:
        return None
    return (request.limits.memory_mb + request.tmp_size_mb) * _MIB


def _limits_for(request: SpawnRequest) -> ResourceLimits:
    """The request's rlimits, RLIMIT_NPROC placed behind the pids cgroup where there is one.

    Without a jail on a root host every worker shares one uid in the host's
    user namespace, so RLIMIT_NPROC would count all their processes
    together: one plugin's fork bomb would stop every other plugin's
    workers from starting. There the cgroup alone bounds each worker, when
    it exists; without it the shared rlimit is all there is (docs/security.md).
    """
    limits = request.limits
    if limits.processes is None or not _CGROUPS:
        return limits
    shared = "namespaces" not in request.layers and _IDENTITY is not None and _IDENTITY.privileged
    processes = None if shared else limits.processes + _NPROC_MARGIN
    return dataclasses.replace(limits, processes=processes)


def _become_worker(workdir: str, snapshot: str, zygote_pid: int) -> int | None:
    """Outside a jail on a root host: drop root's groups and take the worker's ids.

    The working directory (made by the host, owned by root) is given to the
    worker first, the snapshot is opened at :data:`SNAPSHOT_FD` (the host's
    run directory is root's alone: the worker reads it through
    ``/proc/self/fd``, which walks no directory above it), and every
    capability goes with the switch to a non-zero uid (capabilities(7));
    no_new_privs (set by Landlock or seccomp) keeps them gone.
    Returns :data:`SNAPSHOT_FD` when it opened the snapshot there, else None.
    """
    identity = _IDENTITY
    if identity is None or not identity.privileged or os.geteuid() != 0:
        return None
    with _step(f"switching to the worker's {identity.describe()}"):
        if snapshot:
            fd = os.open(snapshot, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            if fd != SNAPSHOT_FD:
                os.dup2(fd, SNAPSHOT_FD, inheritable=False)
                os.close(fd)
        os.chown(workdir, identity.uid, identity.gid)
        os.setgroups([])
        os.setresgid(identity.gid, identity.gid, identity.gid)
        os.setresuid(identity.uid, identity.uid, identity.uid)
    with _step("re-arming PR_SET_PDEATHSIG after the switch"):
        # A change of the effective uid clears the parent-death signal
        # (prctl(2)) that _own_process armed: without it a host killed
        # mid-call left the plugin running (a red-team finding).
        set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote_pid:
        raise SandboxError("sandbox setup: the zygote exited before the worker was set up")
    return SNAPSHOT_FD if snapshot else None


def _own_process(zygote_pid: int, cgroup: WorkerCgroup | None) -> None:
    """The worker's process set-up: its cgroups, death with the zygote, a session, signals."""
    if cgroup is not None:
        # Before anything could fork or allocate: every descendant and page is counted.
        with _step(f"joining the worker's cgroups {', '.join(map(str, cgroup.directories))}"):
            cgroup.join()
    with _step("arming PR_SET_PDEATHSIG"):
        set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote_pid:
        raise SandboxError("sandbox setup: the zygote exited before the worker was set up")
    with _step("starting a session (setsid(2))"):
        os.setsid()  # a session of its own: no controlling terminal, its own group
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # RLIMIT_FSIZE should surface as OSError(EFBIG), not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _hand_over(listener: int) -> None:
    """Send the seccomp listener to the zygote and keep no copy of it or of the socket.

    Runs under the new filter, which makes no supervisor answer yet: a
    denied syscall here would wait for ever, so only sendmsg and close are
    made (neither is denied). The plugin must not keep the listener (it
    could answer its own denied calls with CONTINUE) nor the socket (it
    could send the zygote descriptors of its own).
    """
    try:
        with socket.socket(fileno=_HANDOVER_FD) as handover:
            sent = socket.send_fds(handover, [b"listener"], [listener])
    finally:
        os.close(listener)
    if sent != len(b"listener"):
        raise SandboxError("seccomp: the listener could not be handed to the zygote")


@dataclass(slots=True)
class _Children:
    """The zygote's live children: status pipe and cgroups of each, and
    the descriptors its loop polls for their seccomp denials."""

    status: dict[int, int]
    cgroups: dict[int, WorkerCgroup]
    #: Cgroups whose processes were still exiting when their leader was reaped.
    pending: list[WorkerCgroup]
    #: Every descriptor the loop waits on (control, wakeup pipe, the rest below).
    poller: select.poll
    #: Handover socket fd -> (child pid, socket) until the child's listener arrives.
    handovers: dict[int, tuple[int, socket.socket]]
    #: Listener fd -> its counter, until the listener hangs up.
    listeners: dict[int, DenialCounter]
    #: Child pid -> its counter, until the child is reaped and its counts reported.
    denials: dict[int, DenialCounter]

    def expect_listener(self, pid: int, handover: socket.socket) -> None:
        handover.setblocking(False)
        self.handovers[handover.fileno()] = (pid, handover)
        self.poller.register(handover, select.POLLIN)

    def receive_listener(self, fd: int) -> None:
        """Take the listener a child sent (or its end-of-file: it never will)."""
        pid, handover = self.handovers.pop(fd)
        self.poller.unregister(fd)
        try:
            _, fds, _, _ = socket.recv_fds(handover, 64, 1)
        except OSError:
            fds = []  # nothing arrived: the child exits without running the plugin
        finally:
            handover.close()
        if not fds:
            return
        counter = DenialCounter(fds[0])
        for extra in fds[1:]:
            os.close(extra)
        self.listeners[fds[0]] = counter
        self.denials[pid] = counter
        self.poller.register(fds[0], select.POLLIN)

    def serve_listener(self, fd: int) -> None:
        counter = self.listeners[fd]
        try:
            open_ = counter.serve()
        except OSError as exc:
            # Closing makes the worker's denied calls fail with ENOSYS:
            # still denied, only no longer counted (seccomp_unotify(2)).
            _say(f"seccomp listener failed ({exc}); denials are no longer counted")
            open_ = False
        if not open_:
            self.poller.unregister(fd)
            del self.listeners[fd]
            counter.close()

    def report(self, pid: int, code: int, *, oom_kills: int = 0) -> bytes:
        """The status pipe payload for a reaped child: status, then a map of its
        denial counts and of the processes its memory cgroup's OOM killer took."""
        for fd, (owner, _) in list(self.handovers.items()):
            if owner == pid:
                self.receive_listener(fd)
        counter = self.denials.pop(pid, None)
        counts: dict[str, int] = {}
        if counter is not None:
            if counter.fd is not None:
                self.serve_listener(counter.fd)  # what its last moments left pending
            counts = counter.counts
        payload: bytes = STATUS.pack(code) + msgpack.packb(
            {"denials": counts, "oom_kills": oom_kills}
        )
        if len(payload) > _PIPE_BUF:  # cannot happen with MAX_DENIAL_NAMES short names
            payload = STATUS.pack(code) + msgpack.packb({"denials": {}, "oom_kills": oom_kills})
        return payload


@contextmanager
def _step(what: str) -> Iterator[None]:
    """Turn an OSError of one setup step into a SandboxError naming the step and errno."""
    try:
        yield
    except OSError as exc:
        code = exc.errno or 0
        name = errno.errorcode.get(code, str(code))
        raise SandboxError(f"sandbox setup: {what} failed: {os.strerror(code)} ({name})") from exc


def _explain(exc: BaseException) -> str:
    """One line for the worker's log: the exception, with the errno's name when it has one."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if isinstance(cause, OSError) and cause.errno:
        name = errno.errorcode.get(cause.errno, "")
        if name and name not in text:
            text += f" ({name})"
    return text


def _report_failure(exc: BaseException, fd: int = 2) -> None:
    """Write why the sandbox setup failed to ``fd`` (the worker's log), never raising."""
    try:
        # The traceback first and the summary last: the host quotes the log's tail.
        text = "".join(traceback.format_exception(exc))
        text += f"caplet sandbox setup failed: {_explain(exc)}\n"
        os.write(fd, text.encode("utf-8", "replace"))
    except BaseException:  # noqa: S110 - nothing is left to report to
        pass


def _say(text: str) -> None:
    try:
        os.write(2, f"caplet zygote: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def _private_tmp(grants: tuple[PathGrant, ...]) -> str:
    """Where the jail's own writable tmpfs goes: /tmp, unless a grant is or lies under /tmp.

    Landlock grants an access if a rule on *any* directory above the file
    allows it (landlock(7)): a read-only grant mounted inside a writable
    /tmp would be writable as far as Landlock is concerned, and its
    read-only mount does not stop what it does not cover, a write into a
    FIFO (a host daemon's command pipe) above all. So when any grant lives
    under the host's /tmp (or is it), the jail's tmpfs and the working
    directory move to :data:`PRIVATE_TMP_ASIDE`: /tmp is then the host's
    (a grant of it) or a read-only directory holding the grants' mount
    points, and the writable rule is above nothing but the worker's own
    files. ``tempfile`` falls back to the working directory by itself.
    The runtime's grants (a virtual environment under /tmp) are left out:
    no plugin can put a FIFO there, since no writable grant may contain or
    lie in the runtime, and moving /tmp away from every worker of such a
    host would change what plugins see for nothing.
    """
    for grant in grants:
        if grant.target:
            continue  # the snapshot: copied, at /plugin
        if grant.path == _JAIL_TMP or grant.path.startswith(f"{_JAIL_TMP}/"):
            return PRIVATE_TMP_ASIDE
    return _JAIL_TMP


def _runtime_for(grants: tuple[PathGrant, ...]) -> tuple[PathGrant, ...]:
    """The runtime's grants a worker with ``grants`` still needs mounted.

    A read-only grant above part of the runtime (``fs.read:/``) shows it
    already; mounting the runtime's own spelling there would meet the
    host's symbolic links (``/lib`` -> ``usr/lib`` on a merged-/usr host)
    inside the grant. A writable grant never contains the runtime: enable
    refuses it (caplet's own code must not be writable by a plugin).
    """
    covering = [g.path for g in grants if not g.writable and not g.executable and not g.target]
    if not covering:
        return _RUNTIME_GRANTS
    # A grant of / leaves out the top-level directories the worker may not
    # search (_jail_plan._whole_root): the runtime below one of them keeps its own mounts.
    hidden: frozenset[str] = frozenset()
    if "/" in covering:
        identity = _IDENTITY
        uid, gid = (identity.uid, identity.gid) if identity else (os.geteuid(), os.getegid())
        hidden = unsearchable_roots(uid, gid)
    return tuple(
        runtime
        for runtime in _RUNTIME_GRANTS
        if any(_under(runtime.path, top) for top in hidden)
        or not any(_under(runtime.path, outer) for outer in covering)
        # The relocated runtime is no host path: no host grant shows it.
        or _under(runtime.path, RUNTIME_ROOT)
    )


def _under(path: str, outer: str) -> bool:
    return outer in (path, "/") or path.startswith(outer.rstrip("/") + "/")


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
        cgroup = children.cgroups.pop(pid, None)
        oom_kills = 0
        if cgroup is not None:
            oom_kills = cgroup.oom_kills()
            # Whatever the worker left running (possible without a pid
            # namespace) dies with it, before the host hears it has ended.
            cgroup.kill_members()
            children.pending.append(cgroup)
        payload = children.report(pid, code, oom_kills=oom_kills)
        status_fd = children.status.pop(pid, None)
        if status_fd is not None:
            try:
                os.write(status_fd, payload)
            except OSError:
                pass  # the host stopped listening; nothing to tell
            os.close(status_fd)
    children.pending[:] = [c for c in children.pending if not _remove_cgroup(c)]


def _stop_children(spare: _Spare | None, children: _Children) -> None:
    """Kill the spare and any worker still running, and reap them all, before exiting.

    PR_SET_PDEATHSIG would kill them once the zygote is gone, but then as
    orphans: each is reparented to the nearest subreaper above the host, or
    to init, and left there as a zombie until that process reaps it (never,
    in a container whose PID 1 is the application itself: one zombie per
    launcher closed). Reaping here also means that when the host's close
    has waited for the zygote, nothing it started is left, and the cgroups
    removed after this are empty. The wait cannot hang on a worker: every
    child was just sent SIGKILL, and what the zygote adopted as subreaper
    (a jail's pid 1 whose monitor died) dies with its pid namespace.
    """
    pids = set(children.status)
    if spare is not None:
        pids.add(spare.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # exited already; reaped below
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _remove_cgroup(cgroup: WorkerCgroup) -> bool:
    try:
        return cgroup.remove()
    except OSError:
        return True  # not ours to fix; forget it rather than retry for ever


def _serve(control: socket.socket) -> int:
    global _LATE_SPARE
    _LATE_SPARE = os.environ.get(LATE_SPARE_ENV, "")  # before _loop clears the environment
    global _DIES_AT_SPARE
    _DIES_AT_SPARE = int(os.environ.get(DIES_AT_SPARE_ENV) or 0)
    zygote_pid = os.getpid()
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    children = _Children(
        status={},
        cgroups={},
        pending=[],
        poller=select.poll(),
        handovers={},
        listeners={},
        denials={},
    )
    layers = probe_layers()
    counting = probe_counting(layers)
    global _PREBUILD, _CGROUPS
    _PREBUILD = not layers.get("namespaces", "missing")
    root: CgroupRoot | None = None
    if "cgroup" in disabled_layers():
        layers["cgroup"] = memory = f"disabled by {DISABLE_LAYERS_ENV} (test-only)"
    else:
        probe = open_cgroups(f"caplet-zygote-{zygote_pid}", stale_prefix="caplet-zygote-")
        root, layers["cgroup"], memory = probe.root, probe.problem, probe.memory_problem
    _CGROUPS = root is not None and root.pids is not None
    try:
        return _loop(
            control,
            wake_r=wake_r,
            layers=layers,
            counting=counting,
            memory_cgroup=memory,
            root=root,
            children=children,
            zygote_pid=zygote_pid,
        )
    finally:
        if root is not None:
            for cgroup in [*children.cgroups.values(), *children.pending]:
                cgroup.kill_members()
                _remove_cgroup(cgroup)
            root.close()


#: pids.max and the memory limit a spare's cgroups start with (the policy's
#: defaults: 64 processes, memory_mb 512 + tmp_size_mb 64); set to the
#: request's limits when claimed.
_SPARE_PIDS = 64
_SPARE_MEMORY = (512 + 64) * _MIB
#: How long after a claim the zygote forks the next spare without the host's
#: REFILL: the host sends it when the worker's first call was answered, which
#: may never come (a plugin enabled and not called yet); the next start should
#: still find a prepared spare. Long against a start and its first call
#: (~7 ms), short against the time a person or agent takes to use the plugin.
_REFILL_AFTER_S = 0.05
#: zygote -> spare, once the spare is in its cgroup (it may fork from then on).
_PLACED = b"placed"
#: Whether spares build the shared part of the jail ahead of their request:
#: set by :func:`_serve` when the namespaces layer is usable here.
_PREBUILD = False


@dataclass(slots=True)
class _Spare:
    """A child forked ahead of the next request (the warm pool, size one).

    It has already joined its own cgroups (on cgroup v1 the attach waits
    for an RCU grace period: 1-10 ms that would otherwise sit on every
    worker's start) and waits for its request on ``conn``. The request may
    arrive before the spare has run at all (a loaded machine); whatever
    then fails in the spare is explained in that request's log
    (:func:`_report_spare_failure`).
    """

    pid: int
    conn: socket.socket
    cgroup: WorkerCgroup | None
    handover: tuple[socket.socket, socket.socket] | None


def _fork_spare(
    control: socket.socket, root: CgroupRoot | None, zygote_pid: int, *, counting: bool
) -> _Spare | None:
    """Fork the next spare; None if that fails (requests then fork directly)."""
    try:
        cgroup = (
            root.create(
                f"spare-{os.urandom(6).hex()}", processes=_SPARE_PIDS, memory_bytes=_SPARE_MEMORY
            )
            if root is not None
            else None
        )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        handover = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if counting else None
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError as exc:
        _say(f"cannot fork a spare ({_explain(exc)}); workers are forked on request")
        for sock in (ours, theirs, *(handover or ())):
            sock.close()
        if cgroup is not None:
            _remove_cgroup(cgroup)
        return None
    if pid == 0:  # pragma: no cover - runs in the spare, observed through every worker start
        code = EXIT_SANDBOX_FAILED
        try:
            code = _spare_main(
                control,
                ours,
                theirs,
                zygote_pid,
                handover[1] if handover else None,
                memory_cgroup=cgroup is not None and cgroup.memory is not None,
            )
        except BaseException as exc:
            _report_spare_failure(theirs, exc)
        finally:
            os._exit(code)
    global _DIES_AT_SPARE
    _DIES_AT_SPARE -= 1
    if _DIES_AT_SPARE == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # test-only (DIES_AT_SPARE_ENV)
    theirs.close()
    if handover is not None:
        handover[1].close()
    try:
        if cgroup is not None:
            # The zygote attaches the spare itself, before anything else can
            # run in this loop (so no reap can find the cgroup empty and
            # remove it), and while no request waits: the attach's latency is
            # off every worker's critical path. The spare forks (pid 1 of its
            # namespaces) only once told it has been placed.
            cgroup.join(pid)
        ours.send(_PLACED)
    except OSError as exc:
        _say(f"cannot place a spare in its cgroups or tell it so ({_explain(exc)})")
        os.kill(pid, signal.SIGKILL)
        ours.close()
        if handover is not None:
            handover[0].close()
        if cgroup is not None:
            _remove_cgroup(cgroup)  # never joined: empty
        return None
    return _Spare(pid, ours, cgroup, handover)


def _spare_main(
    control: socket.socket,
    ours: socket.socket,
    conn: socket.socket,
    zygote_pid: int,
    handover: socket.socket | None,
    *,
    memory_cgroup: bool,
) -> int:
    """In the spare: get ready, wait for a request (or the zygote's end), become the worker.

    With the namespaces layer (:data:`_PREBUILD`) "ready" goes as far as it
    can without the request: the spare sets up its process, creates the
    namespaces (becoming the jail's monitor) and, in pid 1, builds the root
    every worker shares (the Python runtime, /dev, /tmp, /proc); the request
    then only adds its own grants and the layers that depend on it. That is
    most of a worker's start-up, done while nobody waits.

    A failure before the request is read raises; :func:`_report_spare_failure`
    then explains it in the log of the request, if one was already handed over.
    """
    # The zygote's wakeup pipe is about to be closed here (and its number
    # reused by the request's descriptors): no signal may write to it.
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Die with the zygote from here on, and see its end: the zygote dies with
    # its host (PR_SET_PDEATHSIG) at any moment, also between forking this
    # spare and placing it (a host that exits right after a start, whose
    # REFILL had the next spare forked). Armed only after _PLACED, and with
    # this process holding the zygote's end of ``conn`` (``ours``, inherited
    # by the fork), the wait below never ended: the spare outlived the host,
    # holding its stderr open (a caller reading it to EOF hung for ever).
    with _step("arming PR_SET_PDEATHSIG in the spare"):
        set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote_pid:
        return 0  # the zygote died before the signal was armed: nobody needs a spare
    control.close()
    ours.close()  # the zygote's end: the wait for _PLACED ends at its death too
    # The zygote says when this process is in its cgroups: nothing may fork
    # before that (a child would stay outside the cgroups' limits).
    with _step("waiting for the zygote to place the spare in its cgroup"):
        if conn.recv(len(_PLACED)) != _PLACED:
            return 0  # the zygote is stopping
    if _LATE_SPARE:
        # Test-only: the spare runs only once its request is waiting, as on a
        # loaded machine where the next request comes before the freshly
        # forked spare got any CPU.
        waiter = select.poll()
        waiter.register(conn, select.POLLIN)
        waiter.poll()
        # Fail only with a request queued, not when the zygote is stopping.
        if _LATE_SPARE == LATE_SPARE_FAILS and conn.recv(1, socket.MSG_PEEK):
            with _step(f"a test-only fault ({LATE_SPARE_ENV}={LATE_SPARE_FAILS})"):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
    # Nothing of the zygote's stays in a process that will run plugin code.
    with _step("closing the zygote's descriptors in the spare"):
        # Other workers' status pipes and seccomp listeners, the zygote's
        # end of the listener handover socket.
        keep = {0, 1, 2, conn.fileno()}
        if handover is not None:
            keep.add(handover.fileno())
        close_fds_except(keep)
    prepared = None
    if _PREBUILD:
        _own_process(zygote_pid, None)  # the cgroup was joined for us
        # From here on this process is the jail's monitor; pid 1 goes on.
        enter_namespaces(_IDENTITY)
        private_tmp = _private_tmp(())
        prepared = build_root(
            JailSpec(
                grants=_visible(_RUNTIME_GRANTS),
                workdir=f"{private_tmp}/work",
                identity=_IDENTITY,
                private_tmp=private_tmp,
            )
        )
        # Pay the copy-on-write faults of the start's code paths now, while
        # nobody waits (the scratch file lives in the jail's own tmpfs).
        _worker.warm_up(prepared.root + private_tmp)
    with _step("receiving the spawn request"):
        message, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 2)
        conn.close()
    if not message or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return 0  # released unused (the zygote is stopping)
    channel_fd, log_fd = fds
    with _step("redirecting stderr to the worker's log"):
        os.dup2(log_fd, 2)
    request = _spawn_request(msgpack.unpackb(message, raw=False))
    handover_fd = None
    if handover is not None:
        if request.count_denials and "seccomp" in request.layers:
            handover_fd = handover.detach()
        else:
            handover.close()
    return _child(
        request,
        channel_fd,
        log_fd,
        zygote_pid,
        None,
        handover_fd=handover_fd,
        prepared=prepared,
        memory_cgroup=memory_cgroup,
    )


def _report_spare_failure(conn: socket.socket, exc: BaseException) -> None:
    """Explain a spare's failure where the host will read it; never raises.

    Once the spare has read its request, stderr is that worker's log. Before
    that, the request may already be waiting in ``conn`` (the zygote hands
    a request to a spare that has not run yet): shutting the socket down
    for reading makes any later send fail with EPIPE (unix(7), shutdown(2);
    the zygote then forks the worker directly), and a request that is
    already queued is taken so the reason lands in its log, not in the
    zygote's stderr, and the host's error names what failed.
    """
    fd = 2
    received: list[int] = []
    try:
        if conn.fileno() != -1:
            conn.shutdown(socket.SHUT_RD)
            _, received, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 2, socket.MSG_DONTWAIT)
    except BaseException:  # noqa: S110 - no request was waiting: stderr it is
        pass
    if len(received) == 2:
        fd = received[1]
    _report_failure(exc, fd)


def _claim_spare(spare: _Spare, message: bytes, fds: list[int], request: SpawnRequest) -> bool:
    """Hand a request to the spare; False if the spare is gone (fork directly instead)."""
    processes, memory = request.limits.processes, _memory_bytes(request)
    # The spare's cgroups start at the policy's defaults: most requests need
    # no write here, on the path every start waits for. The limit is set
    # before the spare hears of its request, so it never runs plugin code
    # under the default (a spare that cannot be lowered to it: EBUSY, the
    # request forks directly instead).
    cgroup = spare.cgroup
    if cgroup is not None and (processes != _SPARE_PIDS or memory != _SPARE_MEMORY):
        try:
            cgroup.limit(processes=processes, memory_bytes=memory)
        except OSError:
            return False
    try:
        socket.send_fds(spare.conn, [message], fds)
    except OSError:
        return False
    spare.conn.close()
    return True


def _loop(
    control: socket.socket,
    *,
    wake_r: int,
    layers: dict[str, str],
    counting: str,
    memory_cgroup: str,
    root: CgroupRoot | None,
    children: _Children,
    zygote_pid: int,
) -> int:
    control.send(
        msgpack.packb(
            {
                "layers": layers,
                "seccomp_counting": counting,
                "memory_cgroup": memory_cgroup,
                "relocation": relocation_problem(),
            }
        )
    )
    # Probing was the last use of the environment (the test-only switch):
    # workers are forked from here and must inherit nothing.
    os.environ.clear()
    poller = children.poller
    poller.register(control, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    spare = _new_spare(control, root, zygote_pid, children, counting=not counting)
    refill_at: float | None = None  # a claimed spare's successor is owed from then on
    while True:
        wait_ms = None if refill_at is None else max(0, _ms_until(refill_at))
        ready = {fd for fd, _ in poller.poll(wait_ms)}
        if refill_at is not None and time.monotonic() >= refill_at:
            # No REFILL in that time (a worker not called yet, or a REFILL
            # lost): the next start must not find the pool empty.
            refill_at = None
            if spare is None:
                spare = _new_spare(control, root, zygote_pid, children, counting=not counting)
        # Listeners first: a denial made just before a worker exited is then
        # counted before _reap writes that worker's report.
        for fd in ready:
            if fd in children.handovers:
                children.receive_listener(fd)
            elif fd in children.listeners:
                children.serve_listener(fd)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            _reap(children)
        if control.fileno() not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 3)
        if not message:
            _stop_children(spare, children)  # the host closed the channel
            return 0
        if message == REFILL:
            for fd in fds:
                os.close(fd)
            refill_at = None
            if spare is None:
                spare = _new_spare(control, root, zygote_pid, children, counting=not counting)
            continue
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
        count = request.count_denials and "seccomp" in request.layers and not counting
        if spare is not None and _claim_spare(spare, message, fds[:2], request):
            pid = spare.pid
            for fd in (channel_fd, log_fd):
                os.close(fd)
            if spare.handover is not None:
                ours_spare, _ = spare.handover
                if count:
                    children.expect_listener(pid, ours_spare)
                else:
                    ours_spare.close()
            children.status[pid] = status_fd
            if spare.cgroup is not None:
                if spare.cgroup in children.pending:
                    children.pending.remove(spare.cgroup)
                children.cgroups[pid] = spare.cgroup
            _reply(control, pid)
            # The next one when the host says this start is over (REFILL), or
            # after _REFILL_AFTER_S without a word.
            spare = None
            refill_at = time.monotonic() + _REFILL_AFTER_S
            continue
        if spare is not None:  # it died: forget it (its cgroup is already pending removal)
            spare.conn.close()
            if spare.handover is not None:
                spare.handover[0].close()
            spare = None
        try:
            pid, cgroup, ours = _fork_worker(
                control,
                request,
                channel_fd,
                log_fd,
                zygote_pid=zygote_pid,
                root=root,
                name=f"worker-{len(children.status)}-{os.urandom(4).hex()}",
                count=count,
            )
        except SandboxError as exc:
            os.close(status_fd)
            control.send(msgpack.packb({"error": str(exc)}))
            continue
        finally:
            os.close(channel_fd)
            os.close(log_fd)
        if ours is not None:
            children.expect_listener(pid, ours)
        children.status[pid] = status_fd
        if cgroup is not None:
            children.cgroups[pid] = cgroup
        _reply(control, pid)
        if spare is None:
            # Not left to a REFILL: one that never comes (a host that lost it)
            # must not leave every later start without a spare.
            spare = _new_spare(control, root, zygote_pid, children, counting=not counting)


def _ms_until(deadline: float) -> int:
    return math.ceil((deadline - time.monotonic()) * 1000)


def _fork_worker(
    control: socket.socket,
    request: SpawnRequest,
    channel_fd: int,
    log_fd: int,
    *,
    zygote_pid: int,
    root: CgroupRoot | None,
    name: str,
    count: bool,
) -> tuple[int, WorkerCgroup | None, socket.socket | None]:
    """Fork a worker directly (no spare at hand): (pid, its cgroup, the zygote's
    end of the listener handover socket). SandboxError names a failed step;
    the caller closes ``channel_fd`` and ``log_fd`` either way."""
    cgroup: WorkerCgroup | None = None
    ours: socket.socket | None = None
    theirs: socket.socket | None = None
    try:
        if root is not None:
            with _step("creating the worker's cgroups"):
                cgroup = root.create(
                    name, processes=request.limits.processes, memory_bytes=_memory_bytes(request)
                )
        if count:
            with _step("creating the seccomp listener's handover socket"):
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # fork(2) EAGAIN means a process limit was hit: refused, not retried.
        with _step("fork(2) of the worker"):
            pid = os.fork()
    except BaseException:
        for sock in (ours, theirs):
            if sock is not None:
                sock.close()
        if cgroup is not None:
            _remove_cgroup(cgroup)  # nothing joined it yet
        raise
    if pid == 0:  # pragma: no cover - runs in the child, observed by the sandbox tests
        code = EXIT_SANDBOX_FAILED
        try:
            control.close()
            handover = None
            if ours is not None and theirs is not None:
                ours.close()
                handover = theirs.detach()
            code = _child(
                request,
                channel_fd,
                log_fd,
                zygote_pid,
                cgroup,
                handover_fd=handover,
                memory_cgroup=cgroup is not None and cgroup.memory is not None,
            )
        except BaseException as exc:  # report, never return into the zygote loop
            _report_failure(exc)
        finally:
            os._exit(code)
    if theirs is not None:
        theirs.close()
    return pid, cgroup, ours


def _new_spare(
    control: socket.socket,
    root: CgroupRoot | None,
    zygote_pid: int,
    children: _Children,
    *,
    counting: bool,
) -> _Spare | None:
    """Fork the next spare; until claimed, its cgroup waits in ``pending`` (removed
    once empty, so a spare that dies, or outlives the zygote, leaves nothing)."""
    spare = _fork_spare(control, root, zygote_pid, counting=counting)
    if spare is not None and spare.cgroup is not None:
        children.pending.append(spare.cgroup)
    return spare


def _reply(control: socket.socket, pid: int) -> None:
    """Tell the host the worker's pid, with a pidfd it can wait on and kill through."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as exc:  # EMFILE/ENOMEM: the host cannot hold this worker, so it goes
        os.kill(pid, signal.SIGKILL)
        control.send(msgpack.packb({"error": f"pidfd_open(2) of the worker: {_explain(exc)}"}))
        return
    try:
        socket.send_fds(control, [msgpack.packb({"pid": pid})], [pidfd])
    finally:
        os.close(pidfd)


def main(argv: list[str] | None = None) -> int:
    """Run the zygote on the control socket whose fd number is ``argv[0]``.

    ``argv[1]`` and ``argv[2]``, when given, are the uid and gid of every
    worker, and ``argv[3]`` is ``privileged`` when the zygote must switch to
    them (a root host's workers never run as root, see
    :mod:`caplet._sandbox._identity`).
    """
    args = sys.argv[1:] if argv is None else argv
    fd = int(args[0])
    global _IDENTITY
    if len(args) >= 3:
        privileged = len(args) >= 4 and args[3] == "privileged"
        _IDENTITY = WorkerIdentity(int(args[1]), int(args[2]), privileged, "set by the host")
    set_parent_death_signal(signal.SIGKILL)
    zygote_started()  # reads what the relocating stage left in the environment
    # A killed jail monitor orphans the jail's pid 1 for a moment; as a
    # subreaper the zygote inherits and reaps it (its _reap loop takes any
    # child), instead of leaving a zombie for an init that may never reap.
    set_child_subreaper()
    close_fds_except({0, 1, 2, fd})
    for std in (0, 1, 2):
        # A host started without stderr (a daemon) would otherwise let a
        # received descriptor take number 2, which _child points at the log.
        try:
            os.fstat(std)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != std:
                os.dup2(null, std)
                os.close(null)
    sys.dont_write_bytecode = True
    # Warm what every worker needs (libc through ctypes, cap_last_cap, the
    # runtime grants) once, here: forked workers inherit it for free.
    prepare_jail()
    prepare_filters()
    global _RUNTIME_GRANTS
    _RUNTIME_GRANTS = runtime_grants()
    # Everything the zygote built so far is shared with every worker it
    # forks; moving it out of the collector's reach (gc.freeze) stops a
    # worker's first collection from writing to, and so copying, those pages.
    gc.collect()
    gc.freeze()
    with socket.socket(fileno=fd) as control:
        return _serve(control)
