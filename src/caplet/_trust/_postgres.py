"""The PostgreSQL implementation of :class:`~caplet._trust._store.TrustStore` (issue 18).

One database shared by every node of a fleet: an approval made on one node
holds on all of them, a quarantine too, and the permission log and
``ctx.kv`` are one. The tables and their meaning are SQLite's
(:mod:`caplet._trust._pg_schema`); rows are decoded by the same code
(:mod:`caplet._trust._rows`).

**Transactions.** Every operation is one transaction on a connection of a
psycopg-pool :class:`~psycopg_pool.ConnectionPool` (autocommit off only
inside ``conn.transaction()``), reads included. ``ctx.kv``'s quota is
computed under a transaction-scoped advisory lock of the plugin, so two
nodes writing the same plugin's keys cannot both squeeze under it (READ
COMMITTED alone would let both see the old total). Lock waits end after
:data:`LOCK_TIMEOUT_S`, SQLite's busy timeout.

**Ordering.** ``ORDER BY ... COLLATE "C"``: code point order, as SQLite's
BINARY collation sorts, whatever collation the database was created with.

**Text.** PostgreSQL's ``text`` cannot hold NUL, which SQLite's can. The
free-text fields a plugin can put words into (a decision's target and
detail, a quarantine reason) are stored with NUL shown as U+2400 SYMBOL
FOR NULL, so a plugin whose error message holds NUL cannot make the log
write fail (and with it the breaker's count; tests/_trust/test_postgres.py
has the attack). Keys (plugin names, ``ctx.kv`` keys) never hold NUL:
caplet refuses them earlier.

**A server that goes away.** A connection that breaks (the server
restarted, the network dropped) throws the whole pool away and the
operation is tried once more on a fresh one, so a restart between two
operations is invisible and one during an operation costs one retry. If
the server is still not there, the operation fails with a
:class:`~caplet._errors.StoreError` naming the store and what to do, and
nothing is written; the next operation connects afresh. A write retried
after its COMMIT's answer was lost may be applied twice: every write but
the log is idempotent (an upsert or a delete), and a decision may then be
logged twice, never lost.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from caplet._audit._model import AuditResult
from caplet._errors import StoreError
from caplet._logs import caplet_logger
from caplet._trust._codec import audit_to_json
from caplet._trust._pg_errors import (
    LOCK_TIMEOUT_S,
    UnreachableError,
)
from caplet._trust._pg_pool import PgPool
from caplet._trust._pg_schema import KV_ROW_BYTES, check_records, check_structure
from caplet._trust._pg_url import parse_address
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._rows import (
    APPROVAL_COLUMNS,
    PRUNE_ORDER,
    RowSource,
    approval_from_row,
    approval_params,
    audit_from_row,
    decision_filter,
    decision_from_row,
    kv_value,
    quarantine_from_row,
    span_from_row,
)
from caplet._trust._store import UNLOCATED, ApprovalRecord, Decision, KvWrite, QuarantineRecord

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCK_TIMEOUT_S", "WAIT_S", "PostgresStore", "UnreachableError"]

logger = caplet_logger("caplet.store")

T = TypeVar("T")

#: Seconds an operation waits for a connection before it says the server is unreachable.
WAIT_S = 5.0
#: The advisory lock class of a plugin's ``ctx.kv`` quota (the key is the name's hash).
_KV_LOCK_CLASS = 0x6B76
#: A plugin's kv usage (keys, bytes; from ``caplet.kv_usage``, schema 10) and what the
#: entry a write replaces counts (NULL when there is none): primary-key lookups only.
_KV_USAGE = (
    "SELECT (SELECT key_count FROM caplet.kv_usage WHERE plugin = %(plugin)s "  # noqa: S608
    "AND location = %(location)s), (SELECT byte_count FROM caplet.kv_usage "
    "WHERE plugin = %(plugin)s AND location = %(location)s), "
    f"(SELECT {KV_ROW_BYTES} FROM caplet.kv WHERE plugin = %(plugin)s "
    "AND location = %(location)s AND key = %(key)s)"
)

_SELECT_APPROVAL = f"SELECT {APPROVAL_COLUMNS} FROM caplet.approvals WHERE name = %s"  # noqa: S608
_SELECT_APPROVALS = (
    f"SELECT {APPROVAL_COLUMNS} FROM caplet.approvals "  # noqa: S608
    'ORDER BY name COLLATE "C"'
)

#: The quarantine columns in the order ``quarantine_from_row`` reads them.
_QUARANTINE_COLUMNS = "name, reason, since, location, content_hash"
#: The quarantines that stop a plugin (parameters: its place, UNLOCATED, its content).
_QUARANTINE_MATCH = "(location IN (%s, %s) OR (content_hash <> '' AND content_hash = %s))"


def _free(text: str) -> str:
    """Free text as PostgreSQL can hold it (see the module docstring)."""
    return text.replace("\0", "\u2400")


class PostgresStore:
    """Approvals, cached audits, quarantine, the decision log and ``ctx.kv`` in PostgreSQL.

    *address* is a libpq connection string (``postgresql://USER@HOST/DB?sslmode=verify-full``);
    a server not on this machine must be reached with a verified certificate
    (:mod:`caplet._trust._pg_url`). Opening connects, checks that the
    database is caplet's and migrates it, so a wrong address fails here
    rather than at the first approval. ``max_connections`` bounds the pool;
    ``wait_s`` is how long an operation waits for a connection.
    """

    def __init__(self, address: str, *, max_connections: int = 4, wait_s: float = WAIT_S) -> None:
        try:
            import psycopg  # noqa: F401  (the extra's presence, checked before anything else)
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise StoreError(
                "a PostgreSQL store needs psycopg and psycopg-pool, which are not installed; "
                "install them with pip install 'caplet[postgres]'"
            ) from exc
        self._db = PgPool(parse_address(address), max_connections=max_connections, wait_s=wait_s)
        self.address = self._db.address
        #: The address without its password: what messages and ``doctor`` show.
        self.shown = self._db.shown
        self.max_connections = max_connections
        self.wait_s = wait_s
        self._rows = RowSource(
            what=f"PostgreSQL store {self.shown}", path=self.shown, editor="psql"
        )

    @classmethod
    def open(cls, address: str) -> Self:
        """Same as ``PostgresStore(address)``."""
        return cls(address)

    # -- approvals ------------------------------------------------------------------

    def get_approval(self, name: str) -> ApprovalRecord | None:
        """The approval of plugin *name*, or ``None``."""
        if "\0" in name:
            return None  # no name holding NUL can have been stored (see the module docstring)
        row = self._db.run(
            f"reading the approval of {name!r}",
            lambda conn: conn.execute(_SELECT_APPROVAL, (name,)).fetchone(),
        )
        return None if row is None else approval_from_row(self._rows, row)

    def put_approval(self, record: ApprovalRecord) -> None:
        """Insert or replace the approval of ``record.name``."""
        self._db.run(
            f"writing the approval of {record.name!r}",
            lambda conn: conn.execute(
                f"INSERT INTO caplet.approvals ({APPROVAL_COLUMNS}) "  # noqa: S608
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET "
                "content_hash = EXCLUDED.content_hash, capabilities = EXCLUDED.capabilities, "
                "approved_at = EXCLUDED.approved_at, risk_level = EXCLUDED.risk_level, "
                "verdict = EXCLUDED.verdict, version = EXCLUDED.version, "
                "requires = EXCLUDED.requires, defaults = EXCLUDED.defaults, "
                "hooks = EXCLUDED.hooks, agent_text = EXCLUDED.agent_text, "
                "location = EXCLUDED.location, programs = EXCLUDED.programs, "
                "review = EXCLUDED.review",
                approval_params(record),
            ),
            write=True,
        )

    def delete_approval(self, name: str) -> bool:
        """Remove the approval of *name*; ``False`` when there was none."""
        return self._db.run(
            f"deleting the approval of {name!r}",
            lambda conn: (
                conn.execute(
                    "DELETE FROM caplet.approvals WHERE name = %s",
                    (name,),
                ).rowcount
                > 0
            ),
            write=True,
        )

    def list_approvals(self) -> Sequence[ApprovalRecord]:
        """Every approval, ordered by plugin name."""
        rows = self._db.run(
            "listing approvals",
            lambda conn: conn.execute(_SELECT_APPROVALS).fetchall(),
        )
        return [approval_from_row(self._rows, row) for row in rows]

    # -- audits ---------------------------------------------------------------------

    def get_audit(self, content_hash: str, model_id: str = "") -> AuditResult | None:
        """The cached audit of the tree with *content_hash* by *model_id* (``""``: static-only)."""
        key = content_hash if not model_id else f"{content_hash} by {model_id}"
        row = self._db.run(
            f"reading the audit of {key}",
            lambda conn: conn.execute(
                "SELECT plugin, payload FROM caplet.audits WHERE content_hash = %s AND model = %s",
                (content_hash, model_id),
            ).fetchone(),
        )
        if row is None:
            return None
        return audit_from_row(self._rows, content_hash, model_id, row[0], row[1])

    def put_audit(self, audit: AuditResult) -> None:
        """Store *audit*, replacing any audit of the same content hash by the same model."""
        payload = audit_to_json(audit)
        self._db.run(
            f"writing the audit of {audit.plugin!r}",
            lambda conn: conn.execute(
                "INSERT INTO caplet.audits "
                "(content_hash, model, plugin, created_at, payload) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (content_hash, model) DO UPDATE SET plugin = EXCLUDED.plugin, "
                "created_at = EXCLUDED.created_at, payload = EXCLUDED.payload",
                (audit.content_hash, audit.model_id, audit.plugin, audit.created_at, payload),
            ),
            write=True,
        )

    # -- quarantine -----------------------------------------------------------------

    def get_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> QuarantineRecord | None:
        """Why and since when the plugin *name* at *location* (running *content_hash*) is
        quarantined, or ``None``: a quarantine of that place, an unlocated one (it stops
        every plugin of its name), or one of that content anywhere (``_store``)."""
        if "\0" in name + location + content_hash:
            return None
        row = self._db.run(
            f"reading the quarantine of {name!r}",
            lambda conn: conn.execute(
                f"SELECT {_QUARANTINE_COLUMNS} FROM caplet.quarantine WHERE name = %s AND "  # noqa: S608
                f"{_QUARANTINE_MATCH} ORDER BY location <> %s, location = %s LIMIT 1",
                (name, location, UNLOCATED, content_hash, location, UNLOCATED),
            ).fetchone(),
        )
        return None if row is None else quarantine_from_row(self._rows, row)

    def put_quarantine(self, record: QuarantineRecord) -> None:
        """Quarantine ``record.name`` at ``record.location`` (replacing an earlier record)."""
        self._db.run(
            f"quarantining {record.name!r}",
            lambda conn: conn.execute(
                "INSERT INTO caplet.quarantine (name, location, reason, since, content_hash) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name, location) DO UPDATE SET "
                "reason = EXCLUDED.reason, since = EXCLUDED.since, "
                "content_hash = EXCLUDED.content_hash",
                (
                    record.name,
                    record.location,
                    _free(record.reason),
                    record.since,
                    record.content_hash,
                ),
            ),
            write=True,
        )

    def delete_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> bool:
        """Release every quarantine :meth:`get_quarantine` finds for the plugin *name* at
        *location* running *content_hash*; ``False`` when there was none."""
        if "\0" in name + location + content_hash:
            return False
        return self._db.run(
            f"releasing {name!r} from quarantine",
            lambda conn: (
                conn.execute(
                    f"DELETE FROM caplet.quarantine WHERE name = %s AND {_QUARANTINE_MATCH}",  # noqa: S608
                    (name, location, UNLOCATED, content_hash),
                ).rowcount
                > 0
            ),
            write=True,
        )

    def list_quarantine(self) -> Sequence[QuarantineRecord]:
        """Every quarantined plugin, ordered by name."""
        rows = self._db.run(
            "listing quarantined plugins",
            lambda conn: conn.execute(
                f"SELECT {_QUARANTINE_COLUMNS} FROM caplet.quarantine "  # noqa: S608
                'ORDER BY name COLLATE "C", location COLLATE "C"'
            ).fetchall(),
        )
        return [quarantine_from_row(self._rows, row) for row in rows]

    # -- decision log ---------------------------------------------------------------

    def log_decision(self, decision: Decision) -> None:
        """Append *decision* to the log; its ``id`` is ignored and assigned here."""
        self._db.run(
            f"logging a decision about {decision.plugin!r}",
            lambda conn: conn.execute(
                "INSERT INTO caplet.decisions "
                "(at, plugin, action, target, allowed, detail) VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    decision.at,
                    decision.plugin,
                    decision.action,
                    _free(decision.target),
                    decision.allowed,
                    _free(decision.detail),
                ),
            ),
            write=True,
        )

    def decisions(
        self,
        plugin: str | None = None,
        limit: int = 100,
        *,
        since: float | None = None,
        allowed: bool | None = None,
        action: str | None = None,
    ) -> Sequence[Decision]:
        """The newest *limit* decisions, newest first: of *plugin* (else all), from *since*
        (a ``time.time()`` value) on, only allowed or refused ones, of one *action*."""
        if limit < 0:
            raise StoreError(f"decision log limit must be 0 or more, got {limit}")
        where, values = decision_filter(
            "%s", plugin=plugin, since=since, allowed=allowed, action=action
        )
        # The clauses are caplet's own text; every value is a parameter.
        query = (
            "SELECT id, at, plugin, action, target, allowed, detail FROM caplet.decisions "  # noqa: S608
            f"{where}ORDER BY id DESC LIMIT %s"
        )
        rows = self._db.run(
            "reading the decision log",
            lambda conn: conn.execute(query, (*values, limit)).fetchall(),
        )
        return [decision_from_row(self._rows, row) for row in rows]

    def prune_decisions(self, *, before: float, keep: int) -> int:
        """Delete decisions older than *before* and all but the newest *keep*; return how
        many rows went (the log's retention, ``Policy.log``)."""
        if keep < 0:
            raise StoreError(f"decision log retention must keep 0 rows or more, got {keep}")

        def prune(conn: Any) -> int:
            removed = conn.execute("DELETE FROM caplet.decisions WHERE at < %s", (before,)).rowcount
            removed += conn.execute(
                "DELETE FROM caplet.decisions WHERE id IN (SELECT id FROM caplet.decisions "  # noqa: S608
                f"ORDER BY {PRUNE_ORDER} LIMIT greatest(0, "
                "(SELECT count(*) FROM caplet.decisions) - %s))",
                (keep,),
            ).rowcount
            return int(removed)

        return int(self._db.run("pruning the decision log", prune, write=True))

    def decisions_span(self) -> tuple[int, float | None]:
        """(rows, time of the oldest row): what retention has to look at, read cheaply."""
        row = self._db.run(
            "reading the decision log",
            lambda conn: conn.execute("SELECT count(*), min(at) FROM caplet.decisions").fetchone(),
        )
        if row is None:  # count(*) always yields a row; treat a missing one as empty
            return 0, None
        return span_from_row(self._rows, *row)

    # -- ctx.kv ---------------------------------------------------------------------

    def kv_get(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bytes | None:
        """The value the plugin *plugin* at *location* stored under *key*, or ``None``."""
        if "\0" in plugin + key + location:
            return None
        row = self._db.run(
            f"reading a kv entry of {plugin!r}",
            lambda conn: conn.execute(
                "SELECT value FROM caplet.kv WHERE plugin = %s AND location = %s AND key = %s",
                (plugin, location, key),
            ).fetchone(),
        )
        return None if row is None else kv_value(self._rows, plugin, key, row[0])

    def kv_put(
        self,
        plugin: str,
        key: str,
        value: bytes,
        *,
        max_keys: int,
        max_bytes: int,
        location: str = UNLOCATED,
    ) -> KvWrite:
        """Store *value* under *key* for the plugin *plugin* at *location* unless that
        breaks a quota.

        The usage is read under the plugin's advisory lock inside the write
        transaction, so two nodes writing at once cannot both squeeze under
        the limit. It is the plugin's ``caplet.kv_usage`` row, which a trigger
        keeps (schema 10): aggregated over all the plugin's rows on every
        write, a plugin with its quota full made the database server read
        1,000 rows per ``ctx.kv.set`` (attack15).
        """
        size = len(key.encode("utf-8")) + len(value)

        def work(conn: psycopg.Connection[tuple[object, ...]]) -> KvWrite:
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (_KV_LOCK_CLASS, f"{plugin}\n{location}"),
            )
            row = conn.execute(
                _KV_USAGE, {"plugin": plugin, "location": location, "key": key}
            ).fetchone()
            assert row is not None
            held_keys, held_bytes, old = (None if v is None else int(str(v)) for v in row)
            keys = (held_keys or 0) + (old is None)
            total = (held_bytes or 0) - (old or 0) + size
            if keys > max_keys or total > max_bytes:
                return KvWrite(stored=False, keys=keys, total_bytes=total)
            conn.execute(
                "INSERT INTO caplet.kv (plugin, location, key, value, updated_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (plugin, location, key) DO UPDATE SET "
                "value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                (plugin, location, key, value, time.time()),
            )
            return KvWrite(stored=True, keys=keys, total_bytes=total)

        return self._db.run(f"writing a kv entry of {plugin!r}", work, write=True)

    def kv_delete(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bool:
        """Remove the *key* of the plugin *plugin* at *location*; ``False`` if it was not there."""
        if "\0" in plugin + key + location:
            return False
        return self._db.run(
            f"deleting a kv entry of {plugin!r}",
            lambda conn: (
                conn.execute(
                    "DELETE FROM caplet.kv WHERE plugin = %s AND location = %s AND key = %s",
                    (plugin, location, key),
                ).rowcount
                > 0
            ),
            write=True,
        )

    def kv_keys(self, plugin: str, prefix: str = "", *, location: str = UNLOCATED) -> Sequence[str]:
        """The keys of the plugin *plugin* at *location* starting with *prefix*, sorted by
        code point.

        ``starts_with`` rather than LIKE: a prefix holding ``%`` or ``_`` is
        matched literally, as in the SQLite store.
        """
        if "\0" in plugin + prefix + location:
            return []
        rows = self._db.run(
            f"listing the kv keys of {plugin!r}",
            lambda conn: conn.execute(
                "SELECT key FROM caplet.kv WHERE plugin = %s AND location = %s "
                'AND starts_with(key, %s) ORDER BY key COLLATE "C"',
                (plugin, location, prefix),
            ).fetchall(),
        )
        return [str(row[0]) for row in rows]

    def claim_unlocated(self, plugin: str, location: str, *, from_location: str = UNLOCATED) -> int:
        """Give the plugin *plugin* at *location* the ``ctx.kv`` entries of its name that
        are unlocated (``_store.UNLOCATED``, or *from_location*: a place caplet no longer
        gives any plugin); return how many moved. A key it already holds at *location*
        keeps its value (the other one stays, claimed by nobody)."""
        if location in (UNLOCATED, from_location) or "\0" in plugin + location + from_location:
            return 0
        return int(
            self._db.run(
                f"claiming the unlocated kv entries of {plugin!r}",
                lambda conn: (
                    conn.execute(
                        "UPDATE caplet.kv AS k SET location = %s WHERE k.plugin = %s "
                        "AND k.location = %s AND NOT EXISTS (SELECT 1 FROM caplet.kv AS o "
                        "WHERE o.plugin = k.plugin AND o.location = %s AND o.key = k.key)",
                        (location, plugin, from_location, location),
                    ).rowcount
                ),
                write=True,
            )
        )

    # -- maintenance and lifetime ---------------------------------------------------

    def check(self) -> tuple[StateProblem, ...]:
        """Everything ``caplet doctor --check-state`` checks in the store; ``()`` when healthy.

        The schema version and every table and column, then every approval,
        audit and quarantine record decoded as caplet reads it, in one
        read-only snapshot. A server that cannot be reached is an
        ``UNREACHABLE`` problem, not an exception.
        """

        def work(conn: psycopg.Connection[tuple[object, ...]]) -> list[StateProblem]:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            problems = check_structure(conn, self.shown)
            return problems or check_records(conn, self._rows)

        try:
            return tuple(self._db.run("checking the store", work))
        except UnreachableError as exc:
            return (StateProblem(kind=ProblemKind.UNREACHABLE, path=self.shown, message=str(exc)),)
        except StoreError as exc:
            return (StateProblem(kind=ProblemKind.CORRUPT, path=self.shown, message=str(exc)),)

    def close(self) -> None:
        """Close the pool's connections; closing twice is fine."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
