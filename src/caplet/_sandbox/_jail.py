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
nosuid, nodev), ``/dev`` with null, zero, urandom and random, a private
size-limited tmpfs ``/tmp`` with the working directory in it, and a fresh
``/proc`` showing only its own pid namespace (``/proc/sys``,
``/proc/sysrq-trigger``, ``/proc/irq`` and ``/proc/bus`` read-only: the
worker keeps its host uid, and for a uid-0 host that uid owns those files).
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

import contextlib
import errno
import fcntl
import importlib.util
import os
import re
import select
import signal
import stat
import sys
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import NoReturn, assert_never

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._resolve import (
    GrantPathError,
    access_problem,
    open_no_links,
    open_pinned,
)
from caplet._syscall import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    MNT_DETACH,
    MS_BIND,
    MS_MOVE,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    MS_SLAVE,
    PR_CAPBSET_DROP,
    clear_capabilities,
    close_fds_except,
    effective_capabilities,
    mount,
    pivot_root,
    prctl,
    set_dumpable,
    set_no_new_privs,
    set_parent_death_signal,
    sethostname,
    umount2,
    unshare,
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

#: Test-only override read by :func:`probe_namespaces` (see the module docstring).
DISABLE_LAYERS_ENV = "CAPLET_TEST_DISABLE_LAYERS"

#: Every namespace the jail creates. CLONE_NEWUSER comes first in the kernel's
#: order, so the others are owned by the new user namespace and the (possibly
#: unprivileged) caller has every capability over them (user_namespaces(7)).
_NAMESPACES = (
    CLONE_NEWUSER
    | CLONE_NEWNS
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWIPC
    | CLONE_NEWUTS
    | CLONE_NEWCGROUP
)

#: The host directory the new root tmpfs is mounted over. Mounted in the
#: jail's private mount namespace only, so the host's /tmp is untouched and
#: nothing has to be created on the host or cleaned up afterwards; grants
#: under it are opened (O_PATH) before it is covered and bound from the fd.
_ROOT_MOUNTPOINT = "/tmp"  # noqa: S108 - a mount point only, never a file
#: The jail's private tmpfs (a path inside the jail, not the host's /tmp).
_JAIL_TMP = "/tmp"  # noqa: S108
_OLD_ROOT = "/.old"
_DEVICES = ("null", "zero", "urandom", "random")
_DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
#: Covered read-only, as bubblewrap does: writable by the owner of "root"
#: files, which a uid-0 host keeps inside (sysctl writes are checked against
#: the euid only, without any capability).
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
#: Directories the jail creates on the way to a grant: search (x) only.
_SCAFFOLD_MODE = 0o111
#: Mount flags a bind remount must keep: some are locked on mounts inherited
#: from a more privileged mount namespace, and clearing them would be EPERM
#: (mount_namespaces(7), "restrictions on mount namespaces"); keeping them
#: also means a grant never *loosens* the host's own restrictions.
_KEPT_FLAGS = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC

# prctl(2) PR_SET_SECUREBITS and the bits of capabilities(7): uid 0 gains no
# capabilities through execve or set*uid, and nothing can undo that.
_PR_SET_SECUREBITS = 28
_SECBIT_NO_SETUID_FIXUP = 1 << 2
_SECUREBITS = (
    (1 << 0)  # SECBIT_NOROOT
    | (1 << 1)  # SECBIT_NOROOT_LOCKED
    | (1 << 2)  # SECBIT_NO_SETUID_FIXUP
    | (1 << 3)  # SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5)  # SECBIT_KEEP_CAPS_LOCKED (KEEP_CAPS stays off)
    | (1 << 6)  # SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7)  # SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)

#: Signals that end the monitor (hence the jail) whatever the zygote did with them.
_STOP_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM})
#: Exit status of the jailed process when its monitor was already gone.
_EXIT_ORPHANED = 128 + signal.SIGKILL
#: Exit status of a monitor that failed itself (its worker is then killed).
_EXIT_MONITOR_FAILED = 125

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62})")
_MOUNTINFO_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class JailSpec:
    """What the jail contains.

    ``grants`` are host paths visible at the same absolute path inside
    (read-only unless ``writable``): the Python runtime
    (:func:`runtime_grants`), the plugin snapshot and the approved
    fs.read/fs.write paths. They should be absolute and resolved
    (``os.path.realpath``); a grant whose mount point would pass through a
    symbolic link inside another grant is refused. ``tmp_size_mb`` bounds the
    private /tmp; ``workdir`` is created if missing and becomes the working
    directory.
    """

    grants: tuple[PathGrant, ...]
    tmp_size_mb: int = 64
    hostname: str = "caplet"
    workdir: str = "/tmp/work"  # noqa: S108 - inside the jail's private tmpfs
    #: Where the jail's private tmpfs is mounted: /tmp, or :data:`PRIVATE_TMP_ASIDE`
    #: when a grant is the host's /tmp (the worker's own files never go there).
    private_tmp: str = "/tmp"  # noqa: S108
    #: Who the worker becomes (None: keep the caller's ids). For a root
    #: caller it must be the identity :func:`enter_namespaces` mapped.
    identity: WorkerIdentity | None = None
    #: Directories hidden under an empty sealed tmpfs (caplet's own state
    #: inside a broad read grant), applied after every grant.
    masks: tuple[str, ...] = ()


class _Step(Enum):
    """The steps of :func:`enter_jail`, as error messages name them."""

    NAMESPACES = "unshare(2) of the user, mount, pid, net, ipc, uts and cgroup namespaces"
    ID_MAPS = "writing /proc/self/uid_map and gid_map"
    FORK = "forking pid 1 of the new pid namespace"
    PARENT_DEATH = "arming PR_SET_PDEATHSIG"
    PROPAGATION = "making mount propagation private"
    OPEN_GRANT = "opening a granted path"
    ROOT = "mounting the tmpfs root"
    GRANT = "bind-mounting a grant"
    DEV = "populating /dev"
    TMP = "mounting the private /tmp"
    PROC = "mounting /proc"
    PIVOT = "pivot_root(2) into the new root"
    HOSTNAME = "setting the hostname"
    WORKDIR = "entering the working directory"
    CAPABILITIES = "dropping capabilities"


class _Kind(Enum):
    """What one entry of the mount plan mounts."""

    READ_ONLY = "read-only grant"
    WRITABLE = "writable grant"
    #: A read-only grant copied into a tmpfs of its own (PathGrant.copy).
    COPY = "copied grant"
    #: A symbolic link of the host's / mirrored in the jail's root (a grant of /).
    LINK = "symbolic link"
    DEV = "/dev"
    TMP = _JAIL_TMP


@dataclass(frozen=True, slots=True)
class _Mount:
    """One entry of the mount plan: ``path`` inside the jail, from ``fd`` for grants."""

    path: str
    kind: _Kind
    fd: int = -1
    #: The link's target, for _Kind.LINK.
    link: str = ""


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
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        _package_parent("caplet"),
        _package_parent("msgpack"),
        sys.executable,
        *_LIBRARY_DIRS,
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
    return tuple(PathGrant(path) for path in _outermost(paths))


