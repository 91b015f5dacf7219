"""The zygote: a warm fork server that turns spawn requests into sandboxed workers.

It runs in its own process (started once per :class:`SandboxLauncher`) with
the interpreter, msgpack and every sandbox layer already imported, so a new
worker costs a ``fork`` plus the layers, not an interpreter start-up.

Protocol (a ``SOCK_SEQPACKET`` pair, so each message is one datagram):

* zygote -> host, once at start: ``{"layers": {...}, "seccomp_counting": "",
  "memory_cgroup": "", "cpu_rate": ""}``, what this machine offers (see
  :func:`probe_layers`; ``seccomp_counting`` is "" when denials can be
  counted, ``memory_cgroup`` "" when workers get a memory cgroup,
  ``cpu_rate`` "" when their CPU rate is capped, else why not);
* host -> zygote: a msgpack map (the spawn request, :func:`._zygote_request._spawn_request`)
  with three descriptors attached (``SCM_RIGHTS``): the worker's end of its
  channel, the worker's stderr log file, and the write end of a status pipe;
* zygote -> host: ``{"pid": N}`` with a pidfd of the new child attached, or
  ``{"error": "..."}``.

The zygote reaps its children and writes each one's status (4 bytes, the
:attr:`subprocess.Popen.returncode` convention) to that child's status
pipe, which is how the host learns how a worker ended even though it is not
the worker's parent, followed by a msgpack map ``{"denials": {syscall name:
count}, "oom_kills": N, "cpu_killed": bool}``: the seccomp denials it counted for
that worker (empty when none, or when counting is off), how many of its
processes the OOM killer took at its memory cgroup's limit and whether the
zygote killed it for using more than its ``cpu_s`` in all
(``_zygote_children.enforce_cpu``), in one write of at most
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
:class:`._zygote_spare._Spare`). It places the spare in its cgroups, then tells it so
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

The zygote's parts are modules of their own: the request and the status
report (:mod:`._zygote_request`), a forked child's set-up
(:mod:`._zygote_child`), the live children (:mod:`._zygote_children`), the
spare (:mod:`._zygote_spare`) and how failures are reported
(:mod:`._zygote_failures`); this module probes the layers, runs the loop,
forks workers directly when no spare is at hand, and is :func:`main`.

This module runs in the zygote and in workers: stdlib, msgpack and caplet's
base and sandbox modules only.
"""

from __future__ import annotations

import gc
import math
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Mapping

import msgpack

from caplet._errors import SandboxError
from caplet._sandbox import _zygote_child, _zygote_spare
from caplet._sandbox._cgroup import ZYGOTE_PREFIX, CgroupRoot, WorkerCgroup, open_cgroups
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail import (
    DISABLE_LAYERS_ENV,
    disabled_layers,
    prepare_jail,
    probe_namespaces,
    runtime_grants,
)
from caplet._sandbox._landlock import landlock_abi
from caplet._sandbox._relocate import relocation_problem, zygote_started
from caplet._sandbox._seccomp import (
    prepare_filters,
    seccomp_notify_problem,
    seccomp_problem,
)
from caplet._sandbox._zygote_child import _child, _memory_bytes
from caplet._sandbox._zygote_children import _Children, _reap, _remove_cgroup
from caplet._sandbox._zygote_failures import _explain, _report_failure, _step
from caplet._sandbox._zygote_log import new_relay
from caplet._sandbox._zygote_request import (
    _MAX_REQUEST,
    EXIT_SANDBOX_FAILED,
    REFILL,
    SpawnRequest,
    _spawn_request,
)
from caplet._sandbox._zygote_spare import (
    _REFILL_AFTER_S,
    DIES_AT_SPARE_ENV,
    LATE_SPARE_ENV,
    _claim_spare,
    _new_spare,
    _Spare,
)
from caplet._syscall import close_fds_except, set_child_subreaper, set_parent_death_signal

__all__ = [
    "LAYERS",
    "OPTIONAL_LAYERS",
    "SECCOMP_COUNTING",
    "main",
    "probe_counting",
    "probe_layers",
]

#: The isolation layers, in the order they are applied in a new worker.
LAYERS = ("namespaces", "rlimits", "landlock", "seccomp")
#: Layers used where the machine allows them, not required by strict isolation.
OPTIONAL_LAYERS = ("cgroup",)
#: Test-only name in CAPLET_TEST_DISABLE_LAYERS that turns denial counting off.
SECCOMP_COUNTING = "seccomp_counting"


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
            report[layer] = probe_namespaces(_zygote_child._IDENTITY) or ""
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


