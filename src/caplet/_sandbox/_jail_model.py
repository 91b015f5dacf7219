"""The jail's parts shared by its steps: :class:`JailSpec`, the mount plan's entries, the
steps as error messages name them (with the fix for each errno), and path helpers.

See :mod:`caplet._sandbox._jail` for how a jail is entered.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import signal
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import assert_never

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._syscall import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
)

__all__ = [
    "DEVICES",
    "DEV_LINKS",
    "DISABLE_LAYERS_ENV",
    "EXIT_MONITOR_FAILED",
    "EXIT_ORPHANED",
    "JAIL_NAMESPACES",
    "JAIL_OWN",
    "KEPT_FLAGS",
    "LIBRARY_DIRS",
    "MOUNTINFO_ESCAPE",
    "OLD_ROOT",
    "PRIVATE_TMP_ASIDE",
    "PROC_READ_ONLY",
    "PR_SET_SECUREBITS",
    "ROOT_MOUNTPOINT",
    "SCAFFOLD_MODE",
    "SECBIT_NO_SETUID_FIXUP",
    "SECUREBITS",
    "STOP_SIGNALS",
    "JailSpec",
    "Kind",
    "Mount",
    "PreparedRoot",
    "Step",
    "fail",
    "missing_path_error",
    "outermost",
    "package_parent",
    "path_contains",
    "path_inside",
    "path_parts",
    "read_grant_noexec",
    "read_small",
    "validate",
    "write_proc",
]

#: Test-only override read by :func:`probe_namespaces` (see the module docstring).
DISABLE_LAYERS_ENV = "CAPLET_TEST_DISABLE_LAYERS"

#: Every namespace the jail creates. CLONE_NEWUSER comes first in the kernel's
#: order, so the others are owned by the new user namespace and the (possibly
#: unprivileged) caller has every capability over them (user_namespaces(7)).
JAIL_NAMESPACES = (
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
ROOT_MOUNTPOINT = "/tmp"  # noqa: S108 - a mount point only, never a file
#: The jail's private tmpfs (a path inside the jail, not the host's /tmp).
_JAIL_TMP = "/tmp"  # noqa: S108
OLD_ROOT = "/.old"
DEVICES = ("null", "zero", "urandom", "random")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
#: Covered read-only, as bubblewrap does: writable by the owner of "root"
#: files, which a uid-0 host keeps inside (sysctl writes are checked against
#: the euid only, without any capability).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
#: Directories the jail creates on the way to a grant: search (x) only.
SCAFFOLD_MODE = 0o111
#: Mount flags a bind remount must keep: some are locked on mounts inherited
#: from a more privileged mount namespace, and clearing them would be EPERM
#: (mount_namespaces(7), "restrictions on mount namespaces"); keeping them
#: also means a grant never *loosens* the host's own restrictions.
KEPT_FLAGS = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC

# prctl(2) PR_SET_SECUREBITS and the bits of capabilities(7): uid 0 gains no
# capabilities through execve or set*uid, and nothing can undo that.
PR_SET_SECUREBITS = 28
SECBIT_NO_SETUID_FIXUP = 1 << 2
SECUREBITS = (
    (1 << 0)  # SECBIT_NOROOT
    | (1 << 1)  # SECBIT_NOROOT_LOCKED
    | (1 << 2)  # SECBIT_NO_SETUID_FIXUP
    | (1 << 3)  # SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5)  # SECBIT_KEEP_CAPS_LOCKED (KEEP_CAPS stays off)
    | (1 << 6)  # SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7)  # SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)

#: Signals that end the monitor (hence the jail) whatever the zygote did with them.
STOP_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM})
#: Exit status of the jailed process when its monitor was already gone.
EXIT_ORPHANED = 128 + signal.SIGKILL
#: Exit status of a monitor that failed itself (its worker is then killed).
EXIT_MONITOR_FAILED = 125

_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62})")
MOUNTINFO_ESCAPE = re.compile(rb"\\([0-7]{3})")


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
    #: Paths whose files must stay mappable as code (the runtime's directories,
    #: the approved programs and their ELF interpreter): a pinned read grant
    #: (a plugin's ``fs.read``) that overlaps none of them is mounted ``noexec``
    #: (:func:`read_grant_noexec`).
    exec_paths: tuple[str, ...] = ()
    #: Whether the worker may exec programs (``proc.exec``): it then keeps the
    #: shared real uid instead of one of its own (:mod:`._identity`).
    allow_exec: bool = False


class Step(Enum):
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


class Kind(Enum):
    """What one entry of the mount plan mounts."""

    READ_ONLY = "read-only grant"
    WRITABLE = "writable grant"
    #: A read-only grant copied into a tmpfs of its own (PathGrant.copy).
    COPY = "copied grant"
    #: A symbolic link of the host's / mirrored in the jail's root (a grant of /).
    LINK = "symbolic link"
    DEV = "/dev"
    TMP = _JAIL_TMP
    #: A glob's folder: a listable directory of the jail's own holding its matches'
    #: mount points (PathGrant.listing, glob32).
    LISTING = "glob folder"


@dataclass(frozen=True, slots=True)
class Mount:
    """One entry of the mount plan: ``path`` inside the jail, from ``fd`` for grants."""

    path: str
    kind: Kind
    fd: int = -1
    #: The link's target, for Kind.LINK.
    link: str = ""
    #: A read-only grant mounted ``noexec`` too (:func:`read_grant_noexec`).
    noexec: bool = False
    #: For Kind.COPY: the tree hash the copy must have (PathGrant.content_hash).
    content_hash: str = ""


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
    mounted: tuple[Mount, ...]
    host_root_fd: int
    covered_fd: int

    def close(self) -> None:
        for fd in (self.host_root_fd, self.covered_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def write_proc(path: str, text: str) -> None:
    # One write(2): the map files reject a map split over several writes.
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


#: Where the jail's private tmpfs goes when a grant is the host's /tmp.
PRIVATE_TMP_ASIDE = "/.caplet"
#: What a grant of / leaves to the jail: its own /dev, /proc and /tmp.
JAIL_OWN = frozenset({"dev", "proc", "tmp", PRIVATE_TMP_ASIDE.lstrip("/")})


def read_small(path: str) -> bytes:
    """One read(2) of a small /proc file (no text layer: this is on the start-up path)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


