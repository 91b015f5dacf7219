"""Crash-safe file replacement: write a temporary file, fsync, rename, fsync the directory.

rename(2) replaces the target atomically, so a reader sees the old or the
new content and never a torn file; the fsync of the file before the rename
and of the directory after it make the new content (and the new directory
entry) durable, so a power cut cannot leave an empty file behind the new
name (the ext4 "zero-length file" problem, see the rename(2) and fsync(2)
man pages). Every state file caplet writes outside SQLite goes through
:func:`atomic_write`; :func:`leftover_temp_files` finds the temporary files
of writes that were killed half-way (``caplet doctor --check-state``).

Test-only fault injection, inert unless set (both are read once, at import,
so the production path costs one comparison per step):
``CAPLET_TEST_KILL_AT_WRITE=N`` makes the process SIGKILL itself at its Nth
*state write step*, and ``CAPLET_TEST_WRITE_TRACE=FILE`` appends one line
naming each step to FILE (so a test can count the steps of an operation,
then kill it at each). The steps are the boundaries of
:func:`atomic_write` and of every SQLite write transaction
(:mod:`caplet._trust._sqlite`), all reported through :func:`write_step`,
the one place that reads these variables. The crash tests use them to prove
that a ``kill -9`` anywhere leaves the old or the new state, never a third.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "KILL_AT_WRITE_ENV",
    "WRITE_TRACE_ENV",
    "NotRegularFileError",
    "atomic_write",
    "exclusive_lock",
    "fsync_directory",
    "leftover_temp_files",
    "read_regular",
    "write_step",
]

#: Test-only: SIGKILL this process at its Nth state write step (see the module docstring).
KILL_AT_WRITE_ENV = "CAPLET_TEST_KILL_AT_WRITE"
#: Test-only: append the label of every state write step to this file.
WRITE_TRACE_ENV = "CAPLET_TEST_WRITE_TRACE"


def _kill_at_from_environment() -> int | None:
    text = os.environ.get(KILL_AT_WRITE_ENV, "")
    return int(text) if text.isdecimal() and int(text) > 0 else None


_KILL_AT = _kill_at_from_environment()
_TRACE = os.environ.get(WRITE_TRACE_ENV) or None
_steps = 0

#: The names :func:`atomic_write` gives its temporary files: ``.<target>.<8 random>.tmp``
#: (tempfile's random part is 8 characters of ``[a-z0-9_]``).
_TEMP_PREFIX = "."
_TEMP_SUFFIX = ".tmp"
_TEMP_RE = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")


def write_step(label: str) -> None:
    """Mark one state write step; test-only fault injection hooks in here.

    Does nothing unless ``CAPLET_TEST_KILL_AT_WRITE`` or
    ``CAPLET_TEST_WRITE_TRACE`` was set when caplet was imported.
    """
    global _steps
    if _KILL_AT is None and _TRACE is None:
        return
    _steps += 1
    if _TRACE is not None:
        fd = os.open(_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{_steps} {label}\n".encode())
        finally:
            os.close(fd)
    if _steps == _KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_directory(directory: Path) -> None:
    """fsync(2) a directory so that renames and unlinks in it are durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace *path* with *data* atomically and durably, with permission bits *mode*.

    The temporary file is created next to *path* (a rename cannot cross file
    systems) with ``O_EXCL`` and mode 0600 by :func:`tempfile.mkstemp`, so
    nobody else can open it while it is being written. Raises ``OSError``;
    callers translate it into their own :class:`~caplet._errors.CapletError`.
    """
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(
        prefix=f"{_TEMP_PREFIX}{path.name}.", suffix=_TEMP_SUFFIX, dir=directory
    )
    temp = Path(temp_name)
    try:
        write_step(f"atomic_write {path}: temporary file created")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        write_step(f"atomic_write {path}: temporary file written and synced")
        temp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    write_step(f"atomic_write {path}: renamed into place")
    fsync_directory(directory)
    write_step(f"atomic_write {path}: directory synced")


def leftover_temp_files(directory: Path, target: str | None = None) -> list[Path]:
    """Temporary files :func:`atomic_write` left in *directory* (of *target* only, if given).

    A write that was killed between creating its temporary file and the
    rename leaves it behind; the file it was replacing is intact (old
    content), so deleting the leftover is always safe once no caplet process
    is writing. A missing directory has none. Sorted by name.
    """
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if entry.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = _TEMP_RE.fullmatch(name)
        if match and (target is None or match.group("target") == target):
            found.append(directory / name)
    return found


@contextlib.contextmanager
def exclusive_lock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive flock(2) on *path* (created 0600 if missing) for the block.

    Yields False (without the lock) when *blocking* is False and another
    process holds it. The kernel drops the lock when its holder dies, even
    by SIGKILL, so a crashed process never leaves a stale lock behind.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


class NotRegularFileError(OSError):
    """:func:`read_regular` found a link, a FIFO, a device, a socket or a folder."""


#: O_NOFOLLOW: a name checked with lstat (or not checked) may be swapped for a
#: link before it is opened, and a root host would read any file through it;
#: O_NONBLOCK: or for a FIFO, which would hold the reader at open(2)
#: (attack10). What the file is, is asked of the descriptor that is read.
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def read_regular(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path``, which must be a regular file.

    The one way caplet reads a small file that someone else may control (a
    manifest, a plugin's signature, a trusted key): opened once without
    following a last-component link or waiting on a FIFO, checked on that
    descriptor, read with a bound. One byte past ``limit`` tells the caller
    the file is too large. Raises :class:`NotRegularFileError` for anything
    but a regular file, and ``OSError`` when it cannot be opened.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a link (open(2), O_NOFOLLOW)
            raise NotRegularFileError(errno.ELOOP, "a symbolic link", str(path)) from None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:  # asked before fdopen, which refuses a folder with its own error
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, "not a regular file", str(path))
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit + 1)
