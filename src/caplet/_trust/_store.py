"""The persistent trust state: a Protocol, and the records that cross it.

The host depends only on :class:`TrustStore`; :mod:`caplet._trust._sqlite`
is the implementation (SQLite, WAL). Approval is keyed by plugin name and
pinned to a content hash; audits are keyed by content hash and auditor
(``AuditResult.model_id``: ``""`` for static-only), so any change to any file
makes both stale at once, and an audit by one model never stands in for
another's. The store also holds each plugin's ``ctx.kv`` entries (issue 6).

``ctx.kv`` entries and quarantines belong to a plugin's **identity**: its name
and its location (the folder, absolute with links resolved, or ``distribution
NAME``: what an approval records, ``ApprovalRecord.location``). Another
project's plugin of the same name is another plugin (attack13d): it neither
reads the first one's entries nor shares its quarantine (decide14).
:data:`UNLOCATED` is the location of rows written before caplet kept one
(schema 8) whose plugin the store could not name when it migrated (the
approval of that name recorded no place, or there was none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from caplet._audit._model import AuditResult, Verdict
from caplet._config._schema import ConfigValue
from caplet._findings import RiskLevel

__all__ = [
    "UNLOCATED",
    "ApprovalRecord",
    "ApprovedDefaults",
    "Decision",
    "KvWrite",
    "QuarantineRecord",
    "TrustStore",
]

#: The defaults of the config fields a plugin's templated capabilities use,
#: as ``(field, default)`` pairs in the order the capabilities name them;
#: ``None`` for a field that had no default (the operator had to set it).
ApprovedDefaults = tuple[tuple[str, ConfigValue | None], ...]

#: The location of ``ctx.kv`` entries and quarantines written before caplet kept
#: one, whose plugin the migration to schema 9 could not name. Such entries are
#: read by no plugin until one claims them (:meth:`TrustStore.claim_unlocated`:
#: the host does so for a plugin enabled on the approval of its name that vouches
#: for its place, a person's decision about that very plugin); such a quarantine
#: stops every plugin of its name until it is released (the safe answer).
UNLOCATED = ""


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A persistent approval: this exact tree, with these capabilities.

    ``version`` and ``requires`` (the names of the plugins it requires) are
    what the person approved besides the capabilities; a later content is
    compared with them to tell whether it widens what was consented to
    (issue 14). ``None``: an approval recorded before caplet kept them, so
    any change of content needs fresh consent.

    ``defaults`` are the defaults behind its templated capabilities
    (``fs.read:${config.root}`` with ``root`` defaulting to ``/srv/data``):
    what such a capability reached when the operator set nothing, which a
    later content is compared with (red-team finding 8). ``None``: an
    approval recorded before caplet kept them (schema 4), which vouches for
    no default of other content.

    ``hooks`` are the application events it subscribed to: a later content
    subscribing to another one would receive data nobody agreed to hand it
    (red-team round 4). ``None``: an approval recorded before caplet kept
    them (schema 5), which vouches for no subscription of other content.

    ``agent_text`` is the text the approved content sends to the agent (its
    descriptions, argument schemas, non-secret configuration, ``[hints]``),
    one labelled entry each (:func:`caplet._host._agent_text.agent_text`):
    a later content that keeps its capabilities and rewrites that text
    steers the agent somewhere nobody agreed to (the MCP "rug pull",
    textpin). The text itself, so a person can be shown what changed.
    ``None``: an approval recorded before caplet kept it (schema 6), which
    vouches for no text of other content.

    ``location`` is where the approved plugin was: its folder (an absolute
    path) or ``distribution NAME``. An approval carries over to other content
    of the same plugin that widens nothing (a new version in the same place);
    a plugin of the same name somewhere else (another project's plugins
    directory) is another plugin, whatever it declares (attack13d). ``None``:
    an approval recorded before caplet kept it (schema 7): compared with
    nothing.

    ``programs`` are the files each ``proc.exec`` program brought when it was
    approved, as this host resolved them: the program, the interpreter its
    ``#!`` line names, its ELF loader (one line each,
    :func:`caplet._host._program_reach.program_reach`). They are host state,
    not content: a script whose ``#!`` line changed since (or a name ``PATH``
    now finds elsewhere) brings a program nobody was shown, and needs fresh
    consent (red team round 19). ``None``: an approval recorded before caplet
    kept them (schema 11), compared with nothing.

    ``review`` is what read the approved content, as its audit says: the model's
    ``"<provider>:<model>"`` (:attr:`AuditResult.model_id`) when a model's answer went
    into it, else :data:`~caplet._audit._model.STATIC_ONLY`. A later content carries
    the approval over only when its own audit is at least that review
    (:mod:`caplet._host._review_pins`, steer33): a model's approval does not vouch for
    code no model read. ``None``: recorded before caplet kept it (schema 12) and not
    told by the migration (no audit of that content, or several models' audits), which
    vouches for no other content's review. Since steer35 a model's review names the
    server too, ``"<provider>:<model> at <api root>"``
    (:func:`caplet._audit._model.reviewer`): the same model name served elsewhere is
    another reviewer, and a ``"<provider>:<model>"`` without it (steer33's record, the
    migration's) names no server, so it vouches for no other content's review either.
    The column is text on both backends: no schema change.
    """

    name: str
    content_hash: str
    capabilities: tuple[str, ...]
    approved_at: float
    risk_level: RiskLevel
    verdict: Verdict
    version: str | None = None
    requires: tuple[str, ...] | None = None
    defaults: ApprovedDefaults | None = None
    hooks: tuple[str, ...] | None = None
    agent_text: tuple[str, ...] | None = None
    location: str | None = None
    programs: tuple[str, ...] | None = None
    review: str | None = None


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A plugin taken out of service until a human releases it.

    ``location`` is where that plugin is (its identity with ``name``);
    :data:`UNLOCATED` for one recorded before caplet kept it, which stops every
    plugin of that name. ``content_hash`` is the content it stopped, which it
    stops under that name wherever it runs: the same code misbehaves alike, and a
    fleet's nodes keep their plugins at other paths (``""``: recorded before
    caplet kept it).
    """

    name: str
    reason: str
    since: float
    location: str = UNLOCATED
    content_hash: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """One entry of the permission/decision log (design.md layer 15).

    ``action`` is what was decided about (``approve``, ``enable``,
    ``register``, ``call`` ...), ``target`` what it applied to (a module, a
    capability, a URL), ``allowed`` the outcome and ``detail`` the reason.
    ``id`` is assigned by the store (0 before it is written).
    """

    at: float
    plugin: str
    action: str
    target: str
    allowed: bool
    detail: str = ""
    id: int = 0


@dataclass(frozen=True, slots=True)
class KvWrite:
    """The outcome of :meth:`TrustStore.kv_put`.

    ``stored`` is False when the write would have taken the plugin over
    ``max_keys`` keys or ``max_bytes`` bytes (UTF-8 keys plus values); the
    old value, if any, is then unchanged. ``keys`` and ``total_bytes`` are the
    plugin's usage as it would be with the write (the refused figure, so the
    message can say by how much).
    """

    stored: bool
    keys: int
    total_bytes: int


class TrustStore(Protocol):
    """Where approvals, cached audits, quarantine, the decision log and ``ctx.kv`` live."""

    def get_approval(self, name: str) -> ApprovalRecord | None: ...

    def put_approval(self, record: ApprovalRecord) -> None: ...

    def delete_approval(self, name: str) -> bool: ...

    def list_approvals(self) -> Sequence[ApprovalRecord]: ...

    def get_audit(self, content_hash: str, model_id: str = "") -> AuditResult | None: ...

    def put_audit(self, audit: AuditResult) -> None: ...

    def get_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> QuarantineRecord | None: ...

    def put_quarantine(self, record: QuarantineRecord) -> None: ...

    def delete_quarantine(
        self, name: str, location: str = UNLOCATED, content_hash: str = ""
    ) -> bool: ...

    def list_quarantine(self) -> Sequence[QuarantineRecord]: ...

    def log_decision(self, decision: Decision) -> None: ...

    def decisions(
        self,
        plugin: str | None = None,
        limit: int = 100,
        *,
        since: float | None = None,
        allowed: bool | None = None,
        action: str | None = None,
    ) -> Sequence[Decision]: ...

    def prune_decisions(self, *, before: float, keep: int) -> int: ...

    def decisions_span(self) -> tuple[int, float | None]: ...

    def kv_get(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bytes | None: ...

    def kv_put(
        self,
        plugin: str,
        key: str,
        value: bytes,
        *,
        max_keys: int,
        max_bytes: int,
        location: str = UNLOCATED,
    ) -> KvWrite: ...

    def kv_delete(self, plugin: str, key: str, *, location: str = UNLOCATED) -> bool: ...

    def kv_keys(
        self, plugin: str, prefix: str = "", *, location: str = UNLOCATED
    ) -> Sequence[str]: ...

    def claim_unlocated(
        self, plugin: str, location: str, *, from_location: str = UNLOCATED
    ) -> int: ...

    def close(self) -> None: ...
