"""The connections of a :class:`~caplet._trust._postgres.PostgresStore`: a psycopg-pool
:class:`~psycopg_pool.ConnectionPool` opened after one direct connection has migrated
the database, each operation one transaction on it, and a pool whose connection broke
thrown away and the operation tried once more on a fresh one (the store's docstring,
"A server that goes away"). Split out of ``_postgres`` when it passed 600 lines: the
store's queries there, how they reach the server here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from caplet._atomic import write_step
from caplet._errors import StoreError
from caplet._logs import caplet_logger
from caplet._trust._pg_errors import LOCK_TIMEOUT_S, connection_lost, translate, unreachable
from caplet._trust._pg_schema import migrate
from caplet._trust._pg_url import PgAddress

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PgPool"]

logger = caplet_logger("caplet.store")

T = TypeVar("T")


class PgPool:
    """The pool of one store's address; ``shown`` is the address without its password."""

    def __init__(self, address: PgAddress, *, max_connections: int, wait_s: float) -> None:
        self.address = address
        self.shown = address.shown
        self.max_connections = max_connections
        self.wait_s = wait_s
        #: Guards replacing the pool; operations run outside it.
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None = None
        self._closed = False
        with self._lock:
            self._pool = self._open_pool("opening")

    def _connect_kwargs(self) -> dict[str, object]:
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(self.address.conninfo)
        extra: dict[str, object] = {"autocommit": True}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = max(2, round(self.wait_s))
        if "application_name" not in given:
            extra["application_name"] = "caplet"
        return extra

    @staticmethod
    def _configure(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        conn.execute(f"SET lock_timeout = '{int(LOCK_TIMEOUT_S * 1000)}ms'")

    def _open_pool(self, doing: str) -> ConnectionPool[psycopg.Connection[tuple[object, ...]]]:
        """Connect once directly (for libpq's own error), migrate, then start a pool.

        The caller holds ``self._lock``.
        """
        import psycopg
        from psycopg_pool import ConnectionPool

        kwargs = self._connect_kwargs()
        try:
            with psycopg.connect(self.address.conninfo, **kwargs) as conn:  # type: ignore[arg-type]
                self._configure(conn)
                migrate(conn, self.shown)
        except psycopg.Error as exc:
            if connection_lost(exc):
                raise unreachable(self.shown, doing, exc) from exc
            raise translate(self.shown, doing, exc) from exc
        pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] = ConnectionPool(
            self.address.conninfo,
            kwargs=kwargs,
            min_size=1,
            max_size=self.max_connections,
            open=False,
            timeout=self.wait_s,
            configure=self._configure,
            reconnect_timeout=max(self.wait_s, 1.0),
            name="caplet-store",
        )
        try:
            pool.open(wait=True, timeout=self.wait_s)
        except psycopg.Error as exc:
            pool.close(timeout=0)
            raise unreachable(self.shown, doing, exc) from exc
        return pool

    def _current_pool(self, doing: str) -> ConnectionPool[psycopg.Connection[tuple[object, ...]]]:
        with self._lock:
            if self._closed:
                raise StoreError(
                    f"PostgreSQL store {self.shown} was already closed when {doing}; "
                    "open a new PostgresStore"
                )
            if self._pool is None:
                self._pool = self._open_pool(doing)
            return self._pool

    def _discard(self, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]) -> None:
        """Throw *pool* away if it is still the current one (another thread may have)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.close(timeout=0)

    def run(
        self,
        doing: str,
        work: Callable[[psycopg.Connection[tuple[object, ...]]], T],
        *,
        write: bool = False,
    ) -> T:
        """Run *work* in one transaction; once more on a fresh pool if the connection broke."""
        import psycopg

        shown = self.shown
        for attempt in (1, 2):
            pool = self._current_pool(doing)
            committing = False
            try:
                with pool.connection() as conn, conn.transaction():
                    if write:
                        write_step(f"postgres {shown}: {doing}: transaction begun")
                    result = work(conn)
                    if write:
                        write_step(f"postgres {shown}: {doing}: statements run, not committed")
                    committing = True
            except psycopg.Error as exc:
                if not connection_lost(exc):
                    raise translate(self.shown, doing, exc) from exc
                logger.warning(
                    "PostgreSQL store %s: connection lost while %s: %s", shown, doing, exc
                )
                self._discard(pool)
                if attempt == 2:
                    raise unreachable(
                        self.shown, doing, exc, committing=committing and write
                    ) from exc
                continue
            if write:
                write_step(f"postgres {shown}: {doing}: committed")
            return result
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def close(self) -> None:
        """Close the pool's connections; closing twice is fine."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