def _serve(control: socket.socket) -> int:
    _zygote_spare._LATE_SPARE = os.environ.get(
        LATE_SPARE_ENV, ""
    )  # before _loop clears the environment
    _zygote_spare._DIES_AT_SPARE = int(os.environ.get(DIES_AT_SPARE_ENV) or 0)
    zygote_pid = os.getpid()
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    children = _Children()
    layers = probe_layers()
    counting = probe_counting(layers)
    _zygote_spare._PREBUILD = not layers.get("namespaces", "missing")
    root: CgroupRoot | None = None
    if "cgroup" in disabled_layers():
        layers["cgroup"] = memory = rate = f"disabled by {DISABLE_LAYERS_ENV} (test-only)"
    else:
        probe = open_cgroups(f"{ZYGOTE_PREFIX}{zygote_pid}", stale_prefix=ZYGOTE_PREFIX)
        root, layers["cgroup"], memory = probe.root, probe.problem, probe.memory_problem
        rate = probe.rate_problem
    _zygote_child._CGROUPS = root is not None and root.pids is not None
    try:
        return _loop(
            control,
            wake_r=wake_r,
            layers=layers,
            counting=counting,
            memory_cgroup=memory,
            cpu_rate=rate,
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


def _loop(
    control: socket.socket,
    *,
    wake_r: int,
    layers: dict[str, str],
    counting: str,
    memory_cgroup: str,
    cpu_rate: str,
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
                "cpu_rate": cpu_rate,
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
        ready = {fd for fd, _ in poller.poll(children.wait_ms(wait_ms))}
        children.enforce_cpu()
        children.resume_paused()
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
            elif fd in children.logs:
                children.serve_log(fd)
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
        # The worker writes its stderr into a pipe this process copies into
        # the host's log, never into the log itself (_zygote_log).
        try:
            with _step("creating the pipe of the worker's stderr"):
                relay, log_fd = new_relay(log_fd)
        except SandboxError as exc:
            for fd in fds:
                os.close(fd)
            control.send(msgpack.packb({"error": str(exc)}))
            continue
        if spare is not None and _claim_spare(spare, message, [channel_fd, log_fd], request):
            pid = spare.pid
            for fd in (channel_fd, log_fd):
                os.close(fd)
            children.relay_log(pid, relay)
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
                children.adopt(pid, spare.cgroup, request.limits.cpu_s)
            _reply(control, pid)
            # The next one when the host says this start is over (REFILL), or
            # after _REFILL_AFTER_S without a word. Not by the clock while the
            # test-only DIES_AT_SPARE_ENV counts down: its death is the one
            # after a REFILL, and a loaded machine's worker may not be READY
            # within _REFILL_AFTER_S (it then died with the zygote mid-start,
            # failing tests/_sandbox/test_zygote_spare.py's start under load).
            spare = None
            if not _zygote_spare._DIES_AT_SPARE:
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
            relay.close()
            control.send(msgpack.packb({"error": str(exc)}))
            continue
        finally:
            os.close(channel_fd)
            os.close(log_fd)
        children.relay_log(pid, relay)
        if ours is not None:
            children.expect_listener(pid, ours)
        children.status[pid] = status_fd
        if cgroup is not None:
            children.adopt(pid, cgroup, request.limits.cpu_s)
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
                    name,
                    processes=request.limits.processes,
                    memory_bytes=_memory_bytes(request),
                    cpu_millicores=request.limits.cpu_millicores,
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
    worker, ``argv[3]`` is ``privileged`` when the zygote must switch to
    them (a root host's workers never run as root), and ``argv[4]`` is
    ``own-real-uids`` when each worker takes a real uid of its own (see
    :mod:`caplet._sandbox._identity`).
    """
    args = sys.argv[1:] if argv is None else argv
    fd = int(args[0])
    if len(args) >= 3:
        privileged = len(args) >= 4 and args[3] == "privileged"
        own_real_uids = len(args) >= 5 and args[4] == "own-real-uids"
        _zygote_child._IDENTITY = WorkerIdentity(
            int(args[1]), int(args[2]), privileged, "set by the host", own_real_uids
        )
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
    _zygote_child._RUNTIME_GRANTS = runtime_grants()
    # Everything the zygote built so far is shared with every worker it
    # forks; moving it out of the collector's reach (gc.freeze) stops a
    # worker's first collection from writing to, and so copying, those pages.
    gc.collect()
    gc.freeze()
    with socket.socket(fileno=fd) as control:
        return _serve(control)
