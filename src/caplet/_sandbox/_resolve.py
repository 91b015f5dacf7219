"""Grant paths resolved once, never through a symbolic link (issue 13, point 2).

A grant names a host path: ``fs.read:/data/projects``. If any component of
that path is a symbolic link, whoever can write the link's directory decides
what the grant means: the red team's plugin A (``fs.write:/data``) replaced
``/data/projects`` with a link to ``/`` and plugin B, enabled afterwards with
``fs.read:/data/projects``, read ``/etc/shadow``. Every policy check (broad
paths, home directories, caplet's own directories) looked at the declared
path, never at what it resolved to.

So a grant is resolved here component by component without following any
link: ``openat2(2)`` with ``RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``
where the kernel has it (Linux 5.6), else a walk of ``O_PATH | O_NOFOLLOW``
opens, one component at a time from ``/``. A link anywhere on the path
refuses the grant, naming the link and its target (caplet does not follow
it: the approver would have to re-check the resolved path, and the link
could be re-pointed between that check and the mount anyway). The inode the
walk ends at is pinned (device and inode number, :class:`ResolvedPath`);
the jail opens the path again the same way and refuses to start the worker
unless it finds the same inode, and Landlock rules that very descriptor.
Checking a path by name and then using it by name again is exactly the race
this closes.

This module runs in the host (at enable) and in workers (the jail, Landlock):
standard library and caplet base modules only.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from dataclasses import dataclass

from caplet._errors import CapabilityError
from caplet._syscall import (
    AT_FDCWD,
    RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_SYMLINKS,
    openat2,
)

__all__ = [
    "GrantPathError",
    "ResolvedPath",
    "access_problem",
    "open_no_links",
    "open_pinned",
    "resolve_no_links",
]

_O_PATH = os.O_PATH | os.O_CLOEXEC

# include/uapi/linux/posix_acl.h and posix_acl_xattr.h
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ = 0x01, 0x02, 0x04
_ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x08, 0x10, 0x20


class GrantPathError(CapabilityError):
    """A granted path cannot be resolved safely: a link on it, missing, unreadable, replaced.

    ``path`` is the granted path; ``link`` and ``target`` name the symbolic
    link found on it and where it points, when that is the problem.
    """

    def __init__(self, message: str, *, path: str, link: str = "", target: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.link = link
        self.target = target


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A granted path as resolved at enable: the inode it must still name at every start."""

    path: str
    device: int
    inode: int
    mode: int

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