def prepare_jail() -> None:
    """Do once, in the zygote before it forks, what every jail would redo.

    Loads libc through ctypes (``ctypes.util.find_library`` may even run
    ldconfig) and reads the highest capability number, so each forked
    worker's :func:`enter_jail` pays for neither. Optional: enter_jail works
    without it, only slower.
    """
    effective_capabilities()  # loads and caches libc in caplet._syscall
    _last_capability()


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
    _validate(spec)
    _last_capability()
    enter_namespaces(spec.identity)
    finish_jail(build_root(spec), spec)


def enter_namespaces(identity: WorkerIdentity | None = None) -> None:
    """Create the namespaces and fork pid 1 of the new pid namespace; return in pid 1.

    The calling process (single-threaded) becomes the monitor and never
    returns. Nothing here depends on what the worker will be granted, so a
    spare takes this step before its request exists (see
    :mod:`caplet._sandbox._zygote`). ``identity`` is who the worker will
    become (see :func:`_create_namespaces`); the monitor becomes it too.
    """
    # Closed by the kernel when the monitor dies: lets the child detect a
    # monitor that died before PR_SET_PDEATHSIG was armed (see _arm_parent_death).
    alive_read, alive_write = os.pipe()
    try:
        _create_namespaces(identity)
        try:
            child = os.fork()
        except OSError as exc:
            raise _fail(_Step.FORK, exc) from exc
    except BaseException:
        os.close(alive_read)
        os.close(alive_write)
        raise
    if child:
        _monitor(child, alive_write, identity)
    os.close(alive_write)
    try:
        # Before arming the parent-death signal: a change of the effective
        # uid clears it (prctl(2), PR_SET_PDEATHSIG).
        _become(identity, keep_capabilities=True)
    except OSError as exc:
        os.close(alive_read)
        raise _fail(_Step.CAPABILITIES, exc) from exc
    _arm_parent_death(alive_read)


