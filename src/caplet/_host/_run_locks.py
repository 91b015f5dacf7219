"""The run directories' lock files: who is alive, and sweeping the dead hosts' litter.

Each host holds an ``flock(2)`` on a lock file beside its run directory (or a
beacon) for as long as it lives (:mod:`caplet._host._run_dir`): the kernel
releases it when its holder dies, so a lock that can be taken is a dead host's
and its directory may be removed, and one that cannot is a live peer's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path

from caplet._errors import PluginTreeError
from caplet._trust._snapshot import remove_snapshot

__all__ = ["LOCK", "PREFIX", "alive", "entry_identity", "locked_lock_file", "make_beacon", "sweep"]

#: A run directory's (or a beacon's) name begins so; its lock file is its name + LOCK.
PREFIX = "caplet-run-"
LOCK = ".lock"


def entry_identity(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    """A lock file's device and inode; None when it is no regular file of this user's
    (another user's, made while a meeting folder was open to others: no host of this
    user holds it)."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return None
    return st.st_dev, st.st_ino


def make_beacon(parent: Path) -> tuple[Path, int]:
    """A beacon (a folder beside a locked lock file) in ``parent``, the dead hosts' swept
    first: (its path, its lock's fd). OSError when it cannot be made."""
    sweep(parent)
    fd, lock = locked_lock_file(parent)
    beacon = Path(lock[: -len(LOCK)])
    try:
        beacon.mkdir(mode=0o700)
    except OSError:
        os.close(fd)
        Path(lock).unlink(missing_ok=True)
        raise
    return beacon, fd


#: Lock files made before one stays ours (each lost to a sweep that ran between its
#: creation and its lock: another host starting in the same instant).
_LOCK_ATTEMPTS = 16


def locked_lock_file(parent: Path) -> tuple[int, str]:
    """A new lock file under ``parent``, locked, still under its name: (its fd, its path).

    mkstemp makes the file unlocked, and another host's :func:`sweep` in that instant
    takes its lock and unlinks it as a dead host's: the lock then held a file no name
    reached, so this host was invisible to its peers' grant checks (round 4's write
    then run across two hosts) and its directory never swept after a crash (two hosts
    started together, found by a flaky test under load). So the lock is taken without
    waiting, and the name must still reach the same file once it is held (a sweep
    unlinks only while holding it); otherwise another name is made. Raises
    :class:`OSError` when every attempt was lost.
    """
    for _ in range(_LOCK_ATTEMPTS):
        fd, lock = tempfile.mkstemp(prefix=PREFIX, suffix=LOCK, dir=parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.fstat(fd)
            named = os.lstat(lock)
        except BlockingIOError:
            os.close(fd)  # a sweep holds it and is unlinking it
            continue
        except FileNotFoundError:
            os.close(fd)  # swept before the lock was taken
            continue
        except OSError:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
            return fd, lock
        os.close(fd)  # the name now reaches another file: not ours to remove
    raise OSError(errno.EAGAIN, "every lock file made was taken by another host's sweep")


def sweep(parent: Path) -> None:
    """Remove the run directories of hosts that are gone (their lock is free)."""
    try:
        locks = [entry for entry in os.scandir(parent) if entry.name.endswith(LOCK)]
    except OSError:
        return
    for entry in locks:
        # Only a regular file of this user's: a meeting folder once open to others may
        # hold another user's, or a FIFO that would hold this host's start at open(2).
        if not entry.name.startswith(PREFIX) or entry_identity(entry) is None:
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            remove_snapshot(Path(entry.path[: -len(LOCK)]))
            Path(entry.path).unlink(missing_ok=True)
        except (OSError, PluginTreeError):
            continue  # alive (the lock is held), or not removable now: a later host tries
        finally:
            os.close(fd)


def alive(lock: str) -> bool:
    """Whether the host owning the run directory of ``lock`` still holds its lock."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases a lock taken just now: that host is gone
    return False
