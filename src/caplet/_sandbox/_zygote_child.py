"""In a forked child of the zygote: from one spawn request to a sandboxed worker.

``_child`` takes the worker's descriptors, applies each requested layer in
order (namespaces and the jail, rlimits, Landlock, the worker's ids,
seccomp with its listener handed to the zygote) and then runs the worker.
What the zygote learned once for every child (who workers run as, the
runtime's grants, whether pids cgroups exist) is kept here, set by
:func:`caplet._sandbox._zygote.main` and ``_serve`` before any fork.
Apart from the zygote's loop and its spares, which fork and feed it but
run no layer themselves.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import signal
import socket

from caplet._errors import SandboxError
from caplet._sandbox import _worker
from caplet._sandbox._cgroup import WorkerCgroup
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail import (
    PRIVATE_TMP_ASIDE,
    JailSpec,
    PreparedRoot,
    enter_jail,
    finish_jail,
    unsearchable_roots,
)
from caplet._sandbox._landlock import apply_landlock
from caplet._sandbox._relocate import RUNTIME_ROOT
from caplet._sandbox._rlimits import ResourceLimits, apply_rlimits
from caplet._sandbox._seccomp import (
    apply_seccomp,
)
from caplet._sandbox._zygote_failures import _step
from caplet._sandbox._zygote_request import SpawnRequest
from caplet._syscall import close_fds_except, set_parent_death_signal

__all__ = ["SNAPSHOT_FD"]

#: Computed once in the zygote (dozens of stat calls); every fork inherits it.
_RUNTIME_GRANTS: tuple[PathGrant, ...] = ()
#: Inside the jail /tmp is the worker's own tmpfs, not the host's.
_JAIL_TMP = "/tmp"  # noqa: S108
#: Where the child keeps its end of the listener handover socket (the channel is fd 3).
_HANDOVER_FD = 4
#: Without a jail, a root host's worker reads its snapshot through this
#: descriptor (``/proc/self/fd/5``): its uid cannot walk the run directory.
SNAPSHOT_FD = 5
#: Who every worker of this zygote runs as (set by :func:`main`; None: the
#: zygote's own ids, as before the host told it otherwise).
_IDENTITY: WorkerIdentity | None = None


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
    if "namespaces" not in request.layers:
        # A glob's folder is the jail's own directory of its matches: without a jail
        # it would be the host's folder, names the glob does not match (glob32).
        grants = tuple(grant for grant in grants if not grant.listing)
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
            exec_paths=_exec_paths(request.grants),
            allow_exec=request.allow_exec,
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
            grants = tuple(
                PathGrant(g.inside, g.writable, g.executable, listing=g.listing) for g in grants
            )
        apply_landlock((*grants, writable_tmp, *devices))
    snapshot_fd = None
    if "namespaces" not in request.layers:
        # Without a jail the switch to the worker's ids happens here: after
        # Landlock opened the paths it rules (the host's run directory is
        # root's alone), before seccomp refuses set*id(2).
        snapshot_fd = _become_worker(request, zygote_pid)
    if "seccomp" in request.layers:
        # Nothing but a memory cgroup bounds what splice/sendfile and sized
        # buffers put in a socket (RLIMIT_AS never sees those pages: red-team
        # finding 9, _cgroup's docstring). No worker gets a memfd at all
        # (memfd29), whichever filter it gets.
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

    Without a jail on a root host a worker that may exec programs shares one
    real uid with every other such worker in the host's user namespace, so
    RLIMIT_NPROC would count all their processes together: one plugin's fork
    bomb would stop every other plugin's workers from starting. There the
    cgroup alone bounds each worker, when it exists; without it the shared
    rlimit is all there is (docs/security.md). A worker with a real uid of
    its own (:mod:`caplet._sandbox._identity`) is counted alone.
    """
    limits = request.limits
    if limits.processes is None or not _CGROUPS:
        return limits
    shared = (
        "namespaces" not in request.layers
        and _IDENTITY is not None
        and _IDENTITY.privileged
        and _IDENTITY.real_uid(os.getpid(), may_exec=request.allow_exec) == _IDENTITY.uid
    )
    processes = None if shared else limits.processes + _NPROC_MARGIN
    return dataclasses.replace(limits, processes=processes)


def _become_worker(request: SpawnRequest, zygote_pid: int) -> int | None:
    """Outside a jail on a root host: drop root's groups and take the worker's ids.

    The working directory (made by the host, owned by root) is given to the
    worker first, the snapshot is opened at :data:`SNAPSHOT_FD` (the host's
    run directory is root's alone: the worker reads it through
    ``/proc/self/fd``, which walks no directory above it), and every
    capability goes with the switch to a non-zero uid (capabilities(7));
    no_new_privs (set by Landlock or seccomp) keeps them gone.
    The real uid is the worker's own unless it may exec programs
    (:mod:`caplet._sandbox._identity`).
    Returns :data:`SNAPSHOT_FD` when it opened the snapshot there, else None.
    """
    workdir, snapshot = request.workdir, request.snapshot
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
        real_uid = identity.real_uid(os.getpid(), may_exec=request.allow_exec)
        os.setresuid(real_uid, identity.uid, identity.uid)
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
    covering = [
        g.path
        for g in grants
        if not g.writable and not g.executable and not g.target and not g.listing
    ]
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


def _exec_paths(grants: tuple[PathGrant, ...]) -> tuple[str, ...]:
    """What must stay mappable as code in the jail: every path of the runtime (those a
    broad read grant shows instead of their own mount too) and the approved programs."""
    return tuple(
        g.path
        for g in (*_RUNTIME_GRANTS, *grants)
        # Never the snapshot (mounted noexec), nor a glob's folder (only its matches).
        if g.executable or not (g.pinned or g.copy or g.listing)
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