@dataclass(frozen=True, slots=True)
class PreparedRoot:
    """A jail root built (not yet entered) by :func:`build_root`.

    ``mounted`` is its mount plan (descriptors already closed); the two
    O_PATH descriptors name the host's ``/`` and the directory the root
    tmpfs covers, as they were before it was covered, so that
    :func:`finish_jail` can still open grants that live under it (openat(2)
    starts its walk at the descriptor's directory and does not cross the
    mount on top of it). They are closed by :func:`finish_jail`.
    """

    root: str
    spec: JailSpec
    mounted: tuple[_Mount, ...]
    host_root_fd: int
    covered_fd: int

    def close(self) -> None:
        for fd in (self.host_root_fd, self.covered_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def build_root(spec: JailSpec) -> PreparedRoot:
    """Build the jail's root for ``spec`` in pid 1 of the new namespaces, without entering it.

    A spare builds the root every worker shares (the Python runtime, /dev,
    /tmp, /proc) before its request arrives; :func:`finish_jail` then adds
    the request's own grants and enters. That keeps the namespaces, the
    fork of pid 1 and some sixty mount(2) calls off the worker's start-up.
    """
    _validate(spec)
    try:
        # mount_namespaces(7): the copied mounts keep the host's propagation;
        # shared, our mounts could propagate back to the host, and
        # pivot_root(2) refuses shared mounts. Slave rather than private: the
        # host's unmounts still reach this copy of its tree, so a prepared
        # spare waiting for its request does not keep a file system the host
        # unmounted alive ("device busy" for a LUKS or loop device). What the
        # jail mounts is made private as it is mounted (see _bind_grant).
        mount(None, "/", None, MS_REC | MS_SLAVE)
    except OSError as exc:
        raise _fail(_Step.PROPAGATION, exc) from exc
    root = os.path.realpath(_ROOT_MOUNTPOINT)
    plan = _open_plan(spec)
    devices: dict[str, int] = {}
    host_root = covered = -1
    try:
        devices = _open_devices()
        try:
            host_root = _high_fd(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
            covered = _high_fd(os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError as exc:
            raise _fail(_Step.ROOT, exc, root) from exc
        try:
            mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        except OSError as exc:
            raise _fail(_Step.ROOT, exc, root) from exc
        for index, entry in enumerate(plan):
            _apply(root, entry, spec, devices, plan[:index])
        _seal_submounts(root, plan)
        _mount_proc(root)
        _remount(_inside(root, "/dev"), MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, _Step.DEV)
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
    mounted = tuple(_Mount(entry.path, entry.kind) for entry in plan)
    return PreparedRoot(root, spec, mounted, host_root, covered)


def finish_jail(prepared: PreparedRoot, spec: JailSpec) -> None:
    """Add what ``spec`` grants beyond ``prepared``, then enter the jail and drop privileges.

    ``spec`` must include every grant the root was built with. A grant
    that cannot simply be mounted on top of the prepared root (one that
    would cover a mount already there, or that lands in /dev or /proc) makes
    the root be thrown away and rebuilt for ``spec`` from scratch: the
    result is always the root :func:`build_root` would make for ``spec``.
    """
    _validate(spec, check_paths=False)
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
            raise _fail(_Step.ROOT, exc, prepared.root) from exc
        prepared = build_root(spec)  # closes its descriptors itself when it fails
        prepared.close()
    else:
        try:
            _add_grants(prepared, spec, extra)
            if spec.tmp_size_mb != prepared.spec.tmp_size_mb:
                _mount_tmp(_inside(prepared.root, spec.private_tmp), spec.tmp_size_mb, remount=True)
        finally:
            prepared.close()
    for path in spec.masks:
        _mask(prepared.root, path)
    _pivot(prepared.root)
    _finish_inside(spec)
    _drop_privileges(_last_capability())


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
        if not _plain(prepared, grant.path):
            return False  # opened, or refused with the right reason, by the rebuild
        if _contains("/dev", target) or _contains("/proc", target):
            return False  # read-only tmpfs and the jail's own proc: mounted before grants
        for entry in prepared.mounted:
            if entry.path == target:
                if entry.kind is not _Kind.TMP:
                    return False  # the same path granted twice: build_root merges them
            elif _contains(target, entry.path):
                return False  # would cover a mount made before it
    return True


def _add_grants(prepared: PreparedRoot, spec: JailSpec, grants: list[PathGrant]) -> None:
    """Mount ``grants`` into the prepared root, parents first, and seal their submounts."""
    if not grants:
        return
    plan = _open_plan(JailSpec(grants=tuple(grants)), prepared=prepared, jail_mounts=False)
    try:
        earlier = list(prepared.mounted)
        for index, entry in enumerate(plan):
            _apply(prepared.root, entry, spec, {}, [*earlier, *plan[:index]])
        _seal_submounts(prepared.root, [*earlier, *plan], only={entry.path for entry in plan})
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


# -- step 1: namespaces and id maps -------------------------------------------------


def _create_namespaces(identity: WorkerIdentity | None) -> None:
    """unshare(2) every namespace and write the new user namespace's id maps.

    An unprivileged caller maps exactly its own ids (all it may map). A root
    caller whose workers run as another identity (:mod:`._identity`) needs
    a map it cannot write from inside the new namespace: see
    :func:`_create_namespaces_as_root`.
    """
    uid, gid = os.geteuid(), os.getegid()  # before unshare: then they read as the overflow id
    if identity is not None and identity.privileged and uid == 0:
        _create_namespaces_as_root(identity)
        return
    try:
        unshare(_NAMESPACES)
    except OSError as exc:
        raise _fail(_Step.NAMESPACES, exc) from exc
    try:
        _write_id_maps(uid, gid)
    except OSError as exc:
        raise _fail(_Step.ID_MAPS, exc) from exc


def _create_namespaces_as_root(identity: WorkerIdentity) -> None:
    """The namespaces of a root host's jail, mapping host root and the worker's ids.

    user_namespaces(7): a map naming ids other than the writer's own needs
    CAP_SETUID/CAP_SETGID in the *parent* user namespace, which a process
    loses the moment it enters a new one. So a helper forked first, still
    root in the host's namespace, writes the maps of this process once it
    has unshared. They hold two ids: host root (0), so that pid 1 can still
    open the runtime and the grants the way the host sees them while it
    builds the root (DAC override applies only to inodes whose owner is
    mapped), and the worker's own, which pid 1 and the monitor switch to
    (:func:`_become`) before any plugin byte runs. No process of the jail
    keeps uid 0 or a capability after that, and none can get either back:
    set*id(2) needs CAP_SETUID, the bounding set is empty, the securebits
    are locked, no_new_privs is set and seccomp refuses set*id outright.
    Root's supplementary groups (group 0 among them) are dropped first.
    """
    uid, gid = identity.uid, identity.gid
    try:
        os.setgroups([])
    except OSError as exc:
        raise _fail(_Step.ID_MAPS, exc) from exc
    parent = os.getpid()
    go_read, go_write = os.pipe2(os.O_CLOEXEC)
    done_read, done_write = os.pipe2(os.O_CLOEXEC)
    try:
        helper = os.fork()
    except OSError as exc:
        for fd in (go_read, go_write, done_read, done_write):
            os.close(fd)
        raise _fail(_Step.ID_MAPS, exc) from exc
    if helper == 0:  # pragma: no cover - the helper, observed through every root jail
        code = 1
        try:
            os.close(go_write)
            os.close(done_read)
            if os.read(go_read, 1) == b"g":
                try:
                    _write_proc(f"/proc/{parent}/setgroups", "deny")
                    _write_proc(f"/proc/{parent}/uid_map", f"0 0 1\n{uid} {uid} 1")
                    _write_proc(f"/proc/{parent}/gid_map", f"0 0 1\n{gid} {gid} 1")
                    code = 0
                except OSError as exc:
                    os.write(done_write, str(exc.errno or 0).encode())
        finally:
            os._exit(code)
    os.close(go_read)
    os.close(done_write)
    try:
        try:
            unshare(_NAMESPACES)
        except OSError as exc:
            raise _fail(_Step.NAMESPACES, exc) from exc
        os.write(go_write, b"g")
    finally:
        os.close(go_write)  # unshare failed: end of file tells the helper to go
        _, status = os.waitpid(helper, 0)
        with os.fdopen(done_read, "rb") as reader:
            report = reader.read()
    if os.waitstatus_to_exitcode(status) != 0:
        code = int(report) if report.isdigit() else errno.EPERM
        raise _fail(_Step.ID_MAPS, OSError(code, os.strerror(code)), f"uid {uid}, gid {gid}")


def _become(identity: WorkerIdentity | None, *, keep_capabilities: bool = False) -> None:
    """Switch to the worker's ids (root hosts only).

    pid 1 switches right after the fork, with ``keep_capabilities``
    (SECBIT_NO_SETUID_FIXUP, capabilities(7)): it still needs them to build
    the root, and :func:`_drop_privileges` clears them before plugin code
    runs. Everything pid 1 creates from here on (the scaffolding, /tmp/work)
    is the worker's uid's, never host root's; DAC override still reaches
    root's files through the capability while it lasts, since host root is
    mapped. The monitor switches without keeping anything.
    """
    if identity is None or not identity.privileged:
        return
    if keep_capabilities:
        prctl(_PR_SET_SECUREBITS, _SECBIT_NO_SETUID_FIXUP)
    os.setresgid(identity.gid, identity.gid, identity.gid)
    os.setresuid(identity.uid, identity.uid, identity.uid)


def _write_id_maps(uid: int, gid: int) -> None:
    # user_namespaces(7): an unprivileged process may map exactly its own ids,
    # and for gid_map only after "deny" was written to setgroups. The same ids
    # inside keep the runtime (e.g. under /root/.pyenv) readable; the
    # capabilities root-inside holds are dropped before enter_jail returns.
    _write_proc("/proc/self/setgroups", "deny")
    _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")


def _write_proc(path: str, text: str) -> None:
    # One write(2): the map files reject a map split over several writes.
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


# -- step 2: the monitor and pid 1 ------------------------------------------------------


def _monitor(child: int, alive_write: int, identity: WorkerIdentity | None) -> NoReturn:
    """Wait for the jailed child and exit with its status; never returns."""
    code = _EXIT_MONITOR_FAILED
    parent = os.getppid()
    try:
        # Python's C handler writes each signal number to the wakeup fd, which
        # is about to be closed (and its number reused).
        signal.set_wakeup_fd(-1)
        # Hold nothing of the zygote's (channel, pipes): the host must see the
        # channel close when the worker dies, not when the monitor does. Only
        # stderr (the worker's log) stays, to explain a failure of the monitor.
        close_fds_except({2, alive_write})
        for number in signal.valid_signals():
            if callable(signal.getsignal(number)) or number in _STOP_SIGNALS:
                # A Python handler (SIGINT's KeyboardInterrupt) would raise out
                # of waitpid into the caller's code, and an inherited SIG_IGN
                # would make the monitor unstoppable; with default actions a
                # signal ends the monitor, and PR_SET_PDEATHSIG then the jail.
                signal.signal(number, signal.SIG_DFL)
        # The monitor holds every capability in the new user namespace and
        # needs none: give them up (capabilities(7)), and on a root host
        # host root's uid too (it only waits for its child).
        _become(identity)
        if identity is not None and identity.privileged:
            # The uid change cleared the monitor's own PR_SET_PDEATHSIG (the
            # zygote's death must still end it, and with it the jail): re-arm
            # it, then make sure the zygote did not die in between.
            set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != parent:
                os.kill(child, signal.SIGKILL)
                os._exit(_EXIT_ORPHANED)
        clear_capabilities()
        set_no_new_privs()
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            code = 128 - code
    except BaseException as exc:
        try:
            os.write(2, f"caplet jail monitor failed: {type(exc).__name__}: {exc}\n".encode())
        except BaseException:  # noqa: S110 - nothing is left to report to
            pass
    finally:
        os._exit(code)


def _arm_parent_death(alive_read: int) -> None:
    try:
        set_parent_death_signal(signal.SIGKILL)
        # The monitor may have died before the signal was armed. getppid()
        # cannot tell: pid 1 of a new pid namespace always sees 0 as its
        # parent (pid_namespaces(7)). The pipe's write end lives only in the
        # monitor, so end-of-file here means the monitor is gone.
        readable, _, _ = select.select([alive_read], [], [], 0)
    except OSError as exc:
        raise _fail(_Step.PARENT_DEATH, exc) from exc
    finally:
        os.close(alive_read)
    if readable:
        os._exit(_EXIT_ORPHANED)


# -- step 3: the root filesystem --------------------------------------------------------


def _open_plan(
    spec: JailSpec, *, prepared: PreparedRoot | None = None, jail_mounts: bool = True
) -> list[_Mount]:
    """The mounts to make, parents before children, with an O_PATH fd per grant.

    The fds are opened after unshare(CLONE_NEWNS) (a bind source must belong
    to the caller's mount namespace, mount(2) EINVAL) and before the root
    tmpfs covers /tmp, so grants under the host's /tmp stay reachable; once
    it is covered (``prepared``), through the descriptors taken before.
    ``jail_mounts`` adds the jail's own /dev and /tmp.
    """
    # Keyed by where the grant appears inside (its target); the fd is opened
    # on the host path it comes from (a pinned grant's, when there are two).
    writable: dict[str, bool] = {}
    sources: dict[str, PathGrant] = {}
    for grant in spec.grants:
        writable[grant.inside] = writable.get(grant.inside, False) or grant.writable
        if grant.inside not in sources or grant.pinned:
            sources[grant.inside] = grant
    plan = [_Mount("/dev", _Kind.DEV), _Mount(spec.private_tmp, _Kind.TMP)] if jail_mounts else []
    try:
        for path, rw in writable.items():
            source = sources[path]
            try:
                fd = _open_source(source, prepared)
            except GrantPathError as exc:
                raise SandboxError(f"namespace jail: grant {exc}") from exc
            except FileNotFoundError as exc:
                raise _missing(source.path) from exc
            except OSError as exc:
                raise _fail(_Step.OPEN_GRANT, exc, source.path) from exc
            if source.copy and not rw:
                kind = _Kind.COPY
            else:
                kind = _Kind.WRITABLE if rw else _Kind.READ_ONLY
            if path == "/" and kind is not _Kind.COPY:
                plan += _whole_root(fd, kind)
            else:
                plan.append(_Mount(path, kind, fd))
    except BaseException:
        for entry in plan:
            if entry.fd >= 0:
                os.close(entry.fd)
        raise
    # Parents first, so a grant nested in another is mounted on top of it; at
    # equal paths the jail's own /dev and /tmp go first and a grant covers them.
    plan.sort(key=lambda entry: (_parts(entry.path), entry.fd >= 0))
    return plan


#: Where the jail's private tmpfs goes when a grant is the host's /tmp.
PRIVATE_TMP_ASIDE = "/.caplet"
#: What a grant of / leaves to the jail: its own /dev, /proc and /tmp.
_JAIL_OWN = frozenset({"dev", "proc", "tmp", PRIVATE_TMP_ASIDE.lstrip("/")})


def _whole_root(fd: int, kind: _Kind) -> list[_Mount]:
    """A grant of ``/`` as one grant per entry of the host's root (closes ``fd``).

    Bound as one mount over the jail's root, ``/`` would leave no place for
    the jail's own ``/plugin`` (a read-only grant cannot have a mount point
    made in it) and put the host's symbolic links (``/lib`` -> ``usr/lib``)
    where the runtime's mounts go. So each top-level directory and file of
    the pinned root is bound on its own, each link is recreated as the same
    link in the jail's root, and ``/dev``, ``/proc`` and ``/tmp`` stay the
    jail's own. Entries are opened from the pinned descriptor without
    following links. A top-level directory the worker may not search
    (``/root`` for a root host's worker) is left out: nothing below it is
    reachable anyway, and the runtime's own mounts under it (a Python in
    ``/root/.pyenv``) then get the jail's search-only scaffolding instead
    (see :func:`unsearchable_roots`, which the zygote uses to keep them).
    """
    hidden = unsearchable_roots(os.geteuid(), os.getegid(), root_fd=fd)
    entries: list[_Mount] = []
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            names = sorted(entry.name for entry in os.scandir(listing))
        finally:
            os.close(listing)
        for name in names:
            if name in _JAIL_OWN or f"/{name}" in hidden:
                continue
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                entries.append(_Mount(f"/{name}", _Kind.LINK, link=os.readlink(name, dir_fd=fd)))
            elif stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                entries.append(_Mount(f"/{name}", kind, child))
    except OSError as exc:
        for entry in entries:
            if entry.fd >= 0:
                os.close(entry.fd)
        raise _fail(_Step.OPEN_GRANT, exc, "/") from exc
    finally:
        os.close(fd)
    return entries


def unsearchable_roots(uid: int, gid: int, *, root_fd: int | None = None) -> frozenset[str]:
    """The top-level directories of ``/`` that ``uid``/``gid`` may not search (``/root``).

    With no supplementary groups: a root host's worker has none, and an
    unprivileged host's directories private to its own groups are rare
    enough to be shown rather than guessed at.
    """
    fd = root_fd if root_fd is not None else os.open("/", os.O_PATH | os.O_CLOEXEC)
    found = set()
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            entries = list(os.scandir(listing))
        finally:
            os.close(listing)
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            child = os.open(entry.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                if access_problem(child, uid, gid, writable=False):
                    found.add(f"/{entry.name}")
            finally:
                os.close(child)
    finally:
        if root_fd is None:
            os.close(fd)
    return frozenset(found)


def _open_source(grant: PathGrant, prepared: PreparedRoot | None) -> int:
    """An O_PATH fd of the grant's host path (absolute, normalised).

    Once the root tmpfs covers its mount point, a plain open of a path below
    it would land in the jail's own tree: such paths are opened relative to
    the covered directory's descriptor, the rest relative to the host root's.
    A pinned grant (a plugin's fs capability) is opened without following
    any symbolic link and must be the inode approved at enable
    (:func:`caplet._sandbox._resolve.open_pinned`). The runtime's grants
    follow links (``/lib`` -> ``usr/lib`` on a merged-/usr host); one whose
    absolute target leads under the covered directory reaches the jail's own
    tree, which holds only what the worker gets anyway.
    """
    path = grant.path
    flags = os.O_PATH | os.O_CLOEXEC
    if prepared is None:
        if grant.pinned:
            return open_pinned(path, grant.device, grant.inode)
        return os.open(path, flags)
    anchor, relative = _anchored(prepared, path)
    if grant.pinned:
        return open_pinned(relative, grant.device, grant.inode, dir_fd=anchor)
    return os.open(relative, flags, dir_fd=anchor)


def _anchored(prepared: PreparedRoot, path: str) -> tuple[int, str]:
    """(directory fd, relative path) naming the host path ``path`` despite the root tmpfs."""
    covered = prepared.root.rstrip("/") + "/"
    if path == prepared.root:
        return prepared.covered_fd, "."
    if path.startswith(covered):
        return prepared.covered_fd, path[len(covered) :]
    return prepared.host_root_fd, path.lstrip("/") or "."


def _plain(prepared: PreparedRoot, path: str) -> bool:
    """Whether the host path ``path`` exists with no symbolic link on the way.

    Checked component by component from the anchor descriptors (lstat, then
    O_PATH|O_NOFOLLOW), because a link with an absolute target would be
    resolved against the covered tree, not the host's. Anything else (a
    link, a missing path, an error) sends :func:`finish_jail` to the plain
    rebuild, which opens the path as the host sees it and explains failures.
    """
    anchor, relative = _anchored(prepared, path)
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    try:
        current = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=anchor)
    except OSError:
        return False
    try:
        for index, part in enumerate(parts):
            if stat.S_ISLNK(os.stat(part, dir_fd=current, follow_symlinks=False).st_mode):
                return False
            if index == len(parts) - 1:
                break
            following = os.open(
                part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=current
            )
            os.close(current)
            current = following
    except OSError:
        return False
    finally:
        os.close(current)
    return True


def _open_devices() -> dict[str, int]:
    devices: dict[str, int] = {}
    for name in _DEVICES:
        try:
            devices[name] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # a stripped host: the device is simply absent inside too
        except OSError as exc:
            for fd in devices.values():
                os.close(fd)
            raise _fail(_Step.DEV, exc, f"/dev/{name}") from exc
    return devices


def _apply(
    root: str, entry: _Mount, spec: JailSpec, devices: dict[str, int], earlier: list[_Mount]
) -> None:
    target = _inside(root, entry.path)
    match entry.kind:
        case _Kind.READ_ONLY | _Kind.WRITABLE:
            # Only directories the jail did not create itself (an earlier
            # grant's host tree, or /dev with its fd links) can hold a symlink.
            owners = [
                other.path
                for other in earlier
                if other.kind not in (_Kind.TMP, _Kind.COPY, _Kind.LINK)
            ]
            if any(_contains(path, entry.path) for path in owners):
                _bind_nested_grant(root, target, entry)
            else:
                _bind_grant(target, entry)
                _detach_root_copy(root, target, entry.path)
        case _Kind.COPY:
            _copy_grant(target, entry)
        case _Kind.LINK:
            try:
                Path(target).symlink_to(entry.link)
            except OSError as exc:
                raise _fail(_Step.GRANT, exc, entry.path) from exc
        case _Kind.DEV:
            _populate_dev(target, devices)
        case _Kind.TMP:
            _mount_tmp(target, spec.tmp_size_mb)
        case _:
            assert_never(entry.kind)


def _mount_tmp(target: str, size_mb: int, *, remount: bool = False) -> None:
    """The jail's private /tmp (or, ``remount``, a new size for it)."""
    inodes = max(1024, size_mb * 256)
    # tmpfs(5): size bounds the bytes, nr_inodes the (otherwise unbounded)
    # number of empty files a plugin could create; both may change on remount.
    options = f"size={size_mb}m,nr_inodes={inodes}"
    try:
        if remount:
            mount("tmpfs", target, "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV, options)
            return
        Path(target).mkdir(mode=0o755, parents=True, exist_ok=True)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"{options},mode=1777")
    except OSError as exc:
        raise _fail(_Step.TMP, exc, target) from exc


def _bind_grant(target: str, entry: _Mount) -> None:
    """Bind the grant at ``target``, a mount point in the jail's own tmpfs.

    Every directory on the way is the jail's scaffolding, which only this
    process can change: the path can be used as it is. A grant inside
    another grant's host tree takes :func:`_bind_nested_grant` instead.
    """
    try:
        _make_mountpoint(target, directory=stat.S_ISDIR(os.fstat(entry.fd).st_mode))
        _mount_sealed(target, entry)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, entry.path) from exc


def _mount_sealed(target: str, entry: _Mount) -> None:
    """Bind ``entry`` at ``target``, private, with the grant's flags (OSError on failure)."""
    # The source is the magic link of the O_PATH fd: it names exactly the
    # file opened before /tmp was covered (proc(5), /proc/pid/fd).
    mount(f"/proc/self/fd/{entry.fd}", target, None, MS_BIND | MS_REC)
    # A bind of a slave is a slave of the same master: private, so a
    # mount the host makes under a granted path later never appears
    # inside (with the host's flags, past the grant's read-only seal).
    mount(None, target, None, MS_REC | MS_PRIVATE)
    _remount(target, _grant_flags(entry.kind), _Step.GRANT, entry.path)


def _bind_nested_grant(root: str, target: str, entry: _Mount) -> None:
    """Bind a grant whose mount point lies inside an earlier grant's host tree.

    That directory is the host's, and whoever may write it (another plugin
    with ``fs.write`` there) can swap the mount point for a symbolic link
    at any moment, between any check and mount(2), which follows it: the
    grant, full of that plugin's files, would cover the jail's ``/plugin``
    (the red team's race). So the mount point is opened once without
    following any link, the grant is bound and sealed on a staging mount
    point in the jail's own tmpfs (which nothing else can reach), and moved
    (MS_MOVE) onto exactly the opened directory through its descriptor's
    magic link, with no path left to re-resolve.
    """
    directory = stat.S_ISDIR(os.fstat(entry.fd).st_mode)
    try:
        _make_mountpoint(target, directory=directory)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, entry.path) from exc
    try:
        point = open_no_links(target)
    except GrantPathError as exc:
        raise SandboxError(
            f"namespace jail: grant {entry.path!r} passes through a symbolic link inside "
            f"another grant: {exc}"
        ) from exc
    stage = _staging_point(root, directory=directory)
    try:
        _mount_sealed(stage, entry)
        _detach_root_copy(root, stage, entry.path)
        mount(stage, f"/proc/self/fd/{point}", None, MS_MOVE)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, entry.path) from exc
    finally:
        os.close(point)
        with contextlib.suppress(OSError):  # still holds the grant: the start fails anyway
            if directory:
                Path(stage).rmdir()
            else:
                Path(stage).unlink()


