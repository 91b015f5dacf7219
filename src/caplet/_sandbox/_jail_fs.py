"""The jail's mounts: tmpfs, bind and sealed grants, masks, /dev, /proc and
``pivot_root`` (step 3 of :mod:`caplet._sandbox._jail`); the snapshot's
copy is :mod:`caplet._sandbox._jail_copy`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import assert_never

from caplet._errors import SandboxError
from caplet._sandbox._jail_model import (
    DEV_LINKS,
    KEPT_FLAGS,
    MOUNTINFO_ESCAPE,
    OLD_ROOT,
    PROC_READ_ONLY,
    SCAFFOLD_MODE,
    JailSpec,
    Kind,
    Mount,
    Step,
    fail,
    path_contains,
    path_inside,
    path_parts,
    read_small,
    write_proc,
)
from caplet._sandbox._resolve import (
    GrantPathError,
    open_no_links,
)
from caplet._syscall import (
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
    mount,
    pivot_root,
    sethostname,
    umount2,
)

__all__ = [
    "bind_grant",
    "bind_nested_grant",
    "detach_root_copy",
    "finish_inside",
    "make_listing",
    "mask",
    "mount_proc",
    "mount_tmp",
    "pivot",
    "populate_dev",
    "remount_flags",
    "reopen_exec",
    "seal_submounts",
]

#: A glob's folder in the jail: listable and searchable, by anyone, written by no one.
_LISTING_MODE = 0o555


def mount_tmp(target: str, size_mb: int, *, remount: bool = False) -> None:
    """The jail's private /tmp (or, ``remount``, a new size for it)."""
    inodes = max(1024, size_mb * 256)
    # tmpfs(5): size bounds the bytes, nr_inodes the (otherwise unbounded)
    # number of empty files a plugin could create; both may change on remount.
    options = f"size={size_mb}m,nr_inodes={inodes}"
    # noexec (W^X, as for writable grants in _grant_flags): Landlock's execute
    # right guards execve(2), but the approved program's ELF interpreter, run
    # as a program, maps whatever file it is given; mmap(2) refuses PROT_EXEC
    # only on a noexec mount (a red-team finding: `ld.so /tmp/copy`).
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        if remount:
            mount("tmpfs", target, "tmpfs", MS_REMOUNT | flags, options)
            return
        Path(target).mkdir(mode=0o755, parents=True, exist_ok=True)
        mount("tmpfs", target, "tmpfs", flags, f"{options},mode=1777")
    except OSError as exc:
        raise fail(Step.TMP, exc, target) from exc


def bind_grant(target: str, entry: Mount) -> None:
    """Bind the grant at ``target``, a mount point in the jail's own tmpfs.

    Every directory on the way is the jail's scaffolding, which only this
    process can change: the path can be used as it is. A grant inside
    another grant's host tree takes :func:`bind_nested_grant` instead.
    """
    try:
        _make_mountpoint(target, directory=stat.S_ISDIR(os.fstat(entry.fd).st_mode))
        _mount_sealed(target, entry)
    except OSError as exc:
        raise fail(Step.GRANT, exc, entry.path) from exc


def _mount_sealed(target: str, entry: Mount) -> None:
    """Bind ``entry`` at ``target``, private, with the grant's flags (OSError on failure)."""
    # The source is the magic link of the O_PATH fd: it names exactly the
    # file opened before /tmp was covered (proc(5), /proc/pid/fd).
    mount(f"/proc/self/fd/{entry.fd}", target, None, MS_BIND | MS_REC)
    # A bind of a slave is a slave of the same master: private, so a
    # mount the host makes under a granted path later never appears
    # inside (with the host's flags, past the grant's read-only seal).
    mount(None, target, None, MS_REC | MS_PRIVATE)
    remount_flags(target, _grant_flags(entry.kind, noexec=entry.noexec), Step.GRANT, entry.path)


def bind_nested_grant(root: str, target: str, entry: Mount) -> None:
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
        raise fail(Step.GRANT, exc, entry.path) from exc
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
        detach_root_copy(root, stage, entry.path)
        mount(stage, f"/proc/self/fd/{point}", None, MS_MOVE)
    except OSError as exc:
        raise fail(Step.GRANT, exc, entry.path) from exc
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
            raise fail(Step.GRANT, exc, stage) from exc
        return stage
    raise SandboxError("namespace jail: no staging mount point could be created in the root")


def detach_root_copy(root: str, target: str, path: str) -> None:
    """Remove the copy of the jail's own root that a grant above its mount point brought.

    The root tmpfs is mounted on the host's ``/tmp``; a recursive bind of a
    grant that contains ``/tmp`` (``fs.write:/tmp``, ``fs.read:/``) copies
    every mount below it, the root tmpfs included, so the worker would see
    its own jail where the host's ``/tmp`` should be (issue 13, point 8).
    The copy is the topmost mount at that path; a lazy unmount uncovers the
    host directory the grant is about.
    """
    if not path_contains(path, root):
        return
    copy_at = target.rstrip("/") + root[len(path.rstrip("/")) :]
    try:
        if Path(copy_at).stat().st_dev != Path(root).stat().st_dev:
            return
        umount2(copy_at, MNT_DETACH)
    except OSError as exc:
        raise fail(Step.GRANT, exc, path) from exc

        # Snapshots hold nothing else (links and special files are refused).


