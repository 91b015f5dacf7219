"""The host's run directory: snapshots and work directories, where no grant reaches.

Issue 13, point 4. Snapshots used to live under ``tempfile.gettempdir()``;
with ``TMPDIR`` inside some plugin's ``fs.write`` grant, that plugin
rewrote a module another plugin imported. They now live in
``<state dir>/run/caplet-run-*``: enable refuses any grant inside the state
directory and any writable grant containing it, and a read grant containing
it gets it hidden (:mod:`caplet._host._grant_check`), so no worker can reach
a snapshot by any path. The directory is private (0700) and its snapshots
read-only; a worker of a root host runs as another uid and could not change
them even if it could reach them.

A host killed with SIGKILL cannot remove its run directory. Each one holds
an ``flock(2)`` on a lock file beside it (``caplet-run-XXXX.lock``, made
and locked before the directory exists) for as long as the host lives, so
the next host removes every run directory whose lock it can take: the lock
is released by the kernel when its holder dies, whatever its pid is reused
for, and a directory whose host is still starting is never taken for litter.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

from caplet._errors import PluginTreeError, StoreError
from caplet._trust._paths import ensure_private_dir
from caplet._trust._snapshot import remove_snapshot

__all__ = ["RUN_SUBDIR", "RunDir"]

#: The state directory's subdirectory holding every host's run directory.
RUN_SUBDIR = "run"
_PREFIX = "caplet-run-"
_LOCK = ".lock"


class RunDir:
    """One host's private run directory under ``<state dir>/run``; removed by :meth:`close`."""

    __slots__ = ("_lock", "_lock_fd", "path")

    def __init__(self, state_dir: Path) -> None:
        try:
            parent = ensure_private_dir(ensure_private_dir(state_dir) / RUN_SUBDIR)
            _sweep(parent)
            self._lock_fd, lock = tempfile.mkstemp(prefix=_PREFIX, suffix=_LOCK, dir=parent)
        except OSError as exc:
            raise StoreError(
                f"cannot create caplet's run directory under {state_dir / RUN_SUBDIR} "
                f"({exc.strerror}); check that the state directory is writable"
            ) from exc
        self._lock = Path(lock)
        self.path = self._lock.with_name(self._lock.name[: -len(_LOCK)])
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.path.mkdir(mode=0o700)
        except OSError as exc:
            os.close(self._lock_fd)
            self._lock.unlink(missing_ok=True)
            raise StoreError(
                f"cannot create caplet's run directory {self.path} ({exc.strerror}); check "
                "that the state directory is writable"
            ) from exc

    def close(self) -> None:
        """Remove the directory and everything in it, then its lock; idempotent."""
        if self._lock_fd < 0:
            return
        try:
            remove_snapshot(self.path)
            self._lock.unlink(missing_ok=True)
        finally:
            os.close(self._lock_fd)
            self._lock_fd = -1


def _sweep(parent: Path) -> None:
    """Remove the run directories of hosts that are gone (their lock is free)."""
    try:
        locks = [entry for entry in os.scandir(parent) if entry.name.endswith(_LOCK)]
    except OSError:
        return
    for entry in locks:
        if not entry.name.startswith(_PREFIX):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            remove_snapshot(Path(entry.path[: -len(_LOCK)]))
            Path(entry.path).unlink(missing_ok=True)
        except (OSError, PluginTreeError):
            continue  # alive (the lock is held), or not removable now: a later host tries
        finally:
            os.close(fd)
