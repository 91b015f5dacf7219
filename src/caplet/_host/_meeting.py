"""Where every caplet process of one user meets its peers, whatever its HOME (attack24).

attack22 gave each host a beacon in the user's platform state directory's
``run`` folder, which ``HOME`` and ``XDG_STATE_HOME`` name: a process run with
``HOME=/tmp/x`` (``sudo -H``, a service unit, ``env -i``) or one whose home it
cannot write met nobody there, and the user's ``caplet`` granted ``fs.write``
over the folder that process imports from. Each host now also keeps a beacon
in a folder named by its uid alone, ``caplet-<uid>``, in every *base* that
exists: ``/run/user/<uid>`` (made by the system for a login session) and
``/tmp``. Both, not the first that exists: a service without a session (cron,
a unit) has no ``/run/user/<uid>``, one with a private ``/tmp`` sees another
``/tmp``, and two hosts meet where they have one in common.

``/tmp`` is every user's, so the folder may be there before the user's first
host, made by someone else (a folder of theirs, a link to one, a folder others
may write) to read or forge what the hosts publish. It is made with mkdir(2)
and opened once, without following a link, relative to the base's descriptor;
its owner and mode are checked on that descriptor, and every later use goes
through it (``/proc/self/fd/N``), so a name is never checked and then opened
again. A base others may write must be sticky (no one else can rename or
remove the folder in it). A folder that fails is not used, and the host says
why (:attr:`Meeting.refusal`); one that cannot be made anywhere leaves the
host unseen by the others, which :mod:`caplet._host._manager_enable` refuses
to share grants from (a fail-safe, attack24).

A folder someone else made first at that name no longer leaves the user's hosts
unseen (attack24's local denial of service: every ``fs.write`` and ``proc.exec``
refused): the hosts meet in the first of ``caplet-<uid>.1`` ... ``.63`` that is
the user's own, the same one for every host. Each host takes, in that order, the
first folder that already exists and passes the checks, and only when none does,
makes the first name that is free: ``mkdir`` is atomic, so two hosts starting at
once make one folder, and a host started after someone removed the planted folder
still joins the others where they are. Another user cannot make a folder that
passes (it would be theirs); one who plants all 64 names leaves the host unseen,
the fail-safe, naming them.

Which name a host took no longer matters to whom it meets (attack28: another user
who plants ``caplet-<uid>`` and removes it while two hosts start sends one to ``.1``
and the other, making the first free name a moment later, to ``caplet-<uid>``; a
folder of the user's made private again after a host passed it over does the same).
A host *publishes* in one folder but *reads* its peers from every folder of the
user's own among the 64 names of every base, looked at again at each read
(:func:`meeting_places`: a folder made after the host started is read too), and
takes the publication lock of every one of them (:mod:`caplet._host._run_dir`). A
name that is nobody's folder, a link, a file or another user's folder holds no host
of the user's and is passed over. A folder of the user's own that cannot be read
(no permission), or that others may write (what a host published there could have
been changed or hidden), cannot be checked: the enables that other processes would
have to know about are refused, naming it (:attr:`MeetingPlaces.unchecked`).

``CAPLET_TEST_PEER_BASES`` (test-only, like ``CAPLET_TEST_CRASH_AT``) replaces
the bases, a ``:``-separated list, so that the suite's hosts meet only each
other: the folder in it is checked the same way.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PEER_BASES_ENV",
    "Meeting",
    "MeetingPlaces",
    "meeting_bases",
    "meeting_places",
    "open_meetings",
]

#: Test-only: the bases the meeting folders are made in (module docstring).
PEER_BASES_ENV = "CAPLET_TEST_PEER_BASES"

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Meeting:
    """One base's meeting folder: open (``fd`` >= 0), or why not (``refusal``)."""

    #: The folder as named (``/tmp/caplet-1000``), for messages and the grant guard.
    name: Path
    fd: int = -1
    #: Why the folder is not used ("" when it is, or when its base does not exist).
    refusal: str = ""
    #: Why the names before the one used were passed over (someone else's folder at
    #: ``caplet-<uid>``): for a warning, and guarded like the folder used.
    passed_over: tuple[tuple[Path, str], ...] = ()

    @property
    def path(self) -> Path:
        """The folder reached through its checked descriptor, never by its name again."""
        return Path(f"/proc/self/fd/{self.fd}")