def _staging_point(root: str, *, directory: bool) -> str:
    """A fresh, empty directory (or file) in the jail's root tmpfs to mount on first."""
    for _ in range(100):
        stage = f"{root.rstrip('/')}/.caplet-stage-{os.urandom(6).hex()}"
        try:
            if directory:
                Path(stage).mkdir(mode=0o700)
            else:
                os.close(os.open(stage, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            continue
        except OSError as exc:
            raise _fail(_Step.GRANT, exc, stage) from exc
        return stage
    raise SandboxError("namespace jail: no staging mount point could be created in the root")


def _detach_root_copy(root: str, target: str, path: str) -> None:
    """Remove the copy of the jail's own root that a grant above its mount point brought.

    The root tmpfs is mounted on the host's ``/tmp``; a recursive bind of a
    grant that contains ``/tmp`` (``fs.write:/tmp``, ``fs.read:/``) copies
    every mount below it, the root tmpfs included, so the worker would see
    its own jail where the host's ``/tmp`` should be (issue 13, point 8).
    The copy is the topmost mount at that path; a lazy unmount uncovers the
    host directory the grant is about.
    """
    if not _contains(path, root):
        return
    copy_at = target.rstrip("/") + root[len(path.rstrip("/")) :]
    try:
        if Path(copy_at).stat().st_dev != Path(root).stat().st_dev:
            return
        umount2(copy_at, MNT_DETACH)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, path) from exc


def _copy_grant(target: str, entry: _Mount) -> None:
    """Copy the tree of ``entry.fd`` into a fresh tmpfs at ``target``, then seal it read-only.

    Used for the plugin's snapshot: a bind mount would show the snapshot's
    host path as its root in /proc/self/mountinfo (issue 13, point 7), a
    private copy shows ``/``. The copy is taken from the snapshot the host
    verified, by this process, before any plugin code exists. Modes keep
    their read and execute bits only (never write, set-uid or set-gid).
    """
    try:
        _make_mountpoint(target, directory=True)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        source = os.open(f"/proc/self/fd/{entry.fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            destination = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _copy_tree(source, destination)
                os.fchmod(destination, stat.S_IMODE(os.fstat(source).st_mode) & 0o555)
            finally:
                os.close(destination)
        finally:
            os.close(source)
        mount(None, target, None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, entry.path) from exc
    _remount(target, MS_RDONLY | MS_NOSUID | MS_NODEV, _Step.GRANT, entry.path)


#: Most bytes one sendfile(2) call moves (its own limit is about 2 GiB).
_COPY_CHUNK = 1 << 30


def _copy_tree(source: int, destination: int) -> None:
    """Copy regular files and directories from directory fd ``source`` into ``destination``."""
    for entry in os.scandir(source):
        info = entry.stat(follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode) & 0o555
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(entry.name, 0o700, dir_fd=destination)
            inner_source = os.open(
                entry.name,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=source,
            )
            try:
                inner = os.open(
                    entry.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=destination,
                )
                try:
                    _copy_tree(inner_source, inner)
                    os.fchmod(inner, mode)
                finally:
                    os.close(inner)
            finally:
                os.close(inner_source)
        elif stat.S_ISREG(info.st_mode):
            reader = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
            try:
                writer = os.open(
                    entry.name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=destination,
                )
                try:
                    offset, size = 0, os.fstat(reader).st_size
                    while offset < size:
                        sent = os.sendfile(writer, reader, offset, min(size - offset, _COPY_CHUNK))
                        if sent == 0:
                            break  # the source shrank: the hash check at load will say so
                        offset += sent
                    os.fchmod(writer, mode)
                finally:
                    os.close(writer)
            finally:
                os.close(reader)
        # Snapshots hold nothing else (links and special files are refused).


def _mask(root: str, path: str) -> None:
    """Hide the directory ``path`` (inside a read grant) under an empty, sealed tmpfs.

    caplet's state directory inside a broad read grant (``fs.read:/``): its
    approvals, ``ctx.kv`` values and decision log are no plugin's to read.
    """
    target = _inside(root, path)
    try:
        if not Path(target).is_dir():
            return  # not visible in this jail: nothing to hide
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
        mount(None, target, None, MS_PRIVATE)
    except OSError as exc:
        raise _fail(_Step.GRANT, exc, path) from exc
    _remount(target, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, _Step.GRANT, path)


def _grant_flags(kind: _Kind) -> int:
    match kind:
        case _Kind.READ_ONLY:
            return MS_RDONLY | MS_NOSUID | MS_NODEV
        case _Kind.WRITABLE:
            return MS_NOSUID | MS_NODEV
        case _Kind.COPY | _Kind.LINK | _Kind.DEV | _Kind.TMP:
            raise AssertionError(f"{kind.value} is not a bound grant")
        case _:
            assert_never(kind)


def _make_mountpoint(target: str, *, directory: bool) -> None:
    path = Path(target)
    if os.path.lexists(path):
        return  # inside an earlier grant's bind mount: the host path itself
    missing = []
    for parent in path.parents:
        if os.path.lexists(parent):
            break
        missing.append(parent)
    for parent in reversed(missing):
        # Scaffolding that exists only to reach a grant at its host path:
        # traversable but not listable once capabilities are gone, so the
        # worker learns no more of the host's layout than its grants' paths
        # (still creatable here: root-in-the-namespace has CAP_DAC_OVERRIDE).
        parent.mkdir(mode=_SCAFFOLD_MODE)
    if directory:
        path.mkdir(mode=0o755)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))