def mask(root: str, path: str) -> None:
    """Hide the directory ``path`` (inside a read grant) under an empty, sealed tmpfs.

    caplet's state directory inside a broad read grant (``fs.read:/``): its
    approvals, ``ctx.kv`` values and decision log are no plugin's to read.
    """
    target = path_inside(root, path)
    try:
        if not Path(target).is_dir():
            return  # not visible in this jail: nothing to hide
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
        mount(None, target, None, MS_PRIVATE)
    except OSError as exc:
        raise fail(Step.GRANT, exc, path) from exc
    remount_flags(target, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, Step.GRANT, path)


def _grant_flags(kind: Kind, *, noexec: bool = False) -> int:
    match kind:
        case Kind.READ_ONLY:
            # noexec for a plugin's read grant that holds no runtime or
            # program (_jail_model.read_grant_noexec): the loader maps no ELF
            # file someone else put there.
            return MS_RDONLY | MS_NOSUID | MS_NODEV | (MS_NOEXEC if noexec else 0)
        case Kind.WRITABLE:
            # noexec: nothing a plugin writes is mapped executable, not even
            # by the approved program's ELF interpreter run as a program
            # (Landlock guards execve(2) only; see mount_tmp).
            return MS_NOSUID | MS_NODEV | MS_NOEXEC
        case Kind.COPY | Kind.LINK | Kind.DEV | Kind.TMP | Kind.LISTING:
            raise AssertionError(f"{kind.value} is not a bound grant")
        case _:
            assert_never(kind)


def reopen_exec(root: str, plan: list[Mount], exec_paths: tuple[str, ...]) -> None:
    """Bind each runtime path and approved program that lies inside a noexec read grant
    onto itself again, with exec mappings (after :func:`seal_submounts`).

    ``fs.read:/usr`` holds libc and the approved program, which must still
    load, and another plugin's ``fs.write:/usr/local/share/x``, which must
    not: the grant is noexec, ``/usr/lib`` and ``/usr/bin/true`` inside it
    are exec again (``_jail_model.read_grant_noexec``). Each is opened without
    following links (a spelling through a link, ``/lib64`` on a merged-/usr
    host, is skipped: its real path is in the list too); no plugin can write
    the directories on the way (enable refuses a writable grant over the
    runtime or a program). The bind is recursive, so mounts below it (a
    nested grant, sealed already) keep their place and flags.
    """
    for entry in plan:
        if not entry.noexec:
            continue
        for path in exec_paths:
            if path == entry.path or not path_contains(entry.path, path):
                continue
            target = path_inside(root, path)
            try:
                fd = open_no_links(target)
            except (GrantPathError, OSError):
                continue  # not there, or only through a link: nothing to map from
            try:
                mount(f"/proc/self/fd/{fd}", f"/proc/self/fd/{fd}", None, MS_BIND | MS_REC)
                mount(None, target, None, MS_REC | MS_PRIVATE)
            except OSError as exc:
                raise fail(Step.GRANT, exc, path) from exc
            finally:
                os.close(fd)
            _exec_again(target, path)


def _exec_again(target: str, path: str) -> None:
    """Remount ``target`` (a bind of part of a noexec grant) without ``noexec``."""
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV
    try:
        kept = os.statvfs(target).f_flag & KEPT_FLAGS & ~MS_NOEXEC
        mount(None, target, None, MS_REMOUNT | MS_BIND | flags | kept)
    except PermissionError:
        # noexec locked by the host's own mount (mount_namespaces(7)): the
        # host says nothing there runs, and so does the jail.
        return
    except OSError as exc:
        raise fail(Step.GRANT, exc, path) from exc


def make_listing(target: str, path: str) -> None:
    """A glob's folder at ``target``: the jail's own directory, listable (r-x), so a
    plugin lists its matches there and nothing else of the host's folder (glob32).

    Made before the matches' mount points (parents first); its own parents are the
    search-only scaffolding every grant gets.
    """
    try:
        _make_mountpoint(target, directory=True)
        Path(target).chmod(_LISTING_MODE)
    except OSError as exc:
        raise fail(Step.GRANT, exc, path) from exc


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
        parent.mkdir(mode=SCAFFOLD_MODE)
    if directory:
        path.mkdir(mode=0o755)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))


def remount_flags(target: str, flags: int, step: Step, subject: str = "") -> None:
    """Bind-remount ``target`` with ``flags``, keeping every restriction it has."""
    try:
        kept = os.statvfs(target).f_flag & KEPT_FLAGS
        # mount(2): MS_REMOUNT|MS_BIND changes only this mount's per-mount
        # flags (the statvfs ST_* values equal the MS_* ones); atime flags
        # are preserved when none is given.
        mount(None, target, None, MS_REMOUNT | MS_BIND | flags | kept)
    except OSError as exc:
        raise fail(step, exc, subject or target) from exc