def meeting_bases() -> tuple[Path, ...]:
    """The bases a meeting folder is made in (module docstring)."""
    override = os.environ.get(PEER_BASES_ENV, "")
    if override:
        return tuple(Path(part) for part in override.split(os.pathsep) if part)
    # /tmp by its name, not TMPDIR: every process of the user must name the same one.
    return (Path(f"/run/user/{os.geteuid()}"), Path("/tmp"))  # noqa: S108 (checked by fd)


#: The names a meeting folder may have after ``caplet-<uid>`` (module docstring).
_ALTERNATES = 63


def _names() -> tuple[str, ...]:
    """``caplet-<uid>`` and its alternates, in the order a host tries them."""
    name = f"caplet-{os.geteuid()}"
    return (name, *(f"{name}.{number}" for number in range(1, _ALTERNATES + 1)))


def open_meetings(bases: tuple[Path, ...]) -> tuple[Meeting, ...]:
    """Each base's meeting folder, made when missing and checked (module docstring)."""
    names = _names()
    return tuple(_open_base(base, names) for base in bases)


@dataclass(frozen=True, slots=True)
class MeetingPlaces:
    """Every meeting name of every base as it is now (:func:`meeting_places`)."""

    #: The folders of the user's own (0700, not a link), open: any host of the user may
    #: have its beacon in any of them.
    folders: tuple[Meeting, ...] = ()
    #: A folder of the user's own that cannot be checked, each "<folder> <why and fix>".
    unchecked: tuple[str, ...] = ()
    #: Every name that is there (anyone's, anything): guarded like caplet's state.
    present: tuple[Path, ...] = ()


@contextmanager
def meeting_places(bases: tuple[Path, ...]) -> Iterator[MeetingPlaces]:
    """Every meeting name of each of ``bases`` (the host's, :func:`meeting_bases` when it
    started) looked at now, without following a link: the
    user's own folders open for the block (reached through ``Meeting.path``), and
    closed after it. About 64 ``faccessat`` calls a base (no base is listed: ``/tmp`` may
    hold any number of names), and an ``openat`` of each name that is there."""
    folders: list[Meeting] = []
    unchecked: list[str] = []
    present: list[Path] = []
    try:
        names = _names()
        for base in bases:
            _look_at_base(base, names, folders, unchecked, present)
        yield MeetingPlaces(tuple(folders), tuple(unchecked), tuple(present))
    finally:
        for folder in folders:
            os.close(folder.fd)


def _look_at_base(
    base: Path,
    names: tuple[str, ...],
    folders: list[Meeting],
    unchecked: list[str],
    present: list[Path],
) -> None:
    try:
        base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # no such base here: no host meets in it
    try:
        problem = _base_problem(os.fstat(base_fd))
        if problem:
            for path, why in _look_at_refused_base(base_fd, base, problem, names):
                present.append(path)
                if why:
                    unchecked.append(f"{path} {why}")
            return
        if not os.access(".", os.F_OK, dir_fd=base_fd):
            # Not searchable: every name below would look missing (faccessat(2), EACCES).
            unchecked.append(
                f"{base} cannot be searched by you, so no meeting folder in it can be "
                "checked; have its mode fixed"
            )
            return
        for name in names:
            fd, why, there = _look(base_fd, name)
            if there:
                present.append(base / name)
            if fd >= 0:
                folders.append(Meeting(base / name, fd))
            elif why:
                unchecked.append(f"{base / name} {why}")
    finally:
        os.close(base_fd)


def _look_at_refused_base(
    base_fd: int, base: Path, problem: str, names: tuple[str, ...]
) -> list[tuple[Path, str]]:
    """Each name there in a base no host makes a beacon in now (:func:`open_meetings`
    refuses it), with why it cannot be checked ("" when it holds no host of the
    user's). A folder of the user's there was made before the base changed, and may
    hold a host's beacon that anyone could since have renamed away."""
    found: list[tuple[Path, str]] = []
    for name in names:
        try:
            info = os.stat(name, dir_fd=base_fd, follow_symlinks=False)
        except OSError:
            continue
        mine = stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
        found.append(
            (
                base / name,
                f"lies in {base}, which {problem}: anyone may have moved what a caplet "
                "process published there, so it cannot be checked; have the base fixed or "
                "remove the folder (rm -r)"
                if mine
                else "",
            )
        )
    return found


