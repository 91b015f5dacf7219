"""Rows of the trust store, decoded the one way both backends read them.

:mod:`caplet._trust._sqlite` and :mod:`caplet._trust._postgres` keep the
same tables with the same columns (approvals, audits, quarantine,
decisions, kv), so a row is turned into a record here, once: every column
is type-checked, JSON columns must hold what caplet wrote, and a row that
does not decode raises :class:`BadRowError` carrying the
:class:`~caplet._trust._problems.StateProblem` that ``caplet doctor
--check-state`` reports. The backend says where the row came from
(:class:`RowSource`), so each message names its database and the tool to
repair it with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from caplet._audit._model import AuditResult, Verdict
from caplet._config._schema import ConfigValue
from caplet._errors import StoreError
from caplet._findings import RiskLevel
from caplet._numbers import instant
from caplet._trust._codec import audit_from_json
from caplet._trust._hashing import is_tree_hash
from caplet._trust._problems import ProblemKind, StateProblem
from caplet._trust._store import ApprovalRecord, ApprovedDefaults, Decision, QuarantineRecord

__all__ = [
    "APPROVAL_COLUMNS",
    "DECISION_PROBLEM",
    "LEGACY_PLACES",
    "PRUNE_ORDER",
    "REVIEW_MIGRATION",
    "BadRowError",
    "RowSource",
    "approval_from_row",
    "approval_params",
    "audit_from_row",
    "decision_filter",
    "decision_from_row",
    "kv_value",
    "quarantine_from_row",
    "span_from_row",
    "unclaimed_problems",
    "usage_drift_query",
    "usage_problems",
]

#: The order in which retention deletes decisions beyond ``max_rows``: allowed rows first
#: (oldest first), refusals and the policy's own rows ("(policy)", _host._policy_file's
#: POLICY_LOG_NAME) only when they alone fill the log, so a plugin flooding the log with
#: allowed requests erases no refusal (red-team round 3). The same text is valid SQL in
#: SQLite (allowed is 0/1) and PostgreSQL (a boolean).
PRUNE_ORDER = "CASE WHEN allowed AND plugin <> '(policy)' THEN 0 ELSE 1 END, id"

#: What is wrong with a decision row that does not decode, in :func:`decision_from_row`
#: and in both backends' checks (which find such rows with one query).
DECISION_PROBLEM = "a column holds a value of the wrong type, or a time caplet did not write"

#: The approval columns in the order :func:`approval_from_row` reads them.
APPROVAL_COLUMNS = (
    "name, content_hash, capabilities, approved_at, risk_level, verdict, version, requires, "
    "defaults, hooks, agent_text, location, programs, review"
)


#: How schema 12 tells an older approval's review from the audits cached of its content
#: (the same statement on SQLite and PostgreSQL; ``{audits}``, ``{approvals}``: the
#: tables' names). A model's audit names its model (``provider:model``), a static one
#: ``''``; exactly one model: that model (an approval given on a static audit the
#: operator chose beside it is then held to the model, the stricter answer); no model
#: and a static audit: static-only; else NULL.
REVIEW_MIGRATION = (
    "UPDATE {approvals} SET review = CASE "
    "WHEN (SELECT count(DISTINCT model) FROM {audits} "
    "WHERE content_hash = {approvals}.content_hash AND model <> '') = 1 "
    "THEN (SELECT min(model) FROM {audits} "
    "WHERE content_hash = {approvals}.content_hash AND model <> '') "
    "WHEN (SELECT count(DISTINCT model) FROM {audits} "
    "WHERE content_hash = {approvals}.content_hash AND model <> '') = 0 "
    "AND EXISTS (SELECT 1 FROM {audits} WHERE content_hash = {approvals}.content_hash "
    "AND model = '') THEN 'static-only' ELSE NULL END"
)


class BadRowError(StoreError):
    """A row that does not decode; carries the :class:`StateProblem` a check reports."""

    def __init__(self, problem: StateProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class RowSource:
    """Where rows come from, for messages: ``what`` names the database
    (``state database /x/caplet.db``), ``path`` is the problem's location and
    ``editor`` the tool a fix uses (``the sqlite3 shell``, ``psql``)."""

    what: str
    path: str
    editor: str

    def bad_row(self, table: str, key: object, problem: str, fix: str) -> BadRowError:
        return BadRowError(
            StateProblem(
                kind=ProblemKind.RECORD,
                path=self.path,
                message=(
                    f"{self.what}: row {key!r} of table {table} is invalid ({problem}); {fix}"
                ),
            )
        )

    @property
    def edited_log(self) -> str:
        return f"the log was edited outside caplet; delete that row with {self.editor}"

    @property
    def edited_table(self) -> str:
        return f"the table was edited outside caplet; delete that row with {self.editor}"


def approval_from_row(source: RowSource, row: Sequence[object]) -> ApprovalRecord:
    """An approval from the columns of :data:`APPROVAL_COLUMNS`."""
    name, content_hash, capabilities_json, approved_at, risk_level, verdict, version = row[:7]
    requires_json, defaults_json, hooks_json, agent_text_json, location, programs_json = row[7:13]
    review = row[13]
    fix = f"re-approve it (caplet unapprove {name} && caplet approve {name})"
    try:
        capabilities = json.loads(capabilities_json)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise source.bad_row("approvals", name, "capabilities is not JSON", fix) from exc
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise source.bad_row("approvals", name, "capabilities is not a JSON array of strings", fix)
    approved_moment = instant(approved_at)
    if not isinstance(name, str) or not isinstance(content_hash, str) or approved_moment is None:
        raise source.bad_row(
            "approvals", name, "content_hash mistyped, or approved_at not a time caplet wrote", fix
        )
    if not is_tree_hash(content_hash):
        # Such an approval could never match a plugin: it was not written by caplet.
        raise source.bad_row(
            "approvals",
            name,
            f"content_hash {content_hash[:80]!r} is not 'sha256-' and 64 hex digits",
            fix,
        )
    try:
        risk = RiskLevel(risk_level)
        verdict_value = Verdict(verdict)
    except ValueError as exc:
        raise source.bad_row("approvals", name, str(exc), fix) from exc
    if version is not None and not isinstance(version, str):
        raise source.bad_row("approvals", name, "version is not text", fix)
    if location is not None and not isinstance(location, str):
        raise source.bad_row("approvals", name, "location is not text", fix)
    if review is not None and not isinstance(review, str):
        raise source.bad_row("approvals", name, "review is not text", fix)
    requires = _names(source, name, "requires", requires_json, fix)
    hooks = _names(source, name, "hooks", hooks_json, fix)
    agent_text = _names(source, name, "agent_text", agent_text_json, fix)
    programs = _names(source, name, "programs", programs_json, fix)
    defaults: ApprovedDefaults | None = None
    if defaults_json is not None:
        try:
            defaults = _defaults(defaults_json)
        except (TypeError, ValueError) as exc:
            raise source.bad_row("approvals", name, f"defaults {exc}", fix) from exc
    return ApprovalRecord(
        name=name,
        content_hash=content_hash,
        capabilities=tuple(capabilities),
        approved_at=approved_moment,
        risk_level=risk,
        verdict=verdict_value,
        version=version,
        requires=requires,
        defaults=defaults,
        hooks=hooks,
        agent_text=agent_text,
        location=location,
        programs=programs,
        review=review,
    )


def _names(
    source: RowSource, name: object, column: str, text: object, fix: str
) -> tuple[str, ...] | None:
    """A column holding a JSON array of strings (``requires``, ``hooks``, ``agent_text``,
    ``programs``);
    NULL: not recorded."""
    if text is None:
        return None
    try:
        listed = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise source.bad_row("approvals", name, f"{column} is not JSON", fix) from exc
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise source.bad_row("approvals", name, f"{column} is not a JSON array of strings", fix)
    return tuple(listed)


def _config_value(value: object) -> ConfigValue | None:
    """A default as :func:`approval_params` wrote it: a scalar, an array of them, or null."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float | bool) for v in value):
        return tuple(value)
    raise ValueError(f"holds {type(value).__name__} {str(value)[:40]!r}, not a config value")