def _remount(target: str, flags: int, step: _Step, subject: str = "") -> None:
    """Bind-remount ``target`` with ``flags``, keeping every restriction it has."""
    try:
        kept = os.statvfs(target).f_flag & _KEPT_FLAGS
        # mount(2): MS_REMOUNT|MS_BIND changes only this mount's per-mount
        # flags (the statvfs ST_* values equal the MS_* ones); atime flags
        # are preserved when none is given.
        mount(None, target, None, MS_REMOUNT | MS_BIND | flags | kept)
    except OSError as exc:
        raise _fail(step, exc, subject or target) from exc


def _populate_dev(target: str, devices: dict[str, int]) -> None:
    try:
        Path(target).mkdir(mode=0o755, parents=True, exist_ok=True)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
        for name, fd in devices.items():
            node = f"{target}/{name}"
            os.close(os.open(node, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
            # A device node made in this tmpfs would not open (a user
            # namespace's mounts are implicitly nodev); a bind of the host's
            # node keeps the host mount's device access (bubblewrap does this).
            mount(f"/proc/self/fd/{fd}", node, None, MS_BIND)
            mount(None, node, None, MS_PRIVATE)  # not a slave of the host's /dev
            _remount(node, MS_NOSUID | MS_NOEXEC, _Step.DEV, f"/dev/{name}")
        for name, link in _DEV_LINKS:
            Path(target, name).symlink_to(link)
    except OSError as exc:
        raise _fail(_Step.DEV, exc, "/dev") from exc


def _seal_submounts(root: str, plan: list[_Mount], *, only: set[str] | None = None) -> None:
    """Give mounts nested inside a grant (copied by MS_REC) the grant's flags.

    A bind remount changes one mount only, so a host mount below a
    read-only grant would otherwise stay writable inside it. Only mounts
    descending from the new root's mount are considered: host mounts hidden
    under the covered /tmp share its path prefix but are not in the jail.
    ``only`` limits the work to the grants at those paths (the ones just
    added to a prepared root; the others are sealed already).
    """
    prefix = root.rstrip("/") + "/"
    try:
        root_id = _mount_id(root)
        tree = _mount_tree()
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"namespace jail: reading /proc/self/mountinfo to seal submounts failed: {exc}"
        ) from exc
    shapes = [(entry, _parts(entry.path)) for entry in plan]
    below: dict[int, list[tuple[int, str]]] = {}
    for mount_id, parent_id, mount_point in tree:
        if mount_id != parent_id:
            below.setdefault(parent_id, []).append((mount_id, mount_point))
    pending = [root_id]
    seen: set[str] = set()
    while pending:
        for mount_id, mount_point in below.get(pending.pop(), []):
            pending.append(mount_id)
            if not mount_point.startswith(prefix) or mount_point in seen:
                continue
            seen.add(mount_point)
            inner = _parts(mount_point[len(prefix) :])
            owner = None
            for entry, outer in shapes:  # sorted parents first: the last match is the deepest
                if inner[: len(outer)] == outer:
                    owner = entry
            if owner is None or _parts(owner.path) == inner:
                continue
            if only is not None and owner.path not in only:
                continue
            match owner.kind:
                case _Kind.READ_ONLY | _Kind.WRITABLE:
                    _remount(mount_point, _grant_flags(owner.kind), _Step.GRANT, mount_point)
                case _Kind.COPY | _Kind.LINK | _Kind.DEV | _Kind.TMP:
                    pass  # the jail's own mounts (the device binds): already set
                case _:
                    assert_never(owner.kind)


def _mount_id(path: str) -> int:
    """The mount id of the mount ``path`` resolves to (proc(5), /proc/pid/fdinfo)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        info = _read_small(f"/proc/self/fdinfo/{fd}")
    finally:
        os.close(fd)
    for line in info.splitlines():
        key, _, value = line.partition(b":")
        if key == b"mnt_id":
            return int(value)
    raise ValueError(f"no mnt_id in /proc/self/fdinfo for {path!r}")


def _mount_tree() -> list[tuple[int, int, str]]:
    """(mount id, parent id, mount point) of every mount (proc(5), /proc/pid/mountinfo)."""
    with open("/proc/self/mountinfo", "rb") as handle:
        lines = handle.read().splitlines()
    tree = []
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            raw = fields[4]
            if b"\\" in raw:  # proc(5): space, tab, newline and backslash are octal escapes
                raw = _MOUNTINFO_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), raw)
            tree.append((int(fields[0]), int(fields[1]), os.fsdecode(raw)))
    return tree


def _mount_proc(root: str) -> None:
    target = _inside(root, "/proc")
    try:
        Path(target).mkdir(mode=0o555, parents=True, exist_ok=True)
        # Before pivot_root on purpose: the kernel mounts a new proc in a user
        # namespace only while a fully visible proc exists in the mount
        # namespace (mount_namespaces(7) / user_namespaces(7)), and the host's
        # /proc disappears with the old root.
        mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        raise _fail(_Step.PROC, exc, "/proc") from exc
    _limit_user_namespace(target)
    for name in _PROC_READ_ONLY:
        path = f"{target}/{name}"
        if not os.path.lexists(path):
            continue
        try:
            mount(path, path, None, MS_BIND | MS_REC)
        except OSError as exc:
            raise _fail(_Step.PROC, exc, f"/proc/{name}") from exc
        _remount(path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, _Step.PROC, f"/proc/{name}")


#: Per-jail bounds of the kernel's per-user counters that have no rlimit
#: (``/proc/sys/user``, user_namespaces(7)). Each is charged up the
#: user-namespace tree to the uid that created the jail (kernel/ucount.c,
#: inc_ucount): with the host's values a red-team plugin held all 128 of host
#: root's inotify instances, and inotify_init1 failed with EMFILE for every
#: root process on the machine while its worker lived. The jail's own limit
#: binds first. A watcher (watchdog, a language server) needs one instance.
_USER_NAMESPACE_LIMITS = (
    ("max_inotify_instances", 16),
    ("max_inotify_watches", 8192),
)


def _limit_user_namespace(proc: str) -> None:
    """Write the jail's own /proc/sys/user limits (its user namespace's, not the host's).

    The sysctl set is the writer's user namespace's, and pid 1 still holds
    CAP_SYS_RESOURCE in it (kernel/ucount.c, set_permissions). A kernel
    without a file skips it; a write that fails stops the start.
    """
    for name, value in _USER_NAMESPACE_LIMITS:
        path = f"{proc}/sys/user/{name}"
        try:
            _write_proc(path, str(value))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _fail(_Step.PROC, exc, f"/proc/sys/user/{name}") from exc


def _pivot(root: str) -> None:
    try:
        Path(root + _OLD_ROOT).mkdir(mode=0o700)
        # pivot_root(2): the old root moves to put_old, which is then detached
        # (MNT_DETACH: busy host mounts below it go too) and removed, so no
        # path leads back to the host's tree.
        pivot_root(root, root + _OLD_ROOT)
        os.chdir("/")
        umount2(_OLD_ROOT, MNT_DETACH)
        Path(_OLD_ROOT).rmdir()
    except OSError as exc:
        raise _fail(_Step.PIVOT, exc, root) from exc
    # The root tmpfs holds only mount points: nothing may be written there.
    _remount("/", MS_RDONLY | MS_NOSUID | MS_NODEV, _Step.PIVOT)


def _finish_inside(spec: JailSpec) -> None:
    try:
        sethostname(spec.hostname)  # only the new UTS namespace (uts_namespaces(7))
    except OSError as exc:
        raise _fail(_Step.HOSTNAME, exc, spec.hostname) from exc
    try:
        Path(spec.workdir).mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chdir(spec.workdir)
    except OSError as exc:
        raise _fail(_Step.WORKDIR, exc, spec.workdir) from exc


# -- step 4: privileges -----------------------------------------------------------------


def _drop_privileges(last_capability: int | None) -> None:
    try:
        prctl(_PR_SET_SECUREBITS, _SECUREBITS)
        # capabilities(7): the bounding set limits what execve can ever grant
        # again; it needs CAP_SETPCAP, so it goes before capset empties the rest.
        for capability in range(64 if last_capability is None else last_capability + 1):
            try:
                prctl(PR_CAPBSET_DROP, capability)
            except OSError as exc:
                # Without cap_last_cap, EINVAL marks the first unknown capability.
                if last_capability is None and exc.errno == errno.EINVAL:
                    break
                raise
        clear_capabilities()
        set_no_new_privs()
        # Not dumpable: no core file, and other processes of the same uid in
        # the jail cannot ptrace it or read its /proc/<pid>/mem; the process
        # itself still reads its own /proc/self (proc(5)).
        set_dumpable(False)
    except OSError as exc:
        raise _fail(_Step.CAPABILITIES, exc) from exc


@cache
def _last_capability() -> int | None:
    """The highest capability this kernel knows (capabilities(7)); None if unreadable."""
    try:
        return int(_read_small("/proc/sys/kernel/cap_last_cap"))
    except (OSError, ValueError):
        return None


def _read_small(path: str) -> bytes:
    """One read(2) of a small /proc file (no text layer: this is on the start-up path)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


# -- the probe ----------------------------------------------------------------------------


def _probe_child(  # pragma: no cover - forked child
    report_fd: int, identity: WorkerIdentity | None
) -> str | None:
    try:
        _create_namespaces(identity)
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
        return str(_fail(_Step.PROPAGATION, exc))
    root = os.path.realpath(_ROOT_MOUNTPOINT)
    try:
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    except OSError as exc:
        return str(_fail(_Step.ROOT, exc, root))
    try:
        Path(root, "proc").mkdir()
        mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        return str(_fail(_Step.PROC, exc, "/proc"))
    return None


def _report(fd: int, reason: str | None) -> None:
    if reason:
        os.write(fd, reason.encode("utf-8", "replace")[:4096] + b"\n")


def disabled_layers() -> set[str]:
    return {word for word in re.split(r"[\s,]+", os.environ.get(DISABLE_LAYERS_ENV, "")) if word}


# -- helpers -------------------------------------------------------------------------------


def _missing(path: str) -> SandboxError:
    return SandboxError(
        f"namespace jail: granted path {path!r} does not exist: create it, or remove "
        "the fs capability that names it"
    )


def _validate(spec: JailSpec, *, check_paths: bool = True) -> None:
    """Refuse a malformed spec; ``check_paths=False`` once the root covers part of the
    host (then a missing path is found when it is opened, with the same message)."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(
            f"namespace jail: namespaces need Linux; this is {sys.platform} "
            '(use isolation = "best-effort" to run without them)'
        )
    for grant in spec.grants:
        if grant.target and not _is_normal_absolute(grant.target):
            raise SandboxError(
                f"namespace jail: grant target {grant.target!r} must be an absolute, "
                "normalised path such as /plugin"
            )
        path = grant.path
        if not _is_normal_absolute(path):
            raise SandboxError(
                f"namespace jail: grant {path!r} must be an absolute, normalised path "
                f"(e.g. {os.path.realpath(path)!r})"
            )
        if check_paths and not os.path.lexists(path):
            raise _missing(path)
    if spec.tmp_size_mb < 1:
        raise SandboxError(
            f"namespace jail: tmp_size_mb must be at least 1, got {spec.tmp_size_mb}"
        )
    if not _HOSTNAME.fullmatch(spec.hostname):
        raise SandboxError(
            f"namespace jail: hostname {spec.hostname!r} must be 1-63 letters, digits, '.' "
            "or '-', starting with a letter or digit"
        )
    if not _is_normal_absolute(spec.private_tmp) or spec.private_tmp == "/":
        raise SandboxError(
            f"namespace jail: private_tmp {spec.private_tmp!r} must be an absolute, normalised "
            "path other than / (such as /tmp)"
        )
    workdir = spec.workdir
    if not _is_normal_absolute(workdir):
        raise SandboxError(
            f"namespace jail: workdir {workdir!r} must be an absolute, normalised path "
            "such as /tmp/work"
        )


def _is_normal_absolute(path: str) -> bool:
    return path.startswith("/") and not path.startswith("//") and os.path.normpath(path) == path


def _fail(step: _Step, exc: OSError, subject: str = "") -> SandboxError:
    code = exc.errno or 0
    name = errno.errorcode.get(code, str(code))
    where = f" for {subject!r}" if subject else ""
    hint = _hint(step, code)
    return SandboxError(
        f"namespace jail: {step.value}{where} failed: {os.strerror(code)} ({name})"
        + (f"; {hint}" if hint else "")
    )


def _hint(step: _Step, code: int) -> str:
    match step:
        case _Step.NAMESPACES:
            if code == errno.EPERM:
                return (
                    "user namespaces are disabled or restricted: sysctl "
                    "kernel.unprivileged_userns_clone=1, or on Ubuntu sysctl "
                    "kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile "
                    "allowing userns for this python); in a container, allow unshare(2) in "
                    'its seccomp profile; or run with isolation = "best-effort"'
                )
            if code == errno.ENOSPC:
                return "the user namespace limit is reached: raise sysctl user.max_user_namespaces"
            if code == errno.EINVAL:
                return (
                    "the caller has several threads (CLONE_NEWUSER needs a single-threaded "
                    "process: fork from the zygote's main thread) or the kernel lacks a "
                    "namespace type"
                )
            return ""
        case _Step.ID_MAPS:
            return "the ids could not be mapped: is /proc mounted and writable by this user?"
        case _Step.PROC:
            if code == errno.EPERM:
                return (
                    "the host's /proc is partly masked (typical in containers), so the kernel "
                    "refuses a new proc in a user namespace: run the container with an "
                    "unmasked /proc (e.g. --security-opt systempaths=unconfined)"
                )
            return ""
        case _Step.PIVOT:
            if code == errno.EINVAL:
                return "the host's root is not a mount point (initramfs?): run from a real root"
            return ""
        case _Step.OPEN_GRANT | _Step.GRANT:
            if code in (errno.ENOENT, errno.ENOTDIR):
                return "the granted path vanished or changed type: check the fs capability"
            return ""
        case _Step.WORKDIR:
            if code == errno.EROFS:
                return "the workdir must be under /tmp or inside a writable grant"
            return ""
        case (
            _Step.FORK
            | _Step.PARENT_DEATH
            | _Step.PROPAGATION
            | _Step.ROOT
            | _Step.DEV
            | _Step.TMP
            | _Step.HOSTNAME
            | _Step.CAPABILITIES
        ):
            return ""
        case _:
            assert_never(step)


def _package_parent(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return ""
    return str(Path(spec.origin).parent.parent)


def _outermost(paths: set[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(paths, key=_parts):
        if not any(_contains(parent, path) for parent in kept):
            kept.append(path)
    return kept


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def _contains(parent: str, path: str) -> bool:
    """Whether ``path`` is ``parent`` or below it (whole components only)."""
    outer, inner = _parts(parent), _parts(path)
    return inner[: len(outer)] == outer


def _inside(root: str, path: str) -> str:
    return root if path == "/" else root.rstrip("/") + path