def _look(base_fd: int, name: str) -> tuple[int, str, bool]:
    """``name`` in the base: (its fd, "", True) when it is a folder of the user's own
    that passes the checks; (-1, why, True) when it is one that cannot be checked;
    (-1, "", there) when it holds no host of the user's (missing, a link, a file,
    someone else's folder)."""
    # Most names are missing: asked without raising (a failed open costs three times
    # as much, and an enable looks at every name a few times).
    if not os.access(name, os.F_OK, dir_fd=base_fd, follow_symlinks=False):
        return -1, "", False
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=base_fd)
    except FileNotFoundError:
        return -1, "", False
    except OSError as exc:
        # Which it is, asked of the name without following it: a link or another user's
        # folder is passed over, a folder of the user's that cannot be opened is not.
        try:
            info = os.stat(name, dir_fd=base_fd, follow_symlinks=False)
        except FileNotFoundError:
            return -1, "", False
        except OSError as again:
            return -1, _UNSEEN_NAME.format(why=again.strerror), True
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return -1, "", True
        return -1, _cannot_look(exc.strerror), True
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return -1, _cannot_look(exc.strerror), True
    if info.st_uid != os.geteuid():
        os.close(fd)
        return -1, "", True
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        # The user's own, so perhaps where a host met the others before it was opened up;
        # anyone may now have changed, added or removed what that host published.
        os.close(fd)
        return -1, _OPEN_TO_OTHERS.format(mode=mode), True
    return fd, "", True


_OPEN_TO_OTHERS = (
    "is a folder of yours that others may write (mode {mode:04o}): what a caplet process "
    "published there may have been changed or hidden, so it cannot be checked; end the "
    "caplet processes of this user, then remove it (rm -r)"
)
_UNSEEN_NAME = (
    "cannot be looked at ({why}), so what a caplet process published there cannot be "
    "checked; have it removed"
)


def _cannot_look(why: str | None) -> str:
    """Why a folder of the user's own is not read, and the fix."""
    return (
        f"is a folder of yours that caplet cannot look into ({why}), so what a caplet "
        "process published there cannot be checked; make it readable (chmod 700) or "
        "remove it (rm -r)"
    )


def _open_base(base: Path, names: tuple[str, ...]) -> Meeting:
    folder = base / names[0]
    try:
        base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return Meeting(folder)  # no such base here (no login session): not a failure
    try:
        problem = _base_problem(os.fstat(base_fd))
        if problem:
            return Meeting(folder, refusal=f"{base} {problem}")
        passed: list[tuple[Path, str]] = []
        # The first of the user's own that exists, then the first name that is free.
        for make in (False, True):
            passed = []
            for name in names:
                fd, why = _open(base_fd, name, make=make)
                if fd >= 0:
                    return Meeting(base / name, fd, passed_over=tuple(passed))
                if why:
                    passed.append((base / name, why))
        refusal = "; ".join(f"{path} {why}" for path, why in passed[:3])
        return Meeting(
            folder,
            refusal=f"{refusal} (and {len(passed) - 3} more names like it)"
            if len(passed) > 3
            else refusal,
            passed_over=tuple(passed),
        )
    except OSError as exc:
        return Meeting(folder, refusal=f"{folder} cannot be made ({exc.strerror})")
    finally:
        os.close(base_fd)


def _open(base_fd: int, name: str, *, make: bool) -> tuple[int, str]:
    """``name`` in the base opened and checked: (its fd, "") when it is the user's own,
    (-1, why) when something else is there, (-1, "") when nothing is (and ``make`` is
    false). OSError when the folder cannot be made."""
    if make:
        try:
            os.mkdir(name, 0o700, dir_fd=base_fd)
        except FileExistsError:
            pass
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=base_fd)
    except FileNotFoundError:
        return -1, ""
    except OSError as exc:
        return -1, (
            f"is no folder of its own, a symbolic link or a file ({exc.strerror}); whoever "
            "made it may read or forge what caplet publishes there: have it removed"
        )
    problem = _folder_problem(os.fstat(fd))
    if problem:
        os.close(fd)
        return -1, problem
    return fd, ""


def _base_problem(info: os.stat_result) -> str:
    """Why a base cannot hold the folder ("" when it can): one others may write must be
    sticky, so that nobody but the folder's owner (and root) renames or removes it."""
    if info.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {info.st_uid}, neither you nor root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return f"may be written by others and is not sticky (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def _folder_problem(info: os.stat_result) -> str:
    """Why the opened folder is not this user's private one ("" when it is). A folder
    someone else made, or one others could write into, may hold what they put there
    (a FIFO for a peer's grants.json holds every enable that reads it)."""
    if info.st_uid != os.geteuid():
        return (
            f"belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): another user made "
            "it before your first caplet process; have it removed (as root)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return f"has mode {mode:04o}: others may have put files in it; remove it (rm -r)"
    return ""