def _defaults(text: object) -> ApprovedDefaults:
    """The ``defaults`` column: a JSON object of field name to default (null: none)."""
    if not isinstance(text, str):
        raise TypeError("is not text")
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise ValueError("is not JSON") from exc
    if not isinstance(loaded, dict):
        raise TypeError("is not a JSON object of config field names to defaults")
    return tuple((str(k), _config_value(v)) for k, v in loaded.items())


def approval_params(record: ApprovalRecord) -> tuple[object, ...]:
    """The values of :data:`APPROVAL_COLUMNS` for *record*, as both backends store them."""
    return (
        record.name,
        record.content_hash,
        json.dumps(list(record.capabilities)),
        record.approved_at,
        record.risk_level.value,
        record.verdict.value,
        record.version,
        None if record.requires is None else json.dumps(list(record.requires)),
        None if record.defaults is None else json.dumps(dict(record.defaults)),
        None if record.hooks is None else json.dumps(list(record.hooks)),
        None if record.agent_text is None else json.dumps(list(record.agent_text)),
        record.location,
        None if record.programs is None else json.dumps(list(record.programs)),
        record.review,
    )


def audit_from_row(
    source: RowSource, content_hash: str, model_id: str, plugin: object, payload: object
) -> AuditResult:
    """A cached audit; its payload must be the audit of exactly this key."""
    key = content_hash if not model_id else f"{content_hash} by {model_id}"
    fix = f"re-run the audit (caplet audit {plugin} --fresh), which replaces it"
    if not isinstance(payload, str):
        raise source.bad_row("audits", key, "payload is not text", fix)
    try:
        audit = audit_from_json(payload)
    except StoreError as exc:
        raise source.bad_row("audits", key, str(exc), fix) from exc
    if audit.content_hash != content_hash or audit.model_id != model_id:
        raise source.bad_row(
            "audits",
            key,
            f"its payload is the audit of {audit.content_hash} by "
            f"{audit.model_id or 'static-only'}",
            fix,
        )
    return audit


