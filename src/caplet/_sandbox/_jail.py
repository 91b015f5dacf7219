"""The namespace jail: new namespaces and a minimal root around one worker.

:func:`enter_jail` is called in a freshly forked, single-threaded child (the
zygote forks it) and returns *inside* the jail, with no capability left,
before a single byte of plugin code is imported. Everything is unshare(2),
mount(2) and pivot_root(2) through :mod:`caplet._syscall`: no helper program
is executed, so entering costs a few milliseconds instead of bubblewrap's
20-40 ms.

Shape of the processes::

    zygote --fork--> monitor      (host pid P: the pid the launcher knows and kills)
                       `--fork--> worker (pid 1 of the new pid namespace)

The monitor stays outside the new pid namespace (unshare(CLONE_NEWPID) only
applies to children, pid_namespaces(7)), holds nothing, waits, and exits with
the worker's status (128 + signal for a signal). The worker has
PR_SET_PDEATHSIG = SIGKILL, so killing the monitor kills the worker, and as
the worker is pid 1 of its namespace the kernel then kills every process in
it (pid_namespaces(7)). Stop a jail with SIGKILL (to the monitor, or to the
worker): pid 1 of a pid namespace receives other signals, even from the host,
only when it has a handler for them, so SIGTERM is silently ignored.

What the worker sees: a read-only tmpfs root holding exactly the granted
paths at their host paths (read-only unless the grant is writable; always
nosuid, nodev), the runtime at the neutral paths the zygote was started
from (``/caplet/...`` overlays, see :mod:`caplet._sandbox._relocate`),
``/dev`` with null, zero, urandom and random, a private size-limited tmpfs
``/tmp`` with the working directory in it, and a fresh ``/proc`` showing
only its own pid namespace (``/proc/sys``, ``/proc/sysrq-trigger``,
``/proc/irq`` and ``/proc/bus`` read-only: the worker keeps its host uid,
and for a uid-0 host that uid owns those files).
Directories created only to reach a grant at its host path (``/usr`` for
``/usr/lib``, the ancestors of a snapshot) are search-only (mode 0111): the
worker can pass through them but not list them.
The network namespace has only a loopback interface, which stays down.

``CAPLET_TEST_DISABLE_LAYERS`` (test-only): when its comma- or
space-separated list contains ``namespaces``, :func:`probe_namespaces`
reports the layer as unavailable, so ``caplet doctor`` and strict-policy
tests can exercise the degraded path on a machine that has the layer.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from pathlib import Path

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail_fs import (
    finish_inside,
    mask,
    mount_proc,
    mount_tmp,
    pivot,
    remount_flags,
    reopen_exec,
    seal_submounts,
)
from caplet._sandbox._jail_model import (
    DISABLE_LAYERS_ENV,
    LIBRARY_DIRS,
    PRIVATE_TMP_ASIDE,
    ROOT_MOUNTPOINT,
    JailSpec,
    Kind,
    Mount,
    PreparedRoot,
    Step,
    fail,
    outermost,
    package_parent,
    path_contains,
    path_inside,
    validate,
)
from caplet._sandbox._jail_ns import (
    arm_parent_death,
    become,
    create_namespaces,
    drop_privileges,
    highest_capability,
    monitor,
    share_real_uid,
)
from caplet._sandbox._jail_plan import (
    apply,
    open_devices,
    open_plan,
    plain,
    unsearchable_roots,
)
from caplet._sandbox._relocate import RUNTIME_ROOT
from caplet._syscall import (
    MNT_DETACH,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_SLAVE,
    effective_capabilities,
    mount,
    umount2,
)

__all__ = [
    "DISABLE_LAYERS_ENV",
    "PRIVATE_TMP_ASIDE",
    "JailSpec",
    "PreparedRoot",
    "build_root",
    "disabled_layers",
    "enter_jail",
    "enter_namespaces",
    "finish_jail",
    "prepare_jail",
    "probe_namespaces",
    "runtime_grants",
    "unsearchable_roots",
]


# -- public API -----------------------------------------------------------------------


def runtime_grants() -> tuple[PathGrant, ...]:
    """The read-only paths the worker's Python needs, outermost first.

    The interpreter's prefixes (base, venv, exec), the directories holding the
    ``caplet`` and ``msgpack`` packages, ``sys.executable`` and the shared
    library directories. Each is resolved with ``os.path.realpath``; when a
    path is reached through a symbolic link the link path is kept as well, so
    both spellings exist inside. Paths nested in another grant are dropped.
    """
    candidates = [
        # A relocated zygote's runtime directories (each its own overlay, _relocate).
        *(entry for entry in sys.path if path_contains(RUNTIME_ROOT, entry)),
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        package_parent("caplet"),
        package_parent("msgpack"),
        sys.executable,
        *LIBRARY_DIRS,
    ]
    paths: set[str] = set()
    for candidate in candidates:
        if not candidate:
            continue
        absolute = os.path.abspath(candidate)  # noqa: PTH100 - no symlink resolution wanted here
        real = os.path.realpath(absolute)
        if not Path(real).exists():
            continue
        paths.add(real)
        paths.add(absolute)
    return tuple(PathGrant(path) for path in outermost(paths))


def prepare_jail() -> None:
    """Do once, in the zygote before it forks, what every jail would redo.

    Loads libc through ctypes (``ctypes.util.find_library`` may even run
    ldconfig) and reads the highest capability number, so each forked
    worker's :func:`enter_jail` pays for neither. Optional: enter_jail works
    without it, only slower.
    """
    effective_capabilities()  # loads and caches libc in caplet._syscall
    highest_capability()


def enter_jail(spec: JailSpec) -> None:
    """Move the calling process into a new jail and return inside it.

    Must be called in a single-threaded process (unshare(2) refuses
    CLONE_NEWUSER otherwise). The calling process becomes the monitor and
    never returns; the function returns in its child, pid 1 of the new pid
    namespace, with the root, /dev, /tmp, /proc, hostname and working
    directory set up and every capability dropped (bounding set included),
    no_new_privs set and the process not dumpable.

    The same three steps a spare takes apart (:func:`enter_namespaces`,
    :func:`build_root`, :func:`finish_jail`), in one go.

    Raises :class:`SandboxError` naming the failed step, the errno and the
    likely fix; an error after the fork is raised in the jailed child, which
    must then exit without running plugin code.
    """
    validate(spec)
    highest_capability()
    enter_namespaces(spec.identity)
    finish_jail(build_root(spec), spec)


def enter_namespaces(identity: WorkerIdentity | None = None) -> None:
    """Create the namespaces and fork pid 1 of the new pid namespace; return in pid 1.

    The calling process (single-threaded) becomes the monitor and never
    returns. Nothing here depends on what the worker will be granted, so a
    spare takes this step before its request exists (see
    :mod:`caplet._sandbox._zygote`). ``identity`` is who the worker will
    become (see :func:`create_namespaces`); the monitor becomes it too.
    """
    # Closed by the kernel when the monitor dies: lets the child detect a
    # monitor that died before PR_SET_PDEATHSIG was armed (see arm_parent_death).
    alive_read, alive_write = os.pipe()
    # This process is the monitor for the jail's whole life: its pid is
    # unique among the machine's live workers (_identity, attack10).
    real_uid = None if identity is None else identity.real_uid(os.getpid())
    try:
        create_namespaces(identity, real_uid)
        try:
            child = os.fork()
        except OSError as exc:
            raise fail(Step.FORK, exc) from exc
    except BaseException:
        os.close(alive_read)
        os.close(alive_write)
        raise
    if child:
        monitor(child, alive_write, identity, real_uid)
    os.close(alive_write)
    try:
        # Before arming the parent-death signal: a change of the effective
        # uid clears it (prctl(2), PR_SET_PDEATHSIG).
        become(identity, real_uid, keep_capabilities=True)
    except OSError as exc:
        os.close(alive_read)
        raise fail(Step.CAPABILITIES, exc) from exc
    arm_parent_death(alive_read)


def build_root(spec: JailSpec) -> PreparedRoot:
    """Build the jail's root for ``spec`` in pid 1 of the new namespaces, without entering it.

    A spare builds the root every worker shares (the Python runtime, /dev,
    /tmp, /proc) before its request arrives; :func:`finish_jail` then adds
    the request's own grants and enters. That keeps the namespaces, the
    fork of pid 1 and some sixty mount(2) calls off the worker's start-up.
    """
    validate(spec)
    try:
        # mount_namespaces(7): the copied mounts keep the host's propagation;
        # shared, our mounts could propagate back to the host, and
        # pivot_root(2) refuses shared mounts. Slave rather than private: the
        # host's unmounts still reach this copy of its tree, so a prepared
        # spare waiting for its request does not keep a file system the host
        # unmounted alive ("device busy" for a LUKS or loop device). What the
        # jail mounts is made private as it is mounted (see bind_grant).
        mount(None, "/", None, MS_REC | MS_SLAVE)
    except OSError as exc:
        raise fail(Step.PROPAGATION, exc) from exc
    root = os.path.realpath(ROOT_MOUNTPOINT)
    plan = open_plan(spec)
    devices: dict[str, int] = {}
    host_root = covered = -1
    try:
        devices = open_devices()
        try:
            host_root = _high_fd(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
            covered = _high_fd(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError as exc:
            raise fail(Step.ROOT, exc, root) from exc
        try:
            mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        except OSError as exc:
            raise fail(Step.ROOT, exc, root) from exc
        for index, entry in enumerate(plan):
            apply(root, entry, spec, devices, plan[:index])
        seal_submounts(root, plan)
        reopen_exec(root, plan, spec.exec_paths)
        mount_proc(root)
        remount_flags(
            path_inside(root, "/dev"), MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, Step.DEV
        )
    except BaseException:
        for fd in (host_root, covered):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for entry in plan:
            if entry.fd >= 0:
                os.close(entry.fd)
        for fd in devices.values():
            os.close(fd)
    mounted = tuple(Mount(entry.path, entry.kind, noexec=entry.noexec) for entry in plan)
    return PreparedRoot(root, spec, mounted, host_root, covered)


def finish_jail(prepared: PreparedRoot, spec: JailSpec) -> None:
    """Add what ``spec`` grants beyond ``prepared``, then enter the jail and drop privileges.

    ``spec`` must include every grant the root was built with. A grant
    that cannot simply be mounted on top of the prepared root (one that
    would cover a mount already there, or that lands in /dev or /proc) makes
    the root be thrown away and rebuilt for ``spec`` from scratch: the
    result is always the root :func:`build_root` would make for ``spec``.
    """
    validate(spec, check_paths=False)
    extra = [grant for grant in spec.grants if grant not in prepared.spec.grants]
    subset = all(grant in spec.grants for grant in prepared.spec.grants)
    subset = subset and spec.private_tmp == prepared.spec.private_tmp
    if not subset or not _extends(prepared, extra):
        # Rare (a grant of /usr, say): unmount the prepared root and its
        # submounts, uncovering the host's directory, and start again.
        prepared.close()
        try:
            umount2(prepared.root, MNT_DETACH)
        except OSError as exc:
            raise fail(Step.ROOT, exc, prepared.root) from exc
        prepared = build_root(spec)  # closes its descriptors itself when it fails
        prepared.close()
    else:
        try:
            _add_grants(prepared, spec, extra)
            if spec.tmp_size_mb != prepared.spec.tmp_size_mb:
                mount_tmp(
                    path_inside(prepared.root, spec.private_tmp), spec.tmp_size_mb, remount=True
                )
        finally:
            prepared.close()
    for path in spec.masks:
        mask(prepared.root, path)
    pivot(prepared.root)
    finish_inside(spec)
    if spec.allow_exec:
        try:
            share_real_uid(spec.identity)
        except OSError as exc:
            raise fail(Step.CAPABILITIES, exc) from exc
    drop_privileges(highest_capability())


#: The prepared root's descriptors are moved at or above this number, out of
#: the way of the fds a worker's set-up puts in place (its channel at 3).
_HIGH_FD = 10


def _high_fd(fd: int) -> int:
    """``fd`` moved to the lowest free number >= :data:`_HIGH_FD` (fcntl(2) F_DUPFD_CLOEXEC)."""
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD)
    finally:
        os.close(fd)


def _extends(prepared: PreparedRoot, grants: list[PathGrant]) -> bool:
    """Whether ``grants`` can be mounted on top of the prepared root in any order
    :func:`build_root` would have used (parents first, the jail's /tmp under a grant)."""
    for grant in grants:
        target = grant.inside
        if not plain(prepared, grant.path):
            return False  # opened, or refused with the right reason, by the rebuild
        if path_contains("/dev", target) or path_contains("/proc", target):
            return False  # read-only tmpfs and the jail's own proc: mounted before grants
        for entry in prepared.mounted:
            if entry.path == target:
                if entry.kind is not Kind.TMP:
                    return False  # the same path granted twice: build_root merges them
            elif path_contains(target, entry.path):
                return False  # would cover a mount made before it
    return True


def _add_grants(prepared: PreparedRoot, spec: JailSpec, grants: list[PathGrant]) -> None:
    """Mount ``grants`` into the prepared root, parents first, and seal their submounts."""
    if not grants:
        return
    plan = open_plan(
        JailSpec(grants=tuple(grants), exec_paths=spec.exec_paths),
        prepared=prepared,
        jail_mounts=False,
    )
    try:
        earlier = list(prepared.mounted)
        for index, entry in enumerate(plan):
            apply(prepared.root, entry, spec, {}, [*earlier, *plan[:index]])
        seal_submounts(prepared.root, [*earlier, *plan], only={entry.path for entry in plan})
        reopen_exec(prepared.root, plan, spec.exec_paths)
    finally:
        for entry in plan:
            if entry.fd >= 0:
                os.close(entry.fd)


def probe_namespaces(identity: WorkerIdentity | None = None) -> str | None:
    """``None`` when :func:`enter_jail` can work here, else why not (for ``caplet doctor``).

    Forks a child that creates the namespaces and writes its id maps, then
    forks pid 1 of the new pid namespace, which makes mount propagation
    private and mounts a tmpfs and a proc. Nothing of it touches the caller.
    """
    if "namespaces" in disabled_layers():
        return f"namespaces disabled by {DISABLE_LAYERS_ENV} (test-only override)"
    if not sys.platform.startswith("linux"):
        return f"namespaces need Linux; this is {sys.platform}"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child, reports through the pipe
        status = 1
        try:
            os.close(read_end)
            _report(write_end, _probe_child(write_end, identity))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    chunks = []
    with os.fdopen(read_end, "rb") as reader:
        chunks.append(reader.read())
    _, status = os.waitpid(child, 0)
    reason = b"".join(chunks).decode("utf-8", "replace").strip()
    if reason:
        return reason
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return f"the namespace probe exited with status {code}"
    return None


# -- the probe ----------------------------------------------------------------------------


def _probe_child(  # pragma: no cover - forked child
    report_fd: int, identity: WorkerIdentity | None
) -> str | None:
    try:
        # The map a real jail writes, the worker's own real uid included.
        create_namespaces(identity, None if identity is None else identity.real_uid(os.getpid()))
    except SandboxError as exc:
        return str(exc)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            _report(report_fd, _probe_pid_one())
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return f"pid 1 of the probe's pid namespace exited with status {code}"
    return None


def _probe_pid_one() -> str | None:  # pragma: no cover - forked grandchild
    if os.getpid() != 1:
        return f"the new pid namespace did not apply (pid {os.getpid()}, expected 1)"
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        return str(fail(Step.PROPAGATION, exc))
    root = os.path.realpath(ROOT_MOUNTPOINT)
    try:
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    except OSError as exc:
        return str(fail(Step.ROOT, exc, root))
    try:
        Path(root, "proc").mkdir()
        mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        return str(fail(Step.PROC, exc, "/proc"))
    return None


def _report(fd: int, reason: str | None) -> None:
    if reason:
        os.write(fd, reason.encode("utf-8", "replace")[:4096] + b"\n")


def disabled_layers() -> set[str]:
    return {word for word in re.split(r"[\s,]+", os.environ.get(DISABLE_LAYERS_ENV, "")) if word}
