"""Crash-safe file replacement: write a temporary file, fsync, rename, fsync the directory.

rename(2) replaces the target atomically, so a reader sees the old or the
new content and never a torn file; the fsync of the file before the rename
and of the directory after it make the new content (and the new directory
entry) durable, so a power cut cannot leave an empty file behind the new
name (the ext4 "zero-length file" problem, see the rename(2) and fsync(2)
man pages). Every state file caplet writes outside SQLite goes through
:func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_write", "exclusive_lock", "fsync_directory"]


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
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        temp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    fsync_directory(directory)


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
