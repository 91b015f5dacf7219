"""The verdict: how bad each finding is in its scan mode, and the report's final list.

A rule's severity depends on what is scanned (:class:`ScanMode`): in a
plugin an undeclared capability is danger and a declared one lowers it to
the rule's covered severity; in a plain package capabilities are only
observed (info) and supply-chain findings are dropped. Threats, signals
and scanner findings keep their severity everywhere, whatever is declared:
no capability covers a threat. :func:`judge` makes that decision for every
finding; :func:`finish` de-duplicates and sorts; :func:`unused_capabilities`
reports declared capabilities no finding shows in use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from caplet._capabilities._model import (
    AppCapability,
    Capability,
    EnvReadCapability,
    FsCapability,
    HostCallCapability,
    NetHttpCapability,
    ProcExecCapability,
)
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode
from caplet._scan._rules import RuleFamily, RuleKind, rule

__all__ = ["Judgement", "file_finding", "finish", "judge", "unused_capabilities"]


@dataclass(frozen=True, slots=True)
class Judgement:
    """What a finding becomes: its severity, message, whether covered, and by what."""

    severity: Severity
    message: str
    covered: bool
    capability: str | None


def judge(
    rule_id: str,
    api: str,
    mode: ScanMode,
    *,
    covered: bool,
    capability: str | None,
    escalation: str | None = None,
) -> Judgement | None:
    """The severity and message of a finding of ``rule_id``, or ``None`` to drop it.

    In package mode a capability finding is an observed capability (info, no
    "declare ..." hint: there is no manifest to declare it in), and findings
    that only make sense against a manifest are dropped. ``escalation`` makes
    a signal danger and says why (text aimed at the auditor beside a
    dangerous capability or a threat, CPL-AUD-001).
    """
    r = rule(rule_id)
    if r.covered_by is not None and capability is None:
        capability = r.covered_by.value
    text = r.message.format(api=api)
    if escalation is not None:
        return Judgement(Severity.DANGER, f"{text}, {escalation}; {r.hint}", False, capability)
    if mode is ScanMode.PACKAGE and r.kind is RuleKind.SCANNER and r.severity is Severity.DANGER:
        # A package's file the scanner could not read whole is reported, not a
        # verdict on the package; a plugin's is refused (the gate fails closed).
        return Judgement(Severity.WARNING, f"{text}; {r.hint}", False, capability)
    if mode is ScanMode.PACKAGE and r.kind is RuleKind.CAPABILITY:
        if r.family is RuleFamily.SUPPLY_CHAIN:
            return None  # a package's own dependencies are not a finding
        return Judgement(Severity.INFO, f"observed capability: {text}", False, capability)
    if covered and r.covered_severity is not None:
        return Judgement(r.covered_severity, f"{text} (covered by {capability})", True, capability)
    message = f"{text}; {r.hint}" if r.hint else text
    return Judgement(r.severity, message, False, capability)


def file_finding(
    relative: str, rule_id: str, api: str, mode: ScanMode = ScanMode.PLUGIN
) -> list[Finding]:
    """A finding about a whole file (no line): unreadable, too large, not regular."""
    verdict = judge(rule_id, api, mode, covered=False, capability=None)
    if verdict is None:
        return []
    return [
        Finding(
            rule_id=rule_id,
            severity=verdict.severity,
            message=verdict.message,
            file=relative,
            line=0,
            column=0,
            excerpt="",
            capability=verdict.capability,
            covered=False,
        )
    ]


def finish(findings: Sequence[Finding]) -> list[Finding]:
    """Deduplicate on (rule, file, line, column), keeping the most severe; sort."""
    best: dict[tuple[str, str, int, int], Finding] = {}
    for f in findings:
        key = (f.rule_id, f.file, f.line, f.column)
        kept = best.get(key)
        if kept is None or f.severity.rank < kept.severity.rank:
            best[key] = f
    return sorted(best.values(), key=Finding.sort_key)


def unused_capabilities(
    capabilities: Sequence[Capability], findings: Sequence[Finding]
) -> list[Finding]:
    """Declared capabilities no finding shows in use (over-broad manifest), as info.

    Evidence of use is a covered finding naming the capability or its kind;
    capabilities the scanner cannot see used (net.http, host.call and app go
    through ``ctx`` with values from anywhere; templated values) are never
    reported.
    """
    used_kinds = {f.capability.split(":", 1)[0] for f in findings if f.covered and f.capability}
    used_exact = {f.capability for f in findings if f.covered and f.capability}
    unused: list[Finding] = []
    for cap in capabilities:
        if cap.templated or isinstance(cap, HostCallCapability | AppCapability):
            continue
        if isinstance(cap, EnvReadCapability | ProcExecCapability):
            seen = str(cap) in used_exact or (
                isinstance(cap, ProcExecCapability) and cap.kind.value in used_kinds
            )
        elif isinstance(cap, FsCapability):
            seen = bool(used_kinds & {"fs.read", "fs.write"})
        elif isinstance(cap, NetHttpCapability):
            # ctx.http.fetch(url) takes URLs from anywhere (config, arguments):
            # a URL literal naming the host is evidence, its absence is not
            seen = True
        else:
            assert_never(cap)
        if not seen:
            unused.extend(file_finding("", "CPL-MAN-001", str(cap)))
    return unused
