"""A problem found in caplet's persistent state by ``caplet doctor --check-state``.

Each part of the state checks itself where its format is defined (the
database in :mod:`caplet._trust._sqlite`, the lock file in
:mod:`caplet._trust._lockfile`, update journals in
:mod:`caplet._host._journal`) and reports what it finds as
:class:`StateProblem` values; :func:`caplet._host._state_check.check_state`
collects them. Whether a problem means the state is *damaged* follows from
its kind, in one place (:attr:`StateProblem.damaged`), so every checker
agrees on what makes ``doctor`` exit 3.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import assert_never

__all__ = ["ProblemKind", "StateProblem"]


class ProblemKind(enum.Enum):
    """What kind of problem; decides whether the state counts as damaged."""

    #: SQLite's integrity or foreign-key check failed, or a state file cannot be read.
    CORRUPT = "corrupt"
    #: The database's schema is not the one this caplet writes (version, tables).
    SCHEMA = "schema"
    #: One record (a row, a trusted key file) does not decode; caplet refuses to use it.
    RECORD = "record"
    #: ``caplet.lock`` does not parse or holds an invalid entry.
    LOCKFILE = "lockfile"
    #: An update journal that cannot be read, so recovery cannot finish that update.
    JOURNAL = "journal"
    #: A temporary file of an atomic write that was killed: harmless, the target is intact.
    TEMP_FILE = "temp-file"
    #: An update that was interrupted (or is running): the next discovery finishes it.
    UNFINISHED_UPDATE = "unfinished-update"
    #: A shared store (PostgreSQL) that cannot be reached: nothing can be checked or used.
    UNREACHABLE = "unreachable"
    #: ``ctx.kv`` entries or a quarantine written before caplet kept plugin places that
    #: no plugin has claimed (decide14): kept, read by no plugin (a quarantine of that
    #: kind stops every plugin of its name). A warning: nothing is damaged.
    UNCLAIMED = "unclaimed"


@dataclass(frozen=True, slots=True)
class StateProblem:
    """One finding: its kind, the file to blame, and a message naming the fix."""

    kind: ProblemKind
    path: str
    message: str

    @property
    def damaged(self) -> bool:
        """True when caplet would refuse or misread this state until it is fixed.

        A leftover temporary file and an interrupted update are warnings:
        the first is never read, and caplet finishes the second by itself.
        """
        match self.kind:
            case (
                ProblemKind.CORRUPT
                | ProblemKind.SCHEMA
                | ProblemKind.RECORD
                | ProblemKind.LOCKFILE
                | ProblemKind.JOURNAL
                | ProblemKind.UNREACHABLE
            ):
                return True
            case ProblemKind.TEMP_FILE | ProblemKind.UNFINISHED_UPDATE | ProblemKind.UNCLAIMED:
                return False
            case _:
                assert_never(self.kind)
