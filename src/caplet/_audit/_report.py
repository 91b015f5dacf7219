"""The audit report a human reads before approving (seed 000, "Audit display").

:func:`audit_report` produces lines tagged with a :class:`Tone`;
:func:`format_audit_result` joins them into plain text (readable without
colour, in logs, in CI), and the CLI renderer maps tones to colours. Text
from the plugin or the model is never interpreted as markup by either.

Shown: plugin, content hash, time, auditor (model or "static-only", and why
a configured model was not used), canary status, risk, recommendation,
summary, description accuracy, risk reasons, declared vs observed
capabilities, the composition-risk lint, reported injection attempts, and
findings: danger ones in full with file:line, the others counted unless
``verbose``.

Most of it is someone else's text: the plugin's name, capabilities and
source excerpts, the model's summary, reasons, file names and findings. It
is escaped here (:mod:`caplet._display`), for the terminal and for the log
or CI page that shows :func:`format_audit_result`; and a newline in a
multi-line value starts a line indented under the value, so a summary
cannot add a line that reads like the report's own (``  risk: LOW``).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from caplet._audit._model import AuditResult, CanaryStatus
from caplet._capabilities._parse import parse_capability
from caplet._display import listed, safe_line, safe_text
from caplet._errors import CapabilityError
from caplet._findings import Finding, RiskLevel, Severity

__all__ = [
    "ReportLine",
    "Tone",
    "audit_report",
    "canary_meaning",
    "format_audit_result",
    "risk_tone",
]

#: Rule-id prefix of the capability composition lint (caplet._capabilities._lint).
_LINT_PREFIX = "CAP"

#: Rule id of the note on a static-only audit the operator chose
#: (caplet._audit._deep.RULE_STATIC_CHOSEN; not imported: _deep needs the providers).
_STATIC_CHOSEN = "CPL-AUDIT-009"

#: Where the continuation lines of a finding start: past the indent and the severity column.
_FINDING_INDENT = 12


def _block(prefix: str, text: str, indent: int | None = None) -> str:
    """``prefix`` and ``text``, escaped; further lines indented (``len(prefix)`` by default)."""
    margin = "\n" + " " * (len(prefix) if indent is None else indent)
    return prefix + safe_text(text).strip("\n").replace("\n", margin)


class Tone(enum.Enum):
    """How a report line should stand out where colour is available."""

    PLAIN = "plain"
    TITLE = "title"
    GOOD = "good"
    NOTICE = "notice"
    BAD = "bad"
    ALARM = "alarm"


@dataclass(frozen=True, slots=True)
class ReportLine:
    """One line of the report and its tone."""

    text: str
    tone: Tone = Tone.PLAIN


def risk_tone(risk: RiskLevel) -> Tone:
    """LOW good, MEDIUM notice, HIGH bad, CRITICAL alarm."""
    if risk is RiskLevel.LOW:
        return Tone.GOOD
    elif risk is RiskLevel.MEDIUM:
        return Tone.NOTICE
    elif risk is RiskLevel.HIGH:
        return Tone.BAD
    elif risk is RiskLevel.CRITICAL:
        return Tone.ALARM
    else:
        assert_never(risk)


def _severity_tone(severity: Severity) -> Tone:
    if severity is Severity.DANGER:
        return Tone.BAD
    elif severity is Severity.WARNING:
        return Tone.NOTICE
    elif severity is Severity.INFO:
        return Tone.PLAIN
    else:
        assert_never(severity)


def canary_meaning(result: AuditResult) -> str:
    """What the canary status of ``result`` means for the person reading it (one sentence).

    Shown under the status by ``caplet audit`` and ``caplet approve`` and
    put in their JSON: a status word alone invites reading OK as "safe".
    """
    status = result.canary_status
    if status is None:
        if result.static_only:
            return (
                "no model read the plugin, so nothing checked it for behaviour the static "
                "scanner cannot see"
            )
        return (
            "the model's answer could not be parsed, so whether it was steered is unknown; "
            "its assessment is not used"
        )
    if status is CanaryStatus.OK:
        return (
            "the model reported both test injections caplet planted, with their text: it read "
            "the files and did not obey instructions written in them. It does not prove the "
            "model judged the risk right: the findings and your review still decide"
        )
    elif status is CanaryStatus.COMPROMISED:
        return (
            "the model missed a test injection caplet planted: the plugin's text may have "
            "steered it, so its assessment is not trusted (risk CRITICAL); review the plugin "
            "yourself"
        )
    elif status is CanaryStatus.UNRELIABLE:
        return (
            "the model reported both test injections but also identifiers that exist nowhere: "
            "it invents things, so check each of its findings yourself"
        )
    else:
        assert_never(status)


def _canary_lines(result: AuditResult) -> list[ReportLine]:
    status = result.canary_status
    tone = Tone.PLAIN
    if status is None:
        word = "not used (static-only)" if result.static_only else "not verified"
        tone = Tone.PLAIN if result.static_only else Tone.BAD
    elif status is CanaryStatus.OK:
        word, tone = "OK", Tone.GOOD
    elif status is CanaryStatus.COMPROMISED:
        word, tone = "AUDITOR_COMPROMISED", Tone.ALARM
    elif status is CanaryStatus.UNRELIABLE:
        word, tone = "AUDITOR_UNRELIABLE", Tone.NOTICE
    else:
        assert_never(status)
    return [
        ReportLine(f"  canaries:        {word}", tone),
        ReportLine(_block("                   ", canary_meaning(result)), tone),
    ]


def _auditor_line(result: AuditResult) -> ReportLine:
    if not result.static_only:
        answered = (
            f" (the server answered as {safe_line(result.answered_as)})"
            if result.answered_as and result.answered_as != result.model
            else ""
        )
        return ReportLine(
            f"  auditor:         {safe_line(result.provider)} model {safe_line(result.model)}"
            f"{answered}"
        )
    if result.fallback_reason:
        # The reason may quote the provider's error body: someone else's text.
        return ReportLine(
            f"  auditor:         static-only (the configured model failed, so the audit fails "
            f"closed: {safe_line(result.fallback_reason)})",
            Tone.BAD,
        )
    if any(f.rule_id == _STATIC_CHOSEN for f in result.findings):
        return ReportLine(
            "  auditor:         static-only by the operator's choice (a model is configured "
            "but was not consulted)",
            Tone.NOTICE,
        )
    return ReportLine("  auditor:         static-only (no model configured)")


def _description_line(result: AuditResult) -> ReportLine:
    if result.description_accurate is True:
        return ReportLine("  description:     accurate (judged by the model)", Tone.GOOD)
    if result.description_accurate is False:
        return ReportLine("  description:     NOT accurate or not trusted", Tone.BAD)
    return ReportLine("  description:     not judged (only a model can judge it)")


def _is_declared(observed: str, declared: Sequence[str]) -> bool:
    if observed in declared:
        return True
    try:
        seen = parse_capability(observed)
    except CapabilityError:
        return False
    for text in declared:
        try:
            if parse_capability(text) == seen:
                return True
        except CapabilityError:
            continue
    return False


def _where(finding: Finding) -> str:
    if finding.file and finding.line:
        return f"{finding.file}:{finding.line}"
    if finding.file:
        return finding.file
    # File-less: the lint is about the manifest's capabilities, the rest
    # (an auditor's verdict, a model finding without a place) about the plugin.
    return "manifest" if finding.rule_id.startswith(_LINT_PREFIX) else "(plugin)"


def _finding_line(finding: Finding) -> ReportLine:
    covered = (
        f" (covered by {finding.capability})" if finding.covered and finding.capability else ""
    )
    if covered and covered.strip() in finding.message:
        covered = ""  # the scanner's own message says so already
    head = f"    {finding.severity.value.upper():<7} {safe_line(_where(finding))} "
    return ReportLine(
        _block(f"{head}{safe_line(finding.rule_id)}: ", finding.message, _FINDING_INDENT)
        + safe_line(covered),
        _severity_tone(finding.severity),
    )


def audit_report(result: AuditResult, *, verbose: bool = False) -> tuple[ReportLine, ...]:
    """The report as tagged lines (see the module docstring for what is shown)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result.created_at))
    lines = [
        ReportLine(f"Audit report: {safe_line(result.plugin)}", Tone.TITLE),
        ReportLine(f"  content:         {result.content_hash}"),
        ReportLine(f"  time:            {when}"),
        _auditor_line(result),
        *_canary_lines(result),
        ReportLine(f"  risk:            {result.risk_level.value}", risk_tone(result.risk_level)),
        ReportLine(f"  recommendation:  {result.verdict.value}", risk_tone(result.risk_level)),
        ReportLine(_block("  summary:         ", result.summary)),
        _description_line(result),
    ]
    if result.risk_reasons:
        lines.append(ReportLine("  risk reasons:"))
        lines.extend(ReportLine(_block("    - ", reason)) for reason in result.risk_reasons)
    declared = result.declared_capabilities
    shown_declared = listed(declared) or "none"
    lines.append(ReportLine(f"  capabilities declared: {shown_declared}"))
    if result.static_only:
        lines.append(ReportLine("  capabilities observed: not judged (static-only)"))
    elif result.observed_capabilities:
        lines.append(ReportLine("  capabilities observed:"))
        for observed in result.observed_capabilities:
            if _is_declared(observed, declared):
                lines.append(ReportLine(f"    - {safe_line(observed)}"))
            else:
                lines.append(ReportLine(f"    - {safe_line(observed)} (NOT declared)", Tone.BAD))
    else:
        lines.append(ReportLine("  capabilities observed: none reported"))
    lint = [f for f in result.findings if f.rule_id.startswith(_LINT_PREFIX)]
    if lint:
        lines.append(ReportLine("  composition risks:"))
        lines.extend(
            ReportLine(_block(f"    - {f.rule_id}: ", f.message, 6), _severity_tone(f.severity))
            for f in lint
        )
    else:
        lines.append(ReportLine("  composition risks: none"))
    if result.injection_attempts:
        lines.append(
            ReportLine(
                f"  injection attempts reported by the model: {len(result.injection_attempts)}",
                Tone.BAD,
            )
        )
        for attempt in result.injection_attempts:
            where = f" at {attempt.file}:{attempt.line}" if attempt.file else ""
            # repr escapes the excerpt's control characters and shows where it ends.
            excerpt = " ".join(attempt.excerpt.split())
            reason = f" ({attempt.reason})" if attempt.reason else ""
            lines.append(ReportLine(f"    - {excerpt!r}{safe_line(where + reason)}", Tone.BAD))
    counts = {s: sum(1 for f in result.findings if f.severity is s) for s in Severity}
    lines.append(
        ReportLine(
            f"  findings: {counts[Severity.DANGER]} danger, {counts[Severity.WARNING]} warning, "
            f"{counts[Severity.INFO]} info"
        )
    )
    shown = [f for f in result.findings if verbose or f.severity is Severity.DANGER]
    lines.extend(_finding_line(f) for f in shown)
    hidden = len(result.findings) - len(shown)
    if hidden:
        lines.append(
            ReportLine(f"    ({hidden} warning/info finding(s) not listed; --verbose lists them)")
        )
    return tuple(lines)


def format_audit_result(result: AuditResult, *, verbose: bool = False) -> str:
    """The audit report as plain text (no colour, no markup), one line per item."""
    return "\n".join(line.text for line in audit_report(result, verbose=verbose))
