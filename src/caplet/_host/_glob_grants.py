"""A glob capability granted as the files it names, resolved once at enable (glob32).

``fs.read:/srv/reports/*.csv`` was granted as all of ``/srv/reports`` (steer31: the
kernel layers see files and folders, not names), so a plugin consented to for "the
CSV reports" read ``secret.key`` beside them. Here the glob is expanded once, at
enable, through descriptors: its folder is opened without following any link
(:func:`caplet._sandbox._resolve.open_no_links`), each further component is
listed or opened relative to the descriptor before it with ``O_NOFOLLOW``, and
every match is an ``O_PATH`` descriptor whose inode the grant pins. The jail binds
those files alone and Landlock rules them alone, exactly as a literal file grant
(:func:`caplet._sandbox._jail_plan.open_plan` re-opens each pinned path without
links and refuses an inode other than the one pinned here). What a match must be:

- a regular file: a directory that matches (``evil.csv/``) would bring a tree of
  names the pattern does not match; a symbolic link is never followed (whoever
  writes the folder would choose its target); a device, FIFO or socket is no file;
- a file with one name: a hard link named like a match (``out/x.json`` that is
  ``~/.bashrc`` under another name) reaches content under names the glob does not
  match, and a write glob would rewrite it there.

Anything else that matches is left out and the approver is told (``GlobGrant.notes``).
Names follow the shell (glob(7)): ``*``, ``?`` and ``[...]`` never match ``/``, and a
leading ``.`` is matched only by a pattern component that starts with ``.``, so
``*.csv`` does not reach ``.secret.csv``. ``..`` is no entry of a listing
(getdents' ``.`` and ``..`` are dropped by :func:`os.scandir`), so no pattern
climbs out of the folder.

The folders are listed and entered as the *worker* may (attack33): a root host lists
what its unprivileged workers could not, so a folder the worker may not list (``0711``,
whose names are the secret) or enter (another user's ``0700`` folder under
``/srv/*/report``) grants nothing a folder grant would not: a glob whose own folder
the worker may not list refuses the enable, naming the fix; a folder further down is
left out and said.

A glob binds at most :data:`GLOB_MATCH_CAP` files: each is a mount and a Landlock rule
at every worker start. More refuses the enable, naming the cap and the fix, as soon as
the walk finds one too many (attack34: it went on counting). The walk itself is bounded
too, by :data:`GLOB_FOLDER_CAP` folders listed or entered and :data:`GLOB_NAME_CAP`
names opened (a ``*`` folder component opens every name of its folder): the matches
were the only bound, so a glob that matches nothing, ``/usr/*/*/*/*/*/*/*/*/none.csv``,
walked all of ``/usr`` at every enable (24 s of the host's CPU here; a home folder or a
network mount, far more) before it was said to match 0 files.

Each descriptor the walk opens has one owner that closes it (attack34: a folder that
could not be listed was closed twice, the second time a number another thread of the
host may have opened since, and the listing's error was lost to ``EBADF``).
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import assert_never

from caplet._capabilities._model import GLOB_CHARS, FsCapability, glob_folder
from caplet._errors import CapabilityError
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._resolve import GrantPathError, access_problem, open_no_links

__all__ = ["GLOB_FOLDER_CAP", "GLOB_MATCH_CAP", "GLOB_NAME_CAP", "GlobGrant", "expand_glob"]

#: The most files one glob capability may bind (each a bind mount and a Landlock rule
#: made again at every worker start).
GLOB_MATCH_CAP = 256
#: The most folders one glob's walk may list or enter at an enable (its own folder
#: included): sixteen folders of a component for each file it may grant.
GLOB_FOLDER_CAP = 16 * GLOB_MATCH_CAP
#: The most names one glob's walk may open (each name a component matches is opened
#: without links and looked at): sixteen for each folder it may walk.
GLOB_NAME_CAP = 16 * GLOB_FOLDER_CAP


class _Cap(enum.Enum):
    """Which bound a walk stopped at."""

    MATCHES = "matches"
    FOLDERS = "folders"
    NAMES = "names"


#: How many left-out matches a note names before it counts the rest.
_NAMED_SKIPS = 5


@dataclass(frozen=True, slots=True)
class GlobGrant:
    """The files one glob matched at enable: (path, O_PATH descriptor) each, sorted by
    path, and the sentences for what matched and was left out. The caller closes the
    descriptors (:meth:`close`)."""

    matches: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]

    def close(self) -> None:
        for _, fd in self.matches:
            os.close(fd)


def _has_glob(part: str) -> bool:
    return any(c in GLOB_CHARS for c in part)


def _name_matches(pattern: str, name: str) -> bool:
    """Shell matching of one component: a leading dot only by a leading dot (glob(7))."""
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatchcase(name, pattern)


def _listing(fd: int, where: str, folder: str) -> list[str]:
    """The names in the directory ``fd`` (sorted), read through the descriptor.

    Any failure is a CapabilityError naming the folder: opening it, or reading it
    (``os.scandir`` of a descriptor takes a copy of it: EMFILE there too, attack34)."""
    try:
        listed = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            with os.scandir(listed) as entries:
                return sorted(entry.name for entry in entries)
        finally:
            os.close(listed)
    except OSError as exc:
        fix = (
            "make it readable for the user caplet runs as"
            if exc.errno in (errno.EACCES, errno.EPERM)
            else "try again, or name the files it needs"
        )
        raise CapabilityError(
            f"{where}: the folder {folder} cannot be listed to match the glob "
            f"({exc.strerror}): {fix}"
        ) from exc


class _TooMuchError(Exception):
    """The walk stopped: one more match, folder or name than its cap allows."""

    def __init__(self, cap: _Cap) -> None:
        super().__init__(cap.value)
        self.cap = cap


class _Walk:
    """One expansion: the matches found so far, what was left out, and why."""

    def __init__(self, where: str, declared: str, identity: WorkerIdentity) -> None:
        self.where = where
        self.declared = declared
        self.identity = identity
        self.groups = () if identity.privileged else tuple(os.getgroups())
        self.found: list[tuple[str, int]] = []
        self.folders = 0
        self.names = 0
        #: The first few left out, named; ``left_out`` counts them all.
        self.skipped: list[str] = []
        self.left_out = 0

    def leave_out(self, path: str, why: str) -> None:
        self.left_out += 1
        if len(self.skipped) < _NAMED_SKIPS:
            self.skipped.append(f"{path} ({why})")

    def step(self, fd: int, folder: str, parts: list[str]) -> None:
        """Match ``parts`` below the directory ``fd`` (whose path is ``folder``); the
        caller keeps ``fd``."""
        self.folders += 1
        if self.folders > GLOB_FOLDER_CAP:
            raise _TooMuchError(_Cap.FOLDERS)
        part, rest = parts[0], parts[1:]
        listed = _has_glob(part)
        problem = self.worker_may_not(fd, listed=listed)
        if problem:
            self.leave_out(
                folder, f"a folder the worker may not {'list' if listed else 'enter'}: {problem}"
            )
            return
        names = (
            [name for name in _listing(fd, self.where, folder) if _name_matches(part, name)]
            if listed
            else [part]
        )
        for name in names:
            self.names += 1
            if self.names > GLOB_NAME_CAP:
                raise _TooMuchError(_Cap.NAMES)
            path = f"{folder.rstrip('/')}/{name}"
            try:
                child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                continue  # a literal component that is not there (or gone since listed)
            except OSError as exc:
                self.leave_out(path, f"cannot be opened: {exc.strerror}")
                continue
            self._take(child, path, rest)

    def worker_may_not(self, fd: int, *, listed: bool) -> str:
        """Why the worker could not list (``listed``) or enter the folder ``fd`` ("" if it
        could): the host matches the glob as the worker sees the folders (attack33)."""
        return access_problem(
            fd,
            self.identity.uid,
            self.identity.gid,
            writable=False,
            groups=self.groups,
            listing=listed,
        )

    def _take(self, fd: int, path: str, rest: list[str]) -> None:
        """Keep ``fd`` as a match, or descend into it, or say why not; ``fd`` is this
        call's from here on: closed here whatever happens, unless kept."""
        kept = False
        try:
            kept = self._judge(fd, path, rest)
        finally:
            if not kept:
                os.close(fd)

    def _judge(self, fd: int, path: str, rest: list[str]) -> bool:
        """Whether ``fd`` is kept as a match (after descending into it, or saying why not)."""
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            self.leave_out(path, "a symbolic link: never followed")
        elif rest:
            if stat.S_ISDIR(mode):
                self.step(fd, path, rest)
            # A file where the pattern goes on below it: not a match, nothing to say.
        elif stat.S_ISDIR(mode):
            self.leave_out(path, "a directory: a glob grants files, name a folder to grant it")
        elif not stat.S_ISREG(mode):
            self.leave_out(path, "not a regular file")
        elif info.st_nlink > 1:
            self.leave_out(
                path,
                f"a file with {info.st_nlink} names (hard links): its content is reachable "
                "under names the glob does not match",
            )
        elif len(self.found) == GLOB_MATCH_CAP:
            raise _TooMuchError(_Cap.MATCHES)  # no need to count the rest: it is refused
        else:
            self.found.append((path, fd))
            return True
        return False

    def notes(self) -> list[str]:
        said = [f"{self.declared}: matches {len(self.found)} file(s) now, each granted by itself"]
        if self.skipped:
            named = "; ".join(self.skipped)
            more = self.left_out - len(self.skipped)
            tail = f"; and {more} more" if more > 0 else ""
            said.append(f"{self.declared}: not granted, though its name matches: {named}{tail}")
        return said


