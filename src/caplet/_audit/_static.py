"""The static-only audit: a verdict from scanner and lint findings, no model.

Used when no LLM auditor is configured (design.md section 7: "no model
configured means static-only"), and as the floor under a model's verdict.
The mapping is deliberately simple and explainable:

* any danger finding no declared capability covers -> HIGH -> reject;
* otherwise any danger (covered) or warning -> MEDIUM -> approve with
  conditions;
* otherwise LOW -> approve.

CRITICAL is reserved for a compromised LLM auditor (canary verification),
which a static audit cannot detect.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import assert_never

from caplet._audit._model import STATIC_ONLY, AuditResult, Verdict
from caplet._audit._rules_digest import rules_digest
from caplet._errors import AuditError
from caplet._findings import Finding, RiskLevel, Severity
from caplet._scan._model import ScanReport

__all__ = ["risk_for", "static_audit", "verdict_for"]


def verdict_for(risk: RiskLevel) -> Verdict:
    """The recommendation for a risk level: LOW approves, HIGH and up reject."""
    if risk is RiskLevel.LOW:
        return Verdict.APPROVE
    elif risk is RiskLevel.MEDIUM:
        return Verdict.APPROVE_WITH_CONDITIONS
    elif risk is RiskLevel.HIGH or risk is RiskLevel.CRITICAL:
        return Verdict.REJECT
    else:
        assert_never(risk)


def risk_for(verdict: Verdict) -> RiskLevel:
    """The least risk a recommendation means (:func:`verdict_for`'s inverse): approve LOW,
    approve-with-conditions MEDIUM, reject HIGH."""
    if verdict is Verdict.APPROVE:
        return RiskLevel.LOW
    elif verdict is Verdict.APPROVE_WITH_CONDITIONS:
        return RiskLevel.MEDIUM
    elif verdict is Verdict.REJECT:
        return RiskLevel.HIGH
    else:
        assert_never(verdict)


def _raises_to_high(finding: Finding) -> bool:
    return finding.severity is Severity.DANGER and not finding.covered


def _raises_to_medium(finding: Finding) -> bool:
    return finding.severity is Severity.DANGER or finding.severity is Severity.WARNING


def _reasons(raises: Sequence[Finding]) -> tuple[str, ...]:
    """One line per rule among ``raises`` (sorted findings), with a count and the first place."""
    first: dict[str, Finding] = {}
    counts: dict[str, int] = {}
    for f in raises:
        first.setdefault(f.rule_id, f)
        counts[f.rule_id] = counts.get(f.rule_id, 0) + 1
    lines: list[str] = []
    for rule_id, f in first.items():
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "manifest")
        # Scanner messages are "<what>; <fix>": the reason only needs the what.
        what = f.message.split("; ", 1)[0]
        state = "uncovered " if f.severity is Severity.DANGER and not f.covered else ""
        count = f" (x{counts[rule_id]})" if counts[rule_id] > 1 else ""
        lines.append(f"{rule_id} {state}{f.severity.value}{count} at {where}: {what}")
    return tuple(lines)


def static_audit(
    plugin: str,
    content_hash: str,
    report: ScanReport,
    lint_findings: Sequence[Finding] = (),
    *,
    now: float | None = None,
    declared_capabilities: Sequence[str] = (),
) -> AuditResult:
    """Audit ``plugin`` (the exact tree ``content_hash``) from static findings only.

    The findings are the scan's plus the capability lint's, sorted by
    :meth:`Finding.sort_key`; the result's provider is ``"static-only"`` and
    ``description_accurate`` is ``None`` (only a model can judge that).
    ``now`` (seconds since the epoch) defaults to the current time;
    ``declared_capabilities`` (the manifest's, as written) are kept for the report.
    """
    if not plugin:
        raise AuditError("static audit needs the plugin's name; got an empty string")
    if not content_hash:
        raise AuditError(
            f"static audit of plugin {plugin!r} needs the content hash of the scanned tree; "
            "hash the plugin tree before auditing it"
        )
    findings = tuple(sorted((*report.findings, *lint_findings), key=Finding.sort_key))
    high = tuple(f for f in findings if _raises_to_high(f))
    medium = tuple(f for f in findings if _raises_to_medium(f))
    if high:
        risk, raising = RiskLevel.HIGH, high
    elif medium:
        risk, raising = RiskLevel.MEDIUM, medium
    else:
        risk, raising = RiskLevel.LOW, ()
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    summary = (
        f"static-only audit: {counts[Severity.DANGER]} danger, "
        f"{counts[Severity.WARNING]} warning, {counts[Severity.INFO]} info findings; "
        "no model was consulted"
    )
    return AuditResult(
        plugin=plugin,
        content_hash=content_hash,
        risk_level=risk,
        verdict=verdict_for(risk),
        summary=summary,
        findings=findings,
        provider=STATIC_ONLY,
        created_at=time.time() if now is None else now,
        description_accurate=None,
        risk_reasons=_reasons(raising),
        declared_capabilities=tuple(declared_capabilities),
        rules=rules_digest(),
    )