def quarantine_from_row(source: RowSource, row: Sequence[object]) -> QuarantineRecord:
    """A quarantine record from ``name, reason, since, location, content_hash``."""
    name, reason, since, location, content_hash = row
    since_moment = instant(since)
    if (
        not isinstance(name, str)
        or not isinstance(reason, str)
        or since_moment is None
        or not isinstance(location, str)
        or not isinstance(content_hash, str)
    ):
        raise source.bad_row(
            "quarantine",
            name,
            "reason, location or content_hash mistyped, or since not a time caplet wrote",
            f"release it (caplet release {name}) and let caplet record it again",
        )
    return QuarantineRecord(
        name=name,
        reason=reason,
        since=since_moment,
        location=location,
        content_hash=content_hash,
    )


def decision_from_row(source: RowSource, row: Sequence[object]) -> Decision:
    """A log entry from ``id, at, plugin, action, target, allowed, detail``.

    ``allowed`` is 0/1 in SQLite and a boolean in PostgreSQL; both compare
    equal to 0 and 1 (``True == 1``), anything else is refused.
    """
    row_id, at, plugin, action, target, allowed, detail = row
    moment = instant(at)
    if (
        not isinstance(row_id, int)
        or moment is None
        or not isinstance(plugin, str)
        or not isinstance(action, str)
        or not isinstance(target, str)
        or not isinstance(detail, str)
        or allowed not in (0, 1)
    ):
        raise source.bad_row("decisions", row_id, DECISION_PROBLEM, source.edited_log)
    return Decision(
        at=moment,
        plugin=plugin,
        action=action,
        target=target,
        allowed=bool(allowed),
        detail=detail,
        id=row_id,
    )


def span_from_row(source: RowSource, count: object, oldest: object) -> tuple[int, float | None]:
    """``count(*), min(at)`` of the decision log as retention reads it. SQLite's ``min``
    of a column whose every row holds text or a blob is that text (its type order), so
    ``min(at)`` is checked as a row's ``at`` is."""
    if not isinstance(count, int) or isinstance(count, bool):
        raise source.bad_row("decisions", "count(*)", "not an integer", source.edited_log)
    if oldest is None:
        return count, None
    moment = instant(oldest)
    if moment is None:
        raise source.bad_row(
            "decisions", "min(at)", "the oldest time is no time caplet wrote", source.edited_log
        )
    return count, moment


def kv_value(source: RowSource, plugin: str, key: str, value: object) -> bytes:
    """A ``ctx.kv`` value: bytes, as written."""
    if not isinstance(value, bytes):
        raise source.bad_row("kv", f"{plugin}/{key}", "value is not a blob", source.edited_table)
    return value


def decision_filter(
    placeholder: str,
    *,
    plugin: str | None,
    since: float | None,
    allowed: bool | None,
    action: str | None,
    allowed_value: Callable[[bool], object] = bool,
) -> tuple[str, tuple[object, ...]]:
    """The ``WHERE`` clause (``""`` for none, else ending in a space) and its values for
    the decision log's filters, with *placeholder* (``?`` for SQLite, ``%s`` for
    psycopg). The clause is caplet's own text; every value is a parameter.
    ``allowed_value`` stores the flag as the backend does (SQLite: an int)."""
    clauses: list[str] = []
    values: list[object] = []
    for column, value in (
        ("plugin =", plugin),
        ("at >=", since),
        ("allowed =", None if allowed is None else allowed_value(allowed)),
        ("action =", action),
    ):
        if value is not None:
            clauses.append(f"{column} {placeholder}")
            values.append(value)
    return (f"WHERE {' AND '.join(clauses)} " if clauses else ""), tuple(values)


