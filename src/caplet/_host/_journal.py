"""The update journal: what makes an interrupted update roll back (or forward) on the next start.

An update (:mod:`caplet._host._update`) changes three things that no single
operation can change together: the plugin folder, the approval in the state
database, and the entry in ``caplet.lock``. Before each step it records in
``<state dir>/updates/<plugin>.json`` (written atomically) where it is and
everything needed to undo it: the old and new digests, the old and new
approval records and lock entries, and the work folder that holds the staged
new version and the old one once it has been moved out.

:func:`recover` runs at every discovery. An update whose process died (its
flock(2) on ``<plugin>.lock`` is gone with it, even after SIGKILL) is
finished the only safe way: rolled forward when it had committed (the new
version passed its health check), rolled back otherwise, so the plugin is
the old or the new version, consistent with the store and the lock file.
Every recovery step is idempotent, so dying during recovery is fine too.

``CAPLET_TEST_CRASH_AT=<step>`` (test-only, like ``CAPLET_TEST_DISABLE_LAYERS``)
makes the updating process SIGKILL itself at that point, so the tests can
prove the claim above for every step with a real process.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import shutil
import signal
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from caplet._atomic import atomic_write, exclusive_lock, fsync_directory
from caplet._errors import StoreError, UpdateError
from caplet._logs import caplet_logger
from caplet._trust._lockfile import LockEntry, update_lockfile
from caplet._trust._paths import ensure_private_dir
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._store import ApprovalRecord, TrustStore

__all__ = [
    "CRASH_ENV",
    "JOURNAL_DIR",
    "Recovery",
    "UpdateJournal",
    "UpdateStep",
    "check_journals",
    "crash_point",
    "holding_update_lock",
    "new_work_dir",
    "recover",
    "remove_journal",
    "remove_work_dir",
    "restore",
    "through",
    "write_journal",
]

logger = caplet_logger()

JOURNAL_DIR = "updates"
#: Test-only fault injection: the update SIGKILLs itself at the named crash point.
CRASH_ENV = "CAPLET_TEST_CRASH_AT"


class UpdateStep(enum.Enum):
    """Where an update is; everything before ``COMMITTED`` is rolled back on recovery."""

    STAGING = "staging"  # the new version is being copied; the plugin is untouched
    STAGED = "staged"  # staged, validated, audited, consented; the plugin is untouched
    SWAPPING = "swapping"  # the old folder is being moved out and the new one in
    SWAPPED = "swapped"  # the new folder is in place; store and lock being rewritten
    RECORDED = "recorded"  # store and lock pin the new version; health check next
    COMMITTED = "committed"  # healthy: only clean-up is left


@dataclass(frozen=True, slots=True)
class UpdateJournal:
    """Everything needed to finish or undo one update (see the module docstring)."""

    plugin: str
    step: UpdateStep
    plugin_dir: str
    work_dir: str
    old_digest: str
    new_digest: str = ""
    old_approval: ApprovalRecord | None = None
    new_approval: ApprovalRecord | None = None
    lockfile: str | None = None
    old_entry: LockEntry | None = None
    new_entry: LockEntry | None = None

    @property
    def backup_dir(self) -> Path:
        return Path(self.work_dir) / "old" / self.plugin

    def at(self, step: UpdateStep) -> UpdateJournal:
        return replace(self, step=step)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What recovery did to one interrupted update."""

    plugin: str
    step: UpdateStep
    rolled_forward: bool


_ADAPTER: TypeAdapter[UpdateJournal] = TypeAdapter(UpdateJournal)


def _directory(state_dir: Path) -> Path:
    return state_dir / JOURNAL_DIR


def _journal_path(state_dir: Path, plugin: str) -> Path:
    return _directory(state_dir) / f"{plugin}.json"


