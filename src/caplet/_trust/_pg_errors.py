"""PostgreSQL's errors in caplet's words: which mean the server is gone, and what to say.

Split from :mod:`caplet._trust._postgres`: the store decides *when* to
retry (a connection that is gone, :func:`connection_lost`) and these
functions turn what psycopg raised into the :class:`StoreError` a person
reads, naming the store (without its password), what was being done,
whether anything was written, and what to do.
"""

from __future__ import annotations

from caplet._errors import StoreError

__all__ = ["LOCK_TIMEOUT_S", "UnreachableError", "connection_lost", "translate", "unreachable"]

#: Seconds a transaction waits for another node's lock (SQLite's busy timeout).
LOCK_TIMEOUT_S = 10.0

#: SQLSTATEs that mean the connection is gone: class 08 and the shutdown codes
#: (https://www.postgresql.org/docs/15/errcodes-appendix.html).
_LOST_STATES = frozenset({"57P01", "57P02", "57P03"})


class UnreachableError(StoreError):
    """The server cannot be reached (down, restarting, no route): ``check`` reports it as such."""


def connection_lost(exc: BaseException) -> bool:
    """True when *exc* says the connection (or the pool's way to one) is gone."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _LOST_STATES


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def unreachable(
    shown: str, doing: str, exc: BaseException, *, committing: bool = False
) -> UnreachableError:
    """The server cannot be reached while *doing*; *committing*: the cut came at COMMIT."""
    outcome = (
        "the server went away while committing, so the change may or may not be recorded; "
        "check it (caplet list, caplet log) and repeat it if it is missing"
        if committing
        else "nothing was changed"
    )
    return UnreachableError(
        f"PostgreSQL store {shown} cannot be reached while {doing} ({_first_line(exc)}); "
        f"{outcome}. Check that the server runs and this node can reach it "
        f"(pg_isready -d '{shown}'), then run the command again: caplet reconnects "
        "by itself on its next use of the store"
    )


def translate(shown: str, doing: str, exc: BaseException) -> StoreError:
    """Any other error of the server or the driver, as one message with its fix."""
    import psycopg
    from psycopg import errors

    if isinstance(exc, StoreError):
        return exc
    text = _first_line(exc)
    where = f"PostgreSQL store {shown}"
    if isinstance(exc, errors.LockNotAvailable):
        return StoreError(
            f"{where} stayed locked for more than {LOCK_TIMEOUT_S:g} s while {doing}; another "
            "caplet node or process is holding it; retry when it has finished"
        )
    if isinstance(exc, errors.DiskFull):
        return StoreError(
            f"{where}: {doing} failed: the server is out of space ({text}); nothing was "
            "written: free space on the database server and run the command again"
        )
    if isinstance(exc, errors.InsufficientResources):
        return StoreError(
            f"{where}: {doing} failed: the server lacks resources ({text}); nothing was "
            "written: see the server's log (memory, max_connections), then run the command again"
        )
    if isinstance(exc, errors.InsufficientPrivilege):
        return StoreError(
            f"{where}: {doing} failed: the role may not do that ({text}); grant it the use "
            "of schema caplet and its tables (docs/fleet.md, 'The store')"
        )
    if isinstance(exc, psycopg.DataError) and "0x00" in text:
        return StoreError(
            f"{where}: {doing} failed: a name or key holds NUL, which PostgreSQL text cannot "
            "hold; use a name without it"
        )
    return StoreError(
        f"{where}: {doing} failed ({text}); check the server's log and the role's privileges"
    )