#: The ``kv`` rows no plugin reads until one claims them, besides the unlocated ones
#: (decide14): those at an installed plugin's place without its environment,
#: ``distribution NAME`` (attack15), as the two patterns of ``location LIKE ? AND
#: location NOT LIKE ?`` (a canonical distribution name holds no space).
LEGACY_PLACES: Final = ("distribution %", "% in %")


def unclaimed_problems(
    source: RowSource, kv: Sequence[Sequence[object]], quarantined: Sequence[object]
) -> list[StateProblem]:
    """The rows written before caplet kept plugin places that no plugin has claimed
    (decide14), or stored at an installed plugin's place before caplet kept its
    environment (attack15): *kv* as ``(plugin, location, count)``, *quarantined* the names.
    Warnings, each naming the plugin and the fix."""
    problems = [
        StateProblem(
            kind=ProblemKind.UNCLAIMED,
            path=source.path,
            message=(
                f"{source.what}: {count} ctx.kv entries of plugin {plugin!r} were written "
                "before caplet kept plugin places and belong to no plugin yet (no plugin "
                "reads them); they go to the plugin enabled on the approval of that name: "
                f"caplet approve {plugin} where it is, then enable it"
                if not location
                else f"{source.what}: {count} ctx.kv entries of plugin {plugin!r} were "
                f"stored at {location!r} before caplet kept an installed plugin's "
                "environment and belong to no plugin yet (no plugin reads them); they go to "
                "the plugin approved again in its environment: caplet approve "
                f"{plugin} there, then enable it"
            ),
        )
        for plugin, location, count in kv
    ]
    problems += [
        StateProblem(
            kind=ProblemKind.UNCLAIMED,
            path=source.path,
            message=(
                f"{source.what}: the quarantine of plugin {name!r} was recorded before "
                "caplet kept plugin places, so it stops every plugin of that name; "
                f"caplet release {name} when the cause is fixed"
            ),
        )
        for name in quarantined
    ]
    return problems


def usage_drift_query(schema: str, row_bytes: str, placeholder: str) -> str:
    """The plugins whose ``kv_usage`` row (schema 10) disagrees with their ``kv`` rows:
    ``(plugin, location, keys and bytes counted, keys and bytes held)``, at most
    *placeholder* rows. *schema* prefixes the tables (``caplet.`` or ``""``), *row_bytes*
    is what one row counts toward the quota in the backend's SQL. A UNION rather than a
    FULL JOIN, which SQLite has only since 3.39."""
    return (
        "SELECT plugin, location, sum(uk), sum(ub), sum(kk), sum(kb) FROM ("  # noqa: S608
        f"SELECT plugin, location, key_count AS uk, byte_count AS ub, 0 AS kk, 0 AS kb "
        f"FROM {schema}kv_usage UNION ALL "
        f"SELECT plugin, location, 0, 0, 1, {row_bytes} FROM {schema}kv"
        ") AS counted GROUP BY plugin, location "
        "HAVING sum(uk) <> sum(kk) OR sum(ub) <> sum(kb) "
        f"ORDER BY plugin, location LIMIT {placeholder}"
    )


def usage_problems(
    source: RowSource, schema: str, drifted: Sequence[Sequence[object]]
) -> list[StateProblem]:
    """A ``RECORD`` problem per row of :func:`usage_drift_query`: the quota of that plugin
    is checked against a wrong count, so the fix writes the right one."""

    def quoted(text: object) -> str:
        return "'" + str(text).replace("'", "''") + "'"

    return [
        StateProblem(
            kind=ProblemKind.RECORD,
            path=source.path,
            message=(
                f"{source.what}: the ctx.kv usage of plugin {plugin!r} at {location!r} says "  # noqa: S608
                f"{counted_keys} keys and {counted_bytes} bytes, but its entries are {keys} "
                f"keys and {total} bytes (table {schema}kv_usage was edited outside caplet), so "
                f"its quota is checked against the wrong count; with {source.editor} run: "
                f"DELETE FROM {schema}kv_usage WHERE plugin = {quoted(plugin)} AND location = "
                f"{quoted(location)}; INSERT INTO {schema}kv_usage (plugin, location, "
                f"key_count, byte_count) VALUES ({quoted(plugin)}, {quoted(location)}, "
                f"{keys}, {total})"
            ),
        )
        for plugin, location, counted_keys, counted_bytes, keys, total in drifted
    ]