def crash_point(name: str) -> None:
    """Test-only: SIGKILL this process when ``CAPLET_TEST_CRASH_AT`` names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def write_journal(state_dir: Path, journal: UpdateJournal) -> None:
    """Record *journal* durably before the step it names is taken."""
    path = _journal_path(state_dir, journal.plugin)
    ensure_private_dir(path.parent)
    try:
        atomic_write(path, _ADAPTER.dump_json(journal), mode=0o600)
    except OSError as exc:
        raise UpdateError(
            f"cannot write the update journal {path} ({exc.strerror}); nothing was changed "
            "beyond this step; check the state directory's free space and permissions"
        ) from exc


def remove_journal(state_dir: Path, plugin: str) -> None:
    """Forget a finished update (missing is fine)."""
    path = _journal_path(state_dir, plugin)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_directory(path.parent)


def _read_journal(path: Path) -> UpdateJournal:
    try:
        return _ADAPTER.validate_json(path.read_bytes(), strict=True)
    except (OSError, ValidationError) as exc:
        raise StoreError(
            f"update journal {path} cannot be read ({exc}); the update of "
            f"{path.stem!r} was interrupted and cannot be finished automatically: check that "
            f"{path.stem!r} in the plugins directory is the version you want, re-approve it, "
            "then delete the journal"
        ) from exc


@contextlib.contextmanager
def holding_update_lock(state_dir: Path, plugin: str, *, blocking: bool) -> Iterator[bool]:
    """Hold the per-plugin update lock; yields False if another live process holds it."""
    directory = ensure_private_dir(_directory(state_dir))
    with exclusive_lock(directory / f"{plugin}.lock", blocking=blocking) as held:
        yield held


# -- the work folder --------------------------------------------------------------------
#
# It is a name in the plugins directory (a rename must stay on one file system), so
# whoever can write that directory can put a link there, or rename the folder and put
# a link in its place while an update runs: mkdir(parents=True, exist_ok=True) and
# every later path through it followed the link, and a root host wrote the staged and
# the old version into any directory (attack14). So the folder is made new by this
# process, opened once without following a link, and reached through that descriptor
# (``/proc/self/fd/N``) for the rest of the update and for a recovery.


def _open_work_dir(path: Path) -> int | None:
    """A descriptor of the work folder if it is a directory of this user's, reached
    without following a link; None for anything else (nothing of it is touched)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        raise
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        return None
    return fd


