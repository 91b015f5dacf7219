"""``caplet doctor --check-state``: is caplet's persistent state whole and readable?

After a crash, a ``kill -9``, a full disk or a hand edit, an administrator
(or a deployment script, or an embedding application at start-up) needs to
know whether the state is one caplet can trust. :func:`check_state` runs
every check without changing anything that matters: the state database
(:meth:`caplet._trust._sqlite.SqliteStore.check`), the trusted keys, update
journals left by interrupted updates, the lock file, and the temporary
files of atomic writes that were killed half-way. Each part checks itself
where its format is defined; this module only decides where to look.

It writes nothing but what opening the store writes anyway (a missing WAL
index, the migration of an older schema), and never creates a state
directory or database that does not exist yet: no database is healthy.

With a shared store (``CAPLET_STORE=postgresql://…``, issue 18) the
database checked is the server's
(:meth:`caplet._trust._postgres.PostgresStore.check`: schema version,
tables and columns, every record); a server that cannot be reached is an
``unreachable`` problem. The node-local parts (keys, journals, temporary
files, the lock file) are checked in the state directory as always.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from caplet._atomic import leftover_temp_files
from caplet._errors import StoreError
from caplet._host._journal import JOURNAL_DIR, check_journals
from caplet._trust._keyring import KEYRING_DIR, Keyring
from caplet._trust._lockfile import check_lockfile
from caplet._trust._open import describe_store, sqlite_directory, store_address
from caplet._trust._paths import default_state_dir
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._sqlite import DB_FILENAME, SqliteStore

__all__ = ["StateReport", "check_state"]


@dataclass(frozen=True, slots=True)
class StateReport:
    """What :func:`check_state` found; truthy when nothing is damaged.

    ``database`` is ``None`` when the state directory holds no database yet
    (or the store is shared), ``lockfile`` when no lock file was checked;
    ``store`` is the shared store checked (its address without a password),
    ``None`` for SQLite. ``problems`` lists damage and
    warnings together, in the order checked; :attr:`damaged` and
    :attr:`warnings` split them.
    """

    state_dir: Path
    database: Path | None
    lockfile: Path | None
    problems: tuple[StateProblem, ...] = ()
    store: str | None = None

    @property
    def damaged(self) -> tuple[StateProblem, ...]:
        """Problems that make caplet refuse or misread the state until they are fixed."""
        return tuple(p for p in self.problems if p.damaged)

    @property
    def warnings(self) -> tuple[StateProblem, ...]:
        """Leftovers and interrupted work that are safe as they are (each names a fix)."""
        return tuple(p for p in self.problems if not p.damaged)

    @property
    def ok(self) -> bool:
        return not self.damaged

    def __bool__(self) -> bool:
        return self.ok


def _temp_files(paths: Iterable[Path]) -> list[StateProblem]:
    return [
        StateProblem(
            kind=ProblemKind.TEMP_FILE,
            path=str(path),
            message=(
                f"temporary file {path} is left from a write that was interrupted (the file "
                "it was replacing is intact); delete it (rm "
                f"{path}) when no caplet command is running"
            ),
        )
        for path in paths
    ]


def _check_shared(address: str) -> list[StateProblem]:
    from caplet._trust._postgres import PostgresStore, UnreachableError

    try:
        store = PostgresStore(address)
    except UnreachableError as exc:
        return [
            StateProblem(
                kind=ProblemKind.UNREACHABLE, path=describe_store(address), message=str(exc)
            )
        ]
    except StoreError as exc:
        return [
            StateProblem(kind=ProblemKind.CORRUPT, path=describe_store(address), message=str(exc))
        ]
    with store:
        return list(store.check())


def _check_database(state_dir: Path) -> list[StateProblem]:
    path = state_dir / DB_FILENAME
    try:
        with SqliteStore(state_dir) as store:
            return list(store.check())
    except StoreError as exc:
        # It cannot even be opened: corrupt, foreign, newer, or unreadable.
        return [StateProblem(kind=ProblemKind.CORRUPT, path=str(path), message=str(exc))]


def _check_keyring(state_dir: Path) -> list[StateProblem]:
    try:
        Keyring(state_dir).keys()
    except StoreError as exc:
        return [
            StateProblem(
                kind=ProblemKind.RECORD, path=str(state_dir / KEYRING_DIR), message=str(exc)
            )
        ]
    return []


def check_state(
    state_dir: Path | str | None = None,
    *,
    lockfile: Path | str | None = None,
    store: str | None = None,
) -> StateReport:
    """Check caplet's state in *state_dir* (default: as :class:`PluginManager` picks it).

    *lockfile* is the ``caplet.lock`` to check as well (a missing one is
    fine); ``None`` skips it. *store* is the store's address as
    :func:`caplet._trust._open.open_store` takes it (default:
    ``CAPLET_STORE``, else the state directory's SQLite database). Never
    raises for a problem it finds: each is a :class:`StateProblem` in the
    report, whose message names the file (or store) and the fix.
    """
    directory = Path(state_dir) if state_dir is not None else default_state_dir()
    lock_path = Path(lockfile) if lockfile is not None else None
    address = store if store is not None else store_address()
    problems: list[StateProblem] = []
    try:
        db_dir = sqlite_directory(address, directory)
    except StoreError as exc:
        problem = StateProblem(
            kind=ProblemKind.CORRUPT, path=describe_store(address), message=str(exc)
        )
        return StateReport(
            state_dir=directory, database=None, lockfile=lock_path, problems=(problem,)
        )
    shared = None if db_dir is not None else describe_store(address)
    database = (db_dir if db_dir is not None else directory) / DB_FILENAME
    try:
        has_database = database.exists() or database.is_symlink()
        is_directory = directory.is_dir()
    except OSError as exc:  # a name too long for the file system, no permission (issue 13)
        problem = StateProblem(
            kind=ProblemKind.CORRUPT,
            path=str(directory),
            message=f"the state directory {directory} cannot be examined ({exc.strerror}); "
            "pass a state directory caplet can reach (--state-dir or CAPLET_STATE_DIR)",
        )
        return StateReport(
            state_dir=directory, database=None, lockfile=lock_path, problems=(problem,)
        )
    if shared is not None:
        problems += _check_shared(address)
        has_database = False
    elif has_database:
        problems += _check_database(database.parent)
    if is_directory:
        problems += _check_keyring(directory)
        problems += check_journals(directory)
        for folder in (directory, directory / JOURNAL_DIR, directory / KEYRING_DIR):
            problems += _temp_files(leftover_temp_files(folder))
    if lock_path is not None:
        problems += check_lockfile(lock_path)
        problems += _temp_files(leftover_temp_files(lock_path.parent, lock_path.name))
    return StateReport(
        state_dir=directory,
        database=database if has_database else None,
        lockfile=lock_path,
        problems=tuple(problems),
        store=shared,
    )