# -- helpers -------------------------------------------------------------------------------


def missing_path_error(path: str) -> SandboxError:
    return SandboxError(
        f"namespace jail: granted path {path!r} does not exist: create it, or remove "
        "the fs capability that names it"
    )


def validate(spec: JailSpec, *, check_paths: bool = True) -> None:
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
            raise missing_path_error(path)
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


def fail(step: Step, exc: OSError, subject: str = "") -> SandboxError:
    code = exc.errno or 0
    name = errno.errorcode.get(code, str(code))
    where = f" for {subject!r}" if subject else ""
    hint = _hint(step, code)
    return SandboxError(
        f"namespace jail: {step.value}{where} failed: {os.strerror(code)} ({name})"
        + (f"; {hint}" if hint else "")
    )


def _hint(step: Step, code: int) -> str:
    match step:
        case Step.NAMESPACES:
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
        case Step.ID_MAPS:
            return "the ids could not be mapped: is /proc mounted and writable by this user?"
        case Step.PROC:
            if code == errno.EPERM:
                return (
                    "the host's /proc is partly masked (typical in containers), so the kernel "
                    "refuses a new proc in a user namespace: run the container with an "
                    "unmasked /proc (e.g. --security-opt systempaths=unconfined)"
                )
            return ""
        case Step.PIVOT:
            if code == errno.EINVAL:
                return "the host's root is not a mount point (initramfs?): run from a real root"
            return ""
        case Step.OPEN_GRANT | Step.GRANT:
            if code in (errno.ENOENT, errno.ENOTDIR):
                return "the granted path vanished or changed type: check the fs capability"
            return ""
        case Step.WORKDIR:
            if code == errno.EROFS:
                return "the workdir must be under /tmp or inside a writable grant"
            return ""
        case (
            Step.FORK
            | Step.PARENT_DEATH
            | Step.PROPAGATION
            | Step.ROOT
            | Step.DEV
            | Step.TMP
            | Step.HOSTNAME
            | Step.CAPABILITIES
        ):
            return ""
        case _:
            assert_never(step)


def package_parent(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return ""
    return str(Path(spec.origin).parent.parent)


def outermost(paths: set[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(paths, key=path_parts):
        if not any(path_contains(parent, path) for parent in kept):
            kept.append(path)
    return kept


def path_parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def path_contains(parent: str, path: str) -> bool:
    """Whether ``path`` is ``parent`` or below it (whole components only)."""
    outer, inner = path_parts(parent), path_parts(path)
    return inner[: len(outer)] == outer


def read_grant_noexec(path: str, exec_paths: tuple[str, ...]) -> bool:
    """Whether a plugin's read grant at ``path`` is mounted ``noexec``.

    Landlock's execute right guards execve(2) only: the approved program's
    ELF interpreter, run as a program (``ld.so FILE``), maps any ELF file the
    worker can read, and a read grant may hold files that someone else
    wrote there (another plugin's ``fs.write`` inside it, another user): a
    static-gate bypass inside the jail (red team, "Attacking the result
    again"). mmap(2) refuses ``PROT_EXEC`` on a noexec mount, to the loader
    too. Only a read grant that lies inside (or is) a path of the runtime or
    an approved program keeps exec mappings, since it shows that path's
    libraries; one that *contains* such a path (``fs.read:/usr``) is mounted
    noexec and the paths inside it are bound again with exec
    (:func:`caplet._sandbox._jail_fs.reopen_exec`).
    """
    return not any(path_contains(other, path) for other in exec_paths)


def path_inside(root: str, path: str) -> str:
    return root if path == "/" else root.rstrip("/") + path