def remove_work_dir(path: Path) -> None:
    """Remove what is at the work folder's name; a link there is removed, not followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)  # fd-based: never follows a link inside
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def new_work_dir(path: Path) -> int:
    """Make the work folder anew (whatever had its name removed) and return a descriptor
    of it: the folder this process made, empty, whatever happens to the name later."""
    remove_work_dir(path)
    try:
        path.mkdir(mode=0o700)
    except OSError as exc:
        raise UpdateError(
            f"cannot make the update's work folder {path} ({exc.strerror}); check that the "
            "plugins directory is writable and nothing else is updating the plugin"
        ) from exc
    fd = _open_work_dir(path)
    if fd is not None and not any(through(fd).iterdir()):
        return fd
    if fd is not None:
        os.close(fd)
    raise UpdateError(
        f"the update's work folder {path} was replaced while it was made (another process "
        "writes the plugins directory); nothing was changed; find out who, then update again"
    )


def through(fd: int) -> Path:
    """The folder open as ``fd``, as a path no rename or link of its name can redirect."""
    return Path(f"/proc/self/fd/{fd}")


def _rename(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)
    fsync_directory(target.parent)
    if source.parent != target.parent:
        fsync_directory(source.parent)


def restore(journal: UpdateJournal, store: TrustStore, *, work_fd: int | None = None) -> None:
    """Undo *journal*'s update: the old folder back in place, the old approval and lock entry.

    ``work_fd`` is the work folder the running update made (:func:`new_work_dir`); a
    recovery opens it by name, never through a link. Idempotent: it may run again
    after dying half-way.
    """
    live = Path(journal.plugin_dir)
    fd = work_fd if work_fd is not None else _open_work_dir(Path(journal.work_dir))
    if fd is not None:
        try:
            work = through(fd)
            backup = work / "old" / journal.plugin
            if backup.is_dir():
                # The old folder was moved out: whatever is in its place is the new one.
                if live.exists() or live.is_symlink():
                    _rename(live, work / "discard" / journal.plugin)
                _rename(backup, live)
        finally:
            if work_fd is None:
                os.close(fd)
    if journal.step in (UpdateStep.SWAPPED, UpdateStep.RECORDED, UpdateStep.COMMITTED):
        if journal.old_approval is not None:
            store.put_approval(journal.old_approval)
        elif journal.new_approval is not None:
            store.delete_approval(journal.plugin)
        if journal.lockfile is not None and journal.new_entry is not None:
            old = journal.old_entry
            update_lockfile(
                Path(journal.lockfile),
                lambda lock: lock.with_entry(old) if old else lock.without(journal.plugin),
            )
    remove_work_dir(Path(journal.work_dir))


def finish(journal: UpdateJournal, store: TrustStore) -> None:
    """Complete a committed update: the new records (again, idempotently), then clean up."""
    if journal.new_approval is not None:
        store.put_approval(journal.new_approval)
    if journal.lockfile is not None and journal.new_entry is not None:
        new = journal.new_entry
        update_lockfile(Path(journal.lockfile), lambda lock: lock.with_entry(new))
    remove_work_dir(Path(journal.work_dir))


def check_journals(state_dir: Path) -> tuple[StateProblem, ...]:
    """The journals' part of ``caplet doctor --check-state``; changes nothing.

    An interrupted update is a warning, not damage: the next discovery
    finishes it (:func:`recover`), so the report says how to trigger that.
    A journal that cannot be read is damage: recovery would stop on it.
    An update running in another process right now is left alone and
    reported as such.
    """
    directory = _directory(state_dir)
    if not directory.is_dir():
        return ()
    problems: list[StateProblem] = []
    for path in sorted(directory.glob("*.json")):
        plugin = path.stem
        with holding_update_lock(state_dir, plugin, blocking=False) as held:
            if not path.exists():
                continue  # finished while we looked
            if not held:
                problems.append(
                    StateProblem(
                        kind=ProblemKind.UNFINISHED_UPDATE,
                        path=str(path),
                        message=(
                            f"update journal {path}: plugin {plugin!r} is being updated by "
                            "another caplet process right now; check again when it has finished"
                        ),
                    )
                )
                continue
            try:
                journal = _read_journal(path)
            except StoreError as exc:
                problems.append(
                    StateProblem(kind=ProblemKind.JOURNAL, path=str(path), message=str(exc))
                )
                continue
        how = "rolls it forward" if journal.step is UpdateStep.COMMITTED else "rolls it back"
        problems.append(
            StateProblem(
                kind=ProblemKind.UNFINISHED_UPDATE,
                path=str(path),
                message=(
                    f"update journal {path}: the update of plugin {plugin!r} was interrupted "
                    f"at step {journal.step.value}; the next caplet command that discovers "
                    f"plugins {how}: run `caplet list --plugins-dir "
                    f"{Path(journal.plugin_dir).parent} --state-dir {state_dir}`"
                ),
            )
        )
    return tuple(problems)


def recover(state_dir: Path, store: TrustStore) -> list[Recovery]:
    """Finish every update whose process died; live updates of other processes are left alone."""
    directory = _directory(state_dir)
    if not directory.is_dir():
        return []
    done: list[Recovery] = []
    for path in sorted(directory.glob("*.json")):
        plugin = path.stem
        with holding_update_lock(state_dir, plugin, blocking=False) as held:
            if not held or not path.exists():
                continue
            journal = _read_journal(path)
            forward = journal.step is UpdateStep.COMMITTED
            try:
                if forward:
                    finish(journal, store)
                else:
                    restore(journal, store)
            except OSError as exc:
                raise UpdateError(
                    f"cannot finish the interrupted update of {plugin!r} ({exc}); the journal "
                    f"{path} is kept, fix the cause (permissions, free space) and run caplet again"
                ) from exc
            remove_journal(state_dir, plugin)
            logger.warning(
                "the update of plugin %s was interrupted at step %s; %s",
                plugin,
                journal.step.value,
                "finished it (rolled forward)" if forward else "rolled it back",
            )
            done.append(Recovery(plugin=plugin, step=journal.step, rolled_forward=forward))
    return done
