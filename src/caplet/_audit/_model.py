"""Audit results: the verdict of the static scan and (later) an LLM auditor."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from caplet._findings import Finding, RiskLevel

__all__ = ["STATIC_ONLY", "AuditResult", "Verdict"]

#: Provider label of an audit made without a model (design.md section 7).
STATIC_ONLY = "static-only"


class Verdict(enum.Enum):
    """The auditor's recommendation."""

    APPROVE = "approve"
    APPROVE_WITH_CONDITIONS = "approve-with-conditions"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class AuditResult:
    """One audit of one exact plugin tree (``content_hash``).

    ``provider`` is ``"static-only"`` when no model was consulted, and must be
    shown wherever the result is. ``created_at`` is seconds since the epoch.
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