def expand_glob(plugin: str, capability: FsCapability, identity: WorkerIdentity) -> GlobGrant:
    """The files ``capability`` (a resolved glob) matches now, each opened once, as the
    worker (``identity``) may list and enter the folders on the way.

    CapabilityError when its folder cannot be reached without links, the worker may not
    list it, a folder on the way cannot be listed, or it matches more than
    :data:`GLOB_MATCH_CAP` files.
    """
    folder = glob_folder(capability.path)
    assert folder is not None, capability  # the caller passes globs only
    where = f"plugin {plugin!r}: capability {capability.declared!r} (folder {folder!r})"
    parts = [part for part in capability.path[len(folder) :].split("/") if part]
    try:
        top = open_no_links(folder)
    except GrantPathError as exc:
        raise CapabilityError(f"{where}: {exc}") from exc
    walk = _Walk(where, capability.declared, identity)
    try:
        problem = walk.worker_may_not(top, listed=True)
        if problem:
            # Loud, as a folder grant the worker may not search is refused.
            raise CapabilityError(
                f"{where}: {problem}; a glob is matched as the worker sees its folder, "
                f"so give the worker read and search access to {folder} (chmod, chown or "
                "an ACL entry), or name the files it needs"
            )
        walk.step(top, folder, parts)
    except _TooMuchError as exc:
        GlobGrant(tuple(walk.found), ()).close()
        raise CapabilityError(_too_much(plugin, capability, folder, exc.cap)) from None
    except BaseException:
        GlobGrant(tuple(walk.found), ()).close()
        raise
    finally:
        os.close(top)
    return GlobGrant(tuple(walk.found), tuple(walk.notes()))


def _too_much(plugin: str, capability: FsCapability, folder: str, cap: _Cap) -> str:
    """Why a glob whose walk stopped at ``cap`` is refused, and the fix."""
    whole = f"{capability.kind.value}:{folder}"
    declared = f"plugin {plugin!r}: capability {capability.declared!r}"
    narrower = (
        "name the folders the files are in (fewer '*' or '?' folder components), or grant "
        f"the folder itself ({whole}) if the plugin needs all of it"
    )
    if cap is _Cap.FOLDERS:
        return (
            f"{declared} walks more than {GLOB_FOLDER_CAP} folders to find its matches "
            f"(each is listed or entered at every enable); {narrower}"
        )
    if cap is _Cap.NAMES:
        return (
            f"{declared} opens more than {GLOB_NAME_CAP} names to find its matches (each "
            f"name a component matches, at every enable); {narrower}"
        )
    if cap is _Cap.MATCHES:
        return (
            f"{declared} matches more than {GLOB_MATCH_CAP} files, the most one glob may "
            "grant (each file is bound and ruled by itself at every worker start); grant "
            f"the folder itself ({whole}) if the plugin needs all of it, or a narrower glob"
        )
    assert_never(cap)
