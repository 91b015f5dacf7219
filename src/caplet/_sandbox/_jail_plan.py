"""The jail's mount plan: every grant opened once without following links (its
descriptor is what gets mounted), the host's root mirrored for a grant of ``/``,
and the plan applied under the new root (see :mod:`caplet._sandbox._jail`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import assert_never

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._jail_copy import copy_grant
from caplet._sandbox._jail_fs import (
    bind_grant,
    bind_nested_grant,
    detach_root_copy,
    make_listing,
    mount_tmp,
    populate_dev,
)
from caplet._sandbox._jail_model import (
    DEVICES,
    JAIL_OWN,
    JailSpec,
    Kind,
    Mount,
    PreparedRoot,
    Step,
    fail,
    missing_path_error,
    path_contains,
    path_inside,
    path_parts,
    read_grant_noexec,
)
from caplet._sandbox._relocate import host_path
from caplet._sandbox._resolve import (
    GrantPathError,
    access_problem,
    open_pinned,
)

__all__ = ["apply", "open_devices", "open_plan", "plain", "unsearchable_roots"]

#: Mounts that show a host tree (where a path below them is the host's, not the jail's).
_HOST_TREES = (Kind.READ_ONLY, Kind.WRITABLE, Kind.DEV)


# -- step 3: the root filesystem --------------------------------------------------------


def open_plan(
    spec: JailSpec, *, prepared: PreparedRoot | None = None, jail_mounts: bool = True
) -> list[Mount]:
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
    listings = [grant.inside for grant in spec.grants if grant.listing]
    for grant in spec.grants:
        if grant.listing:
            continue
        writable[grant.inside] = writable.get(grant.inside, False) or grant.writable
        if grant.inside not in sources or grant.pinned:
            sources[grant.inside] = grant
    plan = [Mount("/dev", Kind.DEV), Mount(spec.private_tmp, Kind.TMP)] if jail_mounts else []
    try:
        for path, rw in writable.items():
            source = sources[path]
            try:
                fd = _open_source(source, prepared)
            except GrantPathError as exc:
                raise SandboxError(f"namespace jail: grant {exc}") from exc
            except FileNotFoundError as exc:
                raise missing_path_error(source.path) from exc
            except OSError as exc:
                raise fail(Step.OPEN_GRANT, exc, source.path) from exc
            kind = Kind.COPY if source.copy and not rw else Kind.WRITABLE if rw else Kind.READ_ONLY
            # Only a plugin's read grant (pinned); the runtime's are not.
            data = kind is Kind.READ_ONLY and source.pinned and not source.executable
            if path == "/" and kind is not Kind.COPY:
                plan += _whole_root(fd, kind, spec.exec_paths if data else None)
            else:
                noexec = data and read_grant_noexec(path, spec.exec_paths)
                checked = source.content_hash if kind is Kind.COPY else ""
                plan.append(Mount(path, kind, fd, noexec=noexec, content_hash=checked))
    except BaseException:
        for entry in plan:
            if entry.fd >= 0:
                os.close(entry.fd)
        raise
    # A glob's folder that is granted itself is the host's folder, listable already.
    plan += [Mount(path, Kind.LISTING) for path in dict.fromkeys(listings) if path not in writable]
    # Parents first, so a grant nested in another is mounted on top of it; at
    # equal paths the jail's own /dev and /tmp go first and a grant covers them.
    plan.sort(key=lambda entry: (path_parts(entry.path), entry.fd >= 0))
    return plan


def _whole_root(fd: int, kind: Kind, exec_paths: tuple[str, ...] | None) -> list[Mount]:
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
    With ``exec_paths`` (a plugin's read grant), each entry is judged on its
    own by :func:`read_grant_noexec`: ``/usr`` keeps exec mappings, ``/home``
    and ``/srv`` do not.
    """
    hidden = unsearchable_roots(os.geteuid(), os.getegid(), root_fd=fd)
    entries: list[Mount] = []
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            names = sorted(entry.name for entry in os.scandir(listing))
        finally:
            os.close(listing)
        for name in names:
            if name in JAIL_OWN or f"/{name}" in hidden:
                continue
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                entries.append(Mount(f"/{name}", Kind.LINK, link=os.readlink(name, dir_fd=fd)))
            elif stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                noexec = exec_paths is not None and read_grant_noexec(f"/{name}", exec_paths)
                entries.append(Mount(f"/{name}", kind, child, noexec=noexec))
    except OSError as exc:
        for entry in entries:
            if entry.fd >= 0:
                os.close(entry.fd)
        raise fail(Step.OPEN_GRANT, exc, "/") from exc
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
        # A relocated zygote's root mirrors the host's top-level entries:
        # / itself (the inode pinned at enable) is the host's, kept aside.
        path = host_path(path)
        if grant.pinned:
            return open_pinned(path, grant.device, grant.inode, one_name=grant.one_name)
        return os.open(path, flags)
    anchor, relative = _anchored(prepared, path)
    if grant.pinned:
        return open_pinned(
            relative, grant.device, grant.inode, dir_fd=anchor, one_name=grant.one_name
        )
    return os.open(relative, flags, dir_fd=anchor)


def _anchored(prepared: PreparedRoot, path: str) -> tuple[int, str]:
    """(directory fd, relative path) naming the host path ``path`` despite the root tmpfs."""
    covered = prepared.root.rstrip("/") + "/"
    if path == prepared.root:
        return prepared.covered_fd, "."
    if path.startswith(covered):
        return prepared.covered_fd, path[len(covered) :]
    return prepared.host_root_fd, path.lstrip("/") or "."


def plain(prepared: PreparedRoot, path: str) -> bool:
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


def open_devices() -> dict[str, int]:
    devices: dict[str, int] = {}
    for name in DEVICES:
        try:
            devices[name] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # a stripped host: the device is simply absent inside too
        except OSError as exc:
            for fd in devices.values():
                os.close(fd)
            raise fail(Step.DEV, exc, f"/dev/{name}") from exc
    return devices


def apply(
    root: str, entry: Mount, spec: JailSpec, devices: dict[str, int], earlier: list[Mount]
) -> None:
    target = path_inside(root, entry.path)
    match entry.kind:
        case Kind.READ_ONLY | Kind.WRITABLE:
            # Only directories the jail did not create itself (an earlier
            # grant's host tree, or /dev with its fd links) can hold a symlink.
            owners = [
                other.path
                for other in earlier
                if other.kind not in (Kind.TMP, Kind.COPY, Kind.LINK, Kind.LISTING)
            ]
            if any(path_contains(path, entry.path) for path in owners):
                bind_nested_grant(root, target, entry)
            else:
                bind_grant(target, entry)
                detach_root_copy(root, target, entry.path)
        case Kind.COPY:
            copy_grant(target, entry)
        case Kind.LINK:
            try:
                Path(target).symlink_to(entry.link)
            except OSError as exc:
                raise fail(Step.GRANT, exc, entry.path) from exc
        case Kind.LISTING:
            owners = [other.path for other in earlier if other.kind in _HOST_TREES]
            if not any(path_contains(path, entry.path) for path in owners):
                make_listing(target, entry.path)
            # Inside an earlier grant's host tree the folder is the host's: its own.
        case Kind.DEV:
            populate_dev(target, devices)
        case Kind.TMP:
            mount_tmp(target, spec.tmp_size_mb)
        case _:
            assert_never(entry.kind)