def populate_dev(target: str, devices: dict[str, int]) -> None:
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
            remount_flags(node, MS_NOSUID | MS_NOEXEC, Step.DEV, f"/dev/{name}")
        for name, link in DEV_LINKS:
            Path(target, name).symlink_to(link)
    except OSError as exc:
        raise fail(Step.DEV, exc, "/dev") from exc


#: The grants mounted as binds of a host path: their submounts come with them (MS_REC).
_BIND_KINDS = frozenset({Kind.READ_ONLY, Kind.WRITABLE})


def seal_submounts(root: str, plan: list[Mount], *, only: set[str] | None = None) -> None:
    """Give mounts nested inside a grant (copied by MS_REC) the grant's flags.

    A bind remount changes one mount only, so a host mount below a
    read-only grant would otherwise stay writable inside it. Only mounts
    descending from the new root's mount are considered: host mounts hidden
    under the covered /tmp share its path prefix but are not in the jail.
    ``only`` limits the work to the grants at those paths (the ones just
    added to a prepared root; the others are sealed already).

    Only a bind grant (read-only or writable) brings submounts to seal: the
    jail's own mounts (the snapshot's copy, links, devices, tmpfs) hold
    none but what the jail put there with their flags. When ``only`` names
    no bind grant, nothing can change, and the mount table (~60 lines in a
    relocated zygote's namespace) is not read: ~0.3 ms of a start whose
    only grant of its own is the snapshot's copy.
    """
    if only is not None and not any(
        entry.path in only and entry.kind in _BIND_KINDS for entry in plan
    ):
        return
    prefix = root.rstrip("/") + "/"
    try:
        root_id = _mount_id(root)
        tree = _mount_tree()
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"namespace jail: reading /proc/self/mountinfo to seal submounts failed: {exc}"
        ) from exc
    shapes = [(entry, path_parts(entry.path)) for entry in plan]
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
            inner = path_parts(mount_point[len(prefix) :])
            owner = None
            for entry, outer in shapes:  # sorted parents first: the last match is the deepest
                if inner[: len(outer)] == outer:
                    owner = entry
            if owner is None or path_parts(owner.path) == inner:
                continue
            if only is not None and owner.path not in only:
                continue
            match owner.kind:
                case Kind.READ_ONLY | Kind.WRITABLE:
                    flags = _grant_flags(owner.kind, noexec=owner.noexec)
                    remount_flags(mount_point, flags, Step.GRANT, mount_point)
                case Kind.COPY | Kind.LINK | Kind.DEV | Kind.TMP | Kind.LISTING:
                    pass  # the jail's own mounts (the device binds): already set
                case _:
                    assert_never(owner.kind)


def _mount_id(path: str) -> int:
    """The mount id of the mount ``path`` resolves to (proc(5), /proc/pid/fdinfo)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        info = read_small(f"/proc/self/fdinfo/{fd}")
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
                raw = MOUNTINFO_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), raw)
            tree.append((int(fields[0]), int(fields[1]), os.fsdecode(raw)))
    return tree


def mount_proc(root: str) -> None:
    target = path_inside(root, "/proc")
    try:
        Path(target).mkdir(mode=0o555, parents=True, exist_ok=True)
        # Before pivot_root on purpose: the kernel mounts a new proc in a user
        # namespace only while a fully visible proc exists in the mount
        # namespace (mount_namespaces(7) / user_namespaces(7)), and the host's
        # /proc disappears with the old root.
        mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        raise fail(Step.PROC, exc, "/proc") from exc
    _limit_user_namespace(target)
    for name in PROC_READ_ONLY:
        path = f"{target}/{name}"
        if not os.path.lexists(path):
            continue
        try:
            mount(path, path, None, MS_BIND | MS_REC)
        except OSError as exc:
            raise fail(Step.PROC, exc, f"/proc/{name}") from exc
        remount_flags(
            path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, Step.PROC, f"/proc/{name}"
        )


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
            write_proc(path, str(value))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise fail(Step.PROC, exc, f"/proc/sys/user/{name}") from exc


def pivot(root: str) -> None:
    try:
        Path(root + OLD_ROOT).mkdir(mode=0o700)
        # pivot_root(2): the old root moves to put_old, which is then detached
        # (MNT_DETACH: busy host mounts below it go too) and removed, so no
        # path leads back to the host's tree.
        pivot_root(root, root + OLD_ROOT)
        os.chdir("/")
        umount2(OLD_ROOT, MNT_DETACH)
        Path(OLD_ROOT).rmdir()
    except OSError as exc:
        raise fail(Step.PIVOT, exc, root) from exc
    # The root tmpfs holds only mount points: nothing may be written there.
    remount_flags("/", MS_RDONLY | MS_NOSUID | MS_NODEV, Step.PIVOT)


def finish_inside(spec: JailSpec) -> None:
    try:
        sethostname(spec.hostname)  # only the new UTS namespace (uts_namespaces(7))
    except OSError as exc:
        raise fail(Step.HOSTNAME, exc, spec.hostname) from exc
    try:
        Path(spec.workdir).mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chdir(spec.workdir)
    except OSError as exc:
        raise fail(Step.WORKDIR, exc, spec.workdir) from exc