def open_no_links(path: str, *, dir_fd: int = AT_FDCWD) -> int:
    """An ``O_PATH`` descriptor of ``path`` reached through no symbolic link at all.

    ``path`` is absolute and normalised (or, with ``dir_fd``, relative to
    that directory, whose own path is not re-checked). Raises
    :class:`GrantPathError` naming the link and its target when one is on
    the way, the missing component when there is none, or the errno.
    """
    if not _has_openat2():
        return _walk(path, dir_fd)
    try:
        return openat2(dir_fd, path, _O_PATH, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    except OSError as exc:
        raise _explain(path, dir_fd, exc) from exc


@functools.cache
def _has_openat2() -> bool:
    """Whether openat2(2) works here (Linux >= 5.6 and not refused by a seccomp profile)."""
    try:
        os.close(openat2(AT_FDCWD, "/", _O_PATH, RESOLVE_NO_SYMLINKS))
    except OSError:
        return False
    return True


def _walk(path: str, dir_fd: int) -> int:
    """open_no_links without openat2: one ``O_PATH | O_NOFOLLOW`` open per component."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    start = "/" if path.startswith("/") else "."
    try:
        current = os.open(start, _O_PATH | os.O_DIRECTORY, dir_fd=dir_fd)
    except OSError as exc:
        raise _explain(path, dir_fd, exc) from exc
    try:
        for part in parts:
            if part == "..":
                raise GrantPathError(
                    f"{path!r} contains '..'; name the directory directly",
                    path=path,
                )
            try:
                following = os.open(part, _O_PATH | os.O_NOFOLLOW, dir_fd=current)
            except OSError as exc:
                raise _explain(path, dir_fd, exc) from exc
            os.close(current)
            current = following
            if stat.S_ISLNK(os.fstat(current).st_mode):
                # O_PATH | O_NOFOLLOW opens the link itself (open(2)).
                raise _explain(path, dir_fd, OSError(errno.ELOOP, os.strerror(errno.ELOOP)))
        result, current = current, -1
        return result
    finally:
        if current >= 0:
            os.close(current)


def _explain(path: str, dir_fd: int, exc: OSError) -> GrantPathError:
    """Why ``path`` could not be opened without links, naming the link when there is one."""
    code = exc.errno or 0
    if code in (errno.ELOOP, errno.EXDEV):
        link, target = _first_link(path, dir_fd)
        if link:
            real = ""
            if dir_fd == AT_FDCWD:
                try:
                    real = os.path.realpath(path)
                except OSError:
                    # The link changed again while this was worded (another
                    # plugin flipping it): the refusal stands without the hint.
                    real = ""
            instead = f" (here: {real!r})" if real and real != path else ""
            return GrantPathError(
                f"{path!r} passes through a symbolic link: {link!r} -> {target!r}. caplet "
                "does not follow links on a granted path (whoever can write the link's "
                "directory could re-point it); grant the path the link leads to itself"
                f"{instead}, or replace the link with the real directory",
                path=path,
                link=link,
                target=target,
            )
    if code in (errno.ENOENT, errno.ENOTDIR):
        return GrantPathError(
            f"{path!r} does not exist: create it (or correct the configured path), then "
            "enable the plugin again",
            path=path,
        )
    if code == errno.EACCES:
        return GrantPathError(
            f"{path!r} cannot be reached by the user caplet runs as (permission denied on "
            "the way to it): make every directory above it searchable for that user",
            path=path,
        )
    return GrantPathError(
        f"{path!r} cannot be opened ({os.strerror(code)}, {errno.errorcode.get(code, code)})",
        path=path,
    )


def _first_link(path: str, dir_fd: int) -> tuple[str, str]:
    """(the first component of ``path`` that is a symbolic link, its target), or ("", "")."""
    prefix = "/" if path.startswith("/") else ""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    for index in range(len(parts)):
        partial = prefix + "/".join(parts[: index + 1])
        try:
            if stat.S_ISLNK(os.stat(partial, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                return partial, os.readlink(partial, dir_fd=dir_fd)
        except OSError:
            return "", ""
    return "", ""


def resolve_no_links(path: str) -> ResolvedPath:
    """Resolve the absolute ``path`` once without links: its device, inode and type."""
    fd = open_no_links(path)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return ResolvedPath(path, info.st_dev, info.st_ino, info.st_mode)


def open_pinned(
    path: str, device: int, inode: int, *, dir_fd: int = AT_FDCWD, one_name: bool = False
) -> int:
    """``open_no_links`` that also insists on the inode pinned at enable.

    GrantPathError when the path now names another file (it was replaced
    since the approver saw it): the worker must not start on it. With
    ``one_name`` (a glob's match), also when the file has more than one name
    now (attack35: a hard link made after enable, by its owner or a
    deduplicating tool, is content under a name the glob does not match).
    """
    fd = open_no_links(path, dir_fd=dir_fd)
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (device, inode):
        os.close(fd)
        raise GrantPathError(
            f"{path!r} was replaced since the plugin was enabled (it now names another "
            "file or directory); enable the plugin again so the new one is checked",
            path=path,
        )
    if one_name and info.st_nlink != 1:
        os.close(fd)
        raise GrantPathError(
            f"{path!r} has {info.st_nlink} names (hard links) now, one when the plugin was "
            "enabled: its content is reachable under names the glob does not match, so it "
            "is not granted; remove the other names, or enable the plugin again (which "
            "leaves it out)",
            path=path,
        )
    return fd


def access_problem(
    fd: int,
    uid: int,
    gid: int,
    *,
    writable: bool,
    groups: tuple[int, ...] = (),
    listing: bool = False,
) -> str:
    """ "" when a process with ``uid``, ``gid`` and ``groups`` may use the grant.

    A directory must be searchable (and writable, for a writable grant; and
    readable, ``listing``: a glob's folder the host lists for the worker, attack33),
    a file readable (and writable). Decided from the mode bits and the POSIX
    access ACL the way the kernel decides (acl(5), "access check algorithm"),
    without forking or switching ids in the host: inside the jail the grant's
    ancestors are caplet's own search-only directories, so only the granted
    inode itself matters. Otherwise a sentence saying what is missing.
    """
    info = os.fstat(fd)
    is_dir = stat.S_ISDIR(info.st_mode)
    need = (0o3 if writable else 0o1) if is_dir else (0o6 if writable else 0o4)
    if is_dir and listing:
        need |= 0o4
    have = _permissions(fd, info, uid, (gid, *groups))
    if have & need == need:
        return ""
    words = {
        0o4: "list" if is_dir else "read",
        0o2: "write",
        0o1: "search" if is_dir else "execute",
    }
    missing = [word for bit, word in words.items() if need & bit and not have & bit]
    kind = "directory" if is_dir else "file"
    return (
        f"the worker's uid {uid}, gid {gid} may not {' or '.join(missing)} this {kind} "
        f"(owner {info.st_uid}:{info.st_gid}, mode {stat.S_IMODE(info.st_mode):04o})"
    )


def _permissions(fd: int, info: os.stat_result, uid: int, gids: tuple[int, ...]) -> int:
    """The rwx bits ``uid``/``gid`` get on the inode of ``fd`` (mode bits, then the ACL)."""
    mode = info.st_mode
    try:
        acl = os.getxattr(f"/proc/self/fd/{fd}", _ACL_XATTR)
    except OSError:
        acl = b""  # none (ENODATA), or no ACL support: the mode bits decide
    entries = _acl_entries(acl)
    if not entries:
        if info.st_uid == uid:
            return (mode >> 6) & 7
        if info.st_gid in gids:
            return (mode >> 3) & 7
        return mode & 7
    mask = next((perm for tag, perm, _ in entries if tag == _ACL_MASK), 7)
    if info.st_uid == uid:
        return next((perm for tag, perm, _ in entries if tag == _ACL_USER_OBJ), 0)
    for tag, perm, who in entries:
        if tag == _ACL_USER and who == uid:
            return perm & mask
    groups = [
        perm
        for tag, perm, who in entries
        if (tag == _ACL_GROUP_OBJ and info.st_gid in gids) or (tag == _ACL_GROUP and who in gids)
    ]
    if groups:
        union = 0
        for perm in groups:
            union |= perm
        return union & mask
    return next((perm for tag, perm, _ in entries if tag == _ACL_OTHER), 0)


def _acl_entries(raw: bytes) -> list[tuple[int, int, int]]:
    """(tag, perm, id) of a ``system.posix_acl_access`` value; [] when malformed or empty."""
    if len(raw) < 4 or int.from_bytes(raw[:4], "little") != _ACL_VERSION:
        return []
    body = raw[4:]
    if len(body) % 8:
        return []
    return [
        (
            int.from_bytes(body[i : i + 2], "little"),
            int.from_bytes(body[i + 2 : i + 4], "little") & 7,
            int.from_bytes(body[i + 4 : i + 8], "little"),
        )
        for i in range(0, len(body), 8)
    ]
