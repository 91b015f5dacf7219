"""Audit results: the verdict of the static scan and of an LLM auditor.

One :class:`AuditResult` describes one exact plugin tree (``content_hash``)
as judged by one auditor (``model_id``: ``""`` for static-only). The fields
added for the LLM auditor all have defaults, so a static-only audit, and
every audit cached before they existed, reads the same as before.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass

from caplet._findings import Finding, RiskLevel

__all__ = [
    "STATIC_ONLY",
    "AuditResult",
    "CanaryStatus",
    "InjectionAttempt",
    "Verdict",
    "answered_name",
    "reviewer",
    "stricter_verdict",
]

#: Provider label of an audit made without a model (design.md section 7).
STATIC_ONLY = "static-only"


def reviewer(provider: str, model: str, endpoint: str, answered_as: str = "") -> str:
    """A review as an approval or a lock entry records it (steer33, steer35):
    ``static-only``; ``provider:model at <api root>`` (the server the model answered from,
    :func:`caplet._audit._provider.api_root`); ``provider:model`` when the server is not
    known, which vouches for nothing (:mod:`caplet._host._review_pins`).

    ``answered_as`` is the model the server's answer said answered (its ``model`` field),
    when it is another than the one asked for: ``provider:model (answered as X) at
    <api root>`` (steer37). A gateway that routes by API key (a virtual key, another
    machine's key) answers one name with different models, and its answer says which."""
    if provider == STATIC_ONLY:
        return STATIC_ONLY
    named = f"{provider}:{model}"
    if answered_as and answered_as != model:
        named = f"{named} (answered as {answered_as})"
    return f"{named} at {endpoint}" if endpoint else named


#: A model's name as a server writes it: printable ASCII without blanks, bounded.
_MODEL_NAME = re.compile(r"[\x21-\x7e]{1,200}")


def answered_name(value: object) -> str:
    """The model a server's answer says answered (its ``model`` field), as a review
    records it: ``""`` when the answer names none; a name that is not printable ASCII
    without blanks, or is longer than 200 characters, by a digest of it (``sha256:`` and
    16 hex digits), so a review stays one line and its server is still parsed from the
    last " at " (:func:`caplet._host._review_pins.server_of`)."""
    if not isinstance(value, str) or not value:
        return ""
    if _MODEL_NAME.fullmatch(value):
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Verdict(enum.Enum):
    """The auditor's recommendation (the seed's ``recommendation``)."""

    APPROVE = "approve"
    APPROVE_WITH_CONDITIONS = "approve-with-conditions"
    REJECT = "reject"

    @property
    def order(self) -> int:
        """0 (approve) .. 2 (reject): the stricter of two verdicts has the larger order."""
        return _VERDICT_ORDER[self]


_VERDICT_ORDER = {Verdict.APPROVE: 0, Verdict.APPROVE_WITH_CONDITIONS: 1, Verdict.REJECT: 2}


def stricter_verdict(a: Verdict, b: Verdict) -> Verdict:
    """The more cautious of two recommendations."""
    return a if a.order >= b.order else b


class CanaryStatus(enum.Enum):
    """Whether the model reported the two planted test injections (seed 000).

    ``OK``: both were reported. ``COMPROMISED``: one or both were missed, so
    the plugin's content may have steered the model. ``UNRELIABLE``: the
    model reported identifiers that exist neither among the canaries nor in
    the plugin, so it invents things.
    """

    OK = "OK"
    COMPROMISED = "AUDITOR_COMPROMISED"
    UNRELIABLE = "AUDITOR_UNRELIABLE"


@dataclass(frozen=True, slots=True)
class InjectionAttempt:
    """A passage the model reported as trying to instruct it.

    ``file`` and ``line`` (1-based, 0 when unknown) locate the excerpt in the
    *original* plugin files when caplet could find it there.
    """

    excerpt: str
    reason: str = ""
    file: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class AuditResult:
    """One audit of one exact plugin tree (``content_hash``).

    ``provider`` is ``"static-only"`` when no model was consulted, and must be
    shown wherever the result is; otherwise it names the provider kind
    (``"openai"``, ``"anthropic"``) and ``model`` the model. ``created_at`` is
    seconds since the epoch. ``verdict`` is the recommendation.

    LLM-auditor fields: ``canary_status`` (``None`` when no model answered),
    ``injection_attempts`` the model reported (other than our canaries),
    ``declared_capabilities`` (the manifest's, as written) next to
    ``observed_capabilities`` (what the model saw the code do), and
    ``fallback_reason``: why a configured model was *not* consulted (the
    result is then static-only). ``endpoint`` is the API root the model's answer came
    from (:func:`caplet._audit._provider.provider_endpoint`; ``""``: not known, an
    application's own provider that names none, or an audit of an earlier caplet): part
    of the review an approval records (steer35). ``rules`` names the code that judged it
    (:func:`caplet._audit._rules_digest.rules_digest`; ``""``: not recorded, an
    audit of an earlier caplet): a cached audit of other rules is made again.
    ``answered_as`` is the model the server's answer named (:func:`answered_name`; ``""``:
    the answer named none, or an audit of an earlier caplet): part of the review when it
    is another than ``model`` (steer37).
    """

    plugin: str
    content_hash: str
    risk_level: RiskLevel
    verdict: Verdict
    summary: str
    findings: tuple[Finding, ...]
    provider: str = STATIC_ONLY
    created_at: float = 0.0
    description_accurate: bool | None = None
    risk_reasons: tuple[str, ...] = ()
    model: str = ""
    canary_status: CanaryStatus | None = None
    injection_attempts: tuple[InjectionAttempt, ...] = ()
    declared_capabilities: tuple[str, ...] = ()
    observed_capabilities: tuple[str, ...] = ()
    fallback_reason: str = ""
    rules: str = ""
    endpoint: str = ""
    answered_as: str = ""

    @property
    def static_only(self) -> bool:
        """True when no model's answer went into this result."""
        return self.provider == STATIC_ONLY

    @property
    def model_id(self) -> str:
        """``"<provider>:<model>"``, or ``""`` for static-only: the cache key next to the hash."""
        if self.static_only:
            return ""
        return f"{self.provider}:{self.model}"

    @property
    def recommendation(self) -> Verdict:
        """The seed's name for :attr:`verdict`."""
        return self.verdict
