"""The zygote's spare: one child forked ahead of the next request (the warm pool, size one).

A spare is placed in its own cgroups by the zygote before it may fork,
then (with the namespaces layer) builds as much of the jail as it can
without its request, and waits; ``_claim_spare`` sets its limits to the
request's and hands the request over. The test-only switches that force a
late or failing spare, or a zygote dying between fork and placement, are
read here. Apart from the zygote's loop, which decides when a spare is
forked and claimed, and from the child's set-up, which a claimed spare
finishes like any forked worker.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
from dataclasses import dataclass

import msgpack

from caplet._sandbox import _worker, _zygote_child
from caplet._sandbox._cgroup import CgroupRoot, WorkerCgroup
from caplet._sandbox._jail import (
    JailSpec,
    build_root,
    enter_namespaces,
)
from caplet._sandbox._zygote_child import (
    _MIB,
    _child,
    _memory_bytes,
    _own_process,
    _private_tmp,
    _visible,
)
from caplet._sandbox._zygote_children import _Children, _remove_cgroup
from caplet._sandbox._zygote_failures import _explain, _report_failure, _say, _step
from caplet._sandbox._zygote_request import (
    _MAX_REQUEST,
    EXIT_SANDBOX_FAILED,
    SpawnRequest,
    _spawn_request,
)
from caplet._syscall import close_fds_except, set_parent_death_signal

__all__ = ["DIES_AT_SPARE_ENV", "LATE_SPARE_ENV", "LATE_SPARE_FAILS"]

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


#: pids.max, the memory limit and the CPU rate a spare's cgroups start with
#: (the policy's defaults: 64 processes, memory_mb 512 + tmp_size_mb 64,
#: cpu_cores 1); set to the request's limits when claimed.
_SPARE_PIDS = 64
_SPARE_MEMORY = (512 + 64) * _MIB
_SPARE_CPU = 1000
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
                f"spare-{os.urandom(6).hex()}",
                processes=_SPARE_PIDS,
                memory_bytes=_SPARE_MEMORY,
                cpu_millicores=_SPARE_CPU,
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
        enter_namespaces(_zygote_child._IDENTITY)
        private_tmp = _private_tmp(())
        prepared = build_root(
            JailSpec(
                grants=_visible(_zygote_child._RUNTIME_GRANTS),
                workdir=f"{private_tmp}/work",
                identity=_zygote_child._IDENTITY,
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
    rate = request.limits.cpu_millicores
    # The spare's cgroups start at the policy's defaults: most requests need
    # no write here, on the path every start waits for. The limit is set
    # before the spare hears of its request, so it never runs plugin code
    # under the default (a spare that cannot be lowered to it: EBUSY, the
    # request forks directly instead).
    cgroup = spare.cgroup
    defaults = (_SPARE_PIDS, _SPARE_MEMORY, _SPARE_CPU)
    if cgroup is not None and (processes, memory, rate) != defaults:
        try:
            cgroup.limit(processes=processes, memory_bytes=memory, cpu_millicores=rate)
        except OSError:
            return False
    try:
        socket.send_fds(spare.conn, [message], fds)
    except OSError:
        return False
    spare.conn.close()
    return True


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
