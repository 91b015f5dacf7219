"""The deep audit: static findings, canaries, one model answer, verification, verdict.

Seed 000's ``deepAudit``, in order:

1. the static audit (scanner + capability lint) is the floor: nothing the
   model says can lower the risk below it;
2. two canaries are planted in one randomly chosen Python file
   (:mod:`caplet._audit._canary`) and the prompt is built
   (:mod:`caplet._audit._prompt`), or refused when too large;
3. the provider answers; a :class:`ProviderError` (unreachable, timeout,
   retries exhausted) gives a static-only result labelled with the reason:
   HIGH/reject with any danger finding, else MEDIUM/approve-with-conditions
   (never LOW: a model was asked for and did not answer);
4. the answer is parsed fail-closed (:mod:`caplet._audit._response`) and the
   canaries verified; then the verdict rules:

   * COMPROMISED: CRITICAL, reject, description judged inaccurate, and a
     leading danger finding "AUDITOR COMPROMISED: ..."; the model's summary
     is not shown (it may be the plugin's words);
   * UNRELIABLE: a leading warning, LOW raised to MEDIUM;
   * findings and injection reports quoting our canary UUIDs are removed
     (matched on the UUIDs, never on wording);
   * every other reported injection becomes a finding, danger when its text
     is really in the plugin (located to file:line), a warning otherwise;
     text found only in our canaries (a canary line without the UUID) is
     dropped: where the text is, not how it reads, decides;
   * description judged inaccurate: LOW/MEDIUM raised to HIGH and one danger
     finding about the manifest;
   * model line numbers are mapped back from the canary-injected file;
   * static and model findings are merged, static first, de-duplicated on
     the normalised message (the static one, with its line, wins);
   * the risk is the highest of the model's, the static floor and what the
     merged findings imply; the recommendation the stricter of the model's
     and the one that risk implies.
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from caplet._audit._canary import CanaryInjection, find_uuids, inject_canaries, verify_canaries
from caplet._audit._model import (
    STATIC_ONLY,
    AuditResult,
    CanaryStatus,
    InjectionAttempt,
    Verdict,
    stricter_verdict,
)
from caplet._audit._prompt import PluginFile, build_prompt, new_nonce, read_plugin_files, text_lines
from caplet._audit._provider import AuditorProvider
from caplet._audit._response import ModelReport, parse_audit_response
from caplet._audit._static import static_audit, verdict_for
from caplet._capabilities._lint import lint_composition
from caplet._errors import AuditError, ProviderError
from caplet._findings import Finding, RiskLevel, Severity
from caplet._manifest._load import load_manifest
from caplet._manifest._model import Manifest
from caplet._scan._scanner import scan_tree

__all__ = [
    "RULE_COMPROMISED",
    "RULE_DESCRIPTION",
    "RULE_FALLBACK",
    "RULE_INJECTION",
    "RULE_NOT_JUDGED",
    "RULE_UNRELIABLE",
    "deep_audit",
    "fallback_audit",
    "judge",
]

RULE_COMPROMISED: Final = "CPL-AUDIT-001"
RULE_UNRELIABLE: Final = "CPL-AUDIT-002"
RULE_DESCRIPTION: Final = "CPL-AUDIT-003"
RULE_INJECTION: Final = "CPL-AUDIT-004"
RULE_FALLBACK: Final = "CPL-AUDIT-007"
RULE_NOT_JUDGED: Final = "CPL-AUDIT-008"

#: Bytes per character at most in UTF-8: files bigger than this many times
#: the character budget cannot fit, so they are refused before being read.
_UTF8_MAX = 4

#: A reported injection excerpt must have this many characters to be located.
_MIN_EXCERPT = 8


def _max_risk(*levels: RiskLevel) -> RiskLevel:
    return max(levels, key=lambda r: r.order)


def _raise_to(risk: RiskLevel, floor: RiskLevel) -> RiskLevel:
    return _max_risk(risk, floor)


def _normalise(message: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", message.lower()).split())


def _dedupe(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Keep the first finding of each normalised message (static ones come first)."""
    seen: set[str] = set()
    kept: list[Finding] = []
    for finding in findings:
        key = _normalise(finding.message)
        if key in seen:
            continue
        seen.add(key)
        kept.append(finding)
    return tuple(kept)


def _floor_of(findings: Iterable[Finding]) -> RiskLevel:
    """The static audit's rule applied to any findings: uncovered danger HIGH, else
    any danger or warning MEDIUM, else LOW."""
    risk = RiskLevel.LOW
    for f in findings:
        if f.severity is Severity.DANGER and not f.covered:
            return RiskLevel.HIGH
        if f.severity is not Severity.INFO:
            risk = RiskLevel.MEDIUM
    return risk


def _clean_path(path: str) -> str:
    return path.strip().removeprefix("./")


def _map_line(
    finding: Finding, target: str, injection: CanaryInjection, lengths: dict[str, int]
) -> Finding:
    """Model line numbers refer to the files as shown; turn them into original ones."""
    file = _clean_path(finding.file)
    line = finding.line
    if file == target:
        line = injection.original_line(line)
    elif file in lengths:
        line = line if line <= lengths[file] else 0
    else:
        line = 0 if file else line
    return dataclasses.replace(finding, file=file, line=line)


def _quotes_canary(texts: Iterable[str], canaries: set[str]) -> bool:
    return any(find_uuids(text) & canaries for text in texts)


def _needles(excerpt: str) -> list[str]:
    """The substantial lines of an excerpt, without comment marks, quotes and spacing."""
    found = []
    for raw in excerpt.splitlines():
        needle = " ".join(raw.strip().strip("#").strip().strip("\"'").split())
        if len(needle) >= _MIN_EXCERPT:
            found.append(needle)
    return found


def _locate(excerpt: str, files: Sequence[PluginFile]) -> tuple[str, int] | None:
    """Where the first substantial line of ``excerpt`` occurs in the original files."""
    needles = _needles(excerpt)
    if not needles:
        return None
    for file in files:
        if file.text is None:
            continue
        for number, line in enumerate(text_lines(file.text), start=1):
            if needles[0] in " ".join(line.split()):
                return file.path, number
    return None


def _injection_findings(
    attempts: Sequence[InjectionAttempt],
    files: Sequence[PluginFile],
    canary_text: Sequence[str],
) -> tuple[tuple[InjectionAttempt, ...], tuple[Finding, ...]]:
    """Turn reported injections into findings.

    Text found in the original files is the plugin's own: a danger finding
    at its place. Text not found there but part of our canaries (a model
    quoting a canary's second line, which has no UUID) is ours and dropped:
    location decides, so a plugin copying our wording is still reported.
    Anything else is a warning to check by hand.
    """
    canaries = [" ".join(line.split()) for line in canary_text]
    located: list[InjectionAttempt] = []
    findings: list[Finding] = []
    for attempt in attempts:
        where = _locate(attempt.excerpt, files)
        quoted = " ".join(attempt.excerpt.split())[:200] or attempt.reason
        if where is not None:
            file, line = where
            located.append(dataclasses.replace(attempt, file=file, line=line))
            findings.append(
                Finding(
                    rule_id=RULE_INJECTION,
                    severity=Severity.DANGER,
                    message=(
                        f"prompt injection aimed at the auditor: {quoted!r}; a plugin that "
                        "tries to steer its review must not be trusted, remove the text"
                    ),
                    file=file,
                    line=line,
                    excerpt=attempt.excerpt,
                )
            )
            continue
        needles = _needles(attempt.excerpt)
        if needles and all(any(n in c for c in canaries) for n in needles):
            continue
        located.append(attempt)
        findings.append(
            Finding(
                rule_id=RULE_INJECTION,
                severity=Severity.WARNING,
                message=(
                    f"the auditor reported an injection attempt caplet could not find "
                    f"verbatim in the plugin: {quoted!r}; check it by hand"
                ),
                excerpt=attempt.excerpt,
            )
        )
    return tuple(located), tuple(findings)


def _description_finding(manifest_file: str, description: str, summary: str) -> Finding:
    said = f" (the auditor says: {summary})" if summary else ""
    return Finding(
        rule_id=RULE_DESCRIPTION,
        severity=Severity.DANGER,
        message=(
            f"the manifest's description {description!r} does not match what the code "
            f"does{said}; correct the description or the code before approving"
        ),
        file=manifest_file,
    )


def judge(
    static: AuditResult,
    manifest: Manifest,
    report: ModelReport,
    *,
    injection: CanaryInjection,
    target: str,
    files: Sequence[PluginFile],
    provider: str,
    model: str,
    now: float | None = None,
) -> AuditResult:
    """Apply the verdict rules (module docstring) to one parsed answer.

    ``target`` is the file the canaries were planted in and ``files`` the
    original (canary-free) plugin files.
    """
    canaries = {injection.uuid1.lower(), injection.uuid2.lower()}
    known: set[str] = set()
    for file in files:
        if file.text is not None:
            known |= find_uuids(file.text)
    known |= find_uuids(manifest.description)
    status: CanaryStatus | None = None
    if report.parsed:
        status = verify_canaries(
            injection.uuid1,
            injection.uuid2,
            report.injection_attempts,
            report.findings,
            known=known,
            other_text=(report.summary, *report.risk_reasons, *report.observed_capabilities),
        )
    attempts = tuple(
        a for a in report.injection_attempts if not _quotes_canary((a.excerpt, a.reason), canaries)
    )
    lengths = {f.path: len(text_lines(f.text)) for f in files if f.text is not None}
    model_findings = tuple(
        _map_line(f, target, injection, lengths)
        for f in report.findings
        if not _quotes_canary((f.message, f.excerpt), canaries)
    )
    shown = text_lines(injection.source)
    canary_text = [shown[n - 1] for n in injection.canary_lines]
    attempts, injection_findings = _injection_findings(attempts, files, canary_text)

    risk = _max_risk(report.risk_level, static.risk_level)
    verdict = report.recommendation
    if not report.parsed:
        summary = "the auditor's answer could not be parsed; review the plugin manually"
    else:
        summary = report.summary or "(the auditor gave no summary)"
    accurate = report.description_accurate
    reasons = [*report.risk_reasons, *static.risk_reasons]
    reasons.extend(f"auditor answer: {problem}" for problem in report.problems if report.parsed)
    leading: list[Finding] = []
    extra: list[Finding] = []
    manifest_file = manifest.path.name

    if report.parsed and accurate is False:
        risk = _raise_to(risk, RiskLevel.HIGH)
        extra.append(_description_finding(manifest_file, manifest.description, report.summary))
    elif report.parsed and accurate is None:
        extra.append(
            Finding(
                rule_id=RULE_NOT_JUDGED,
                severity=Severity.WARNING,
                message=(
                    "the auditor did not say whether the manifest's description is accurate; "
                    "compare it with the code yourself"
                ),
                file=manifest_file,
            )
        )

    merged = _dedupe((*static.findings, *extra, *injection_findings, *model_findings))
    risk = _max_risk(risk, _floor_of(merged))

    if status is CanaryStatus.UNRELIABLE:
        invented = sorted(
            find_uuids(
                " ".join(
                    (
                        *(a.excerpt + " " + a.reason for a in report.injection_attempts),
                        *(f.message + " " + f.excerpt for f in report.findings),
                        report.summary,
                        *report.risk_reasons,
                        *report.observed_capabilities,
                    )
                )
            )
            - canaries
            - known
        )
        leading.append(
            Finding(
                rule_id=RULE_UNRELIABLE,
                severity=Severity.WARNING,
                message=(
                    f"AUDITOR UNRELIABLE: the model reported identifier(s) "
                    f"{', '.join(invented)} that are neither caplet's test injections nor in "
                    "the plugin; its answer may be invented, so check its findings yourself"
                ),
            )
        )
        risk = _raise_to(risk, RiskLevel.MEDIUM)
        reasons.insert(0, "the auditor reported identifiers that do not exist (unreliable)")
    elif status is CanaryStatus.COMPROMISED:
        found: set[str] = set()
        for a in report.injection_attempts:
            found |= find_uuids(a.excerpt + " " + a.reason)
        for f in report.findings:
            found |= find_uuids(f.message + " " + f.excerpt)
        missed = len(canaries - found)
        leading.append(
            Finding(
                rule_id=RULE_COMPROMISED,
                severity=Severity.DANGER,
                message=(
                    f"AUDITOR COMPROMISED: the model did not report {missed} of the 2 test "
                    f"injections caplet planted in {target}; the plugin's content may have "
                    "manipulated it, so its assessment is not trusted; review the plugin "
                    "manually"
                ),
                file=target,
            )
        )
        risk = RiskLevel.CRITICAL
        verdict = Verdict.REJECT
        accurate = False
        summary = (
            "not trusted: the auditor missed caplet's planted test injections "
            "(see the AUDITOR COMPROMISED finding)"
        )
        reasons.insert(0, "the auditor missed the planted test injections (compromised)")

    verdict = stricter_verdict(verdict, verdict_for(risk))
    return AuditResult(
        plugin=static.plugin,
        content_hash=static.content_hash,
        risk_level=risk,
        verdict=verdict,
        summary=summary,
        findings=(*leading, *merged),
        provider=provider,
        created_at=time.time() if now is None else now,
        description_accurate=accurate,
        risk_reasons=tuple(dict.fromkeys(reasons)),
        model=model,
        canary_status=status,
        injection_attempts=attempts,
        declared_capabilities=tuple(c.declared for c in manifest.capabilities),
        observed_capabilities=report.observed_capabilities,
    )


def fallback_audit(static: AuditResult, reason: str, *, now: float | None = None) -> AuditResult:
    """The static-only result when the configured model could not be consulted.

    HIGH/reject with any danger finding (covered or not), otherwise
    MEDIUM/approve-with-conditions; labelled static-only, with ``reason`` in
    ``fallback_reason`` and in a warning finding.
    """
    danger = any(f.severity is Severity.DANGER for f in static.findings)
    risk = RiskLevel.HIGH if danger else RiskLevel.MEDIUM
    verdict = Verdict.REJECT if danger else Verdict.APPROVE_WITH_CONDITIONS
    warning = Finding(
        rule_id=RULE_FALLBACK,
        severity=Severity.WARNING,
        message=(
            f"the LLM auditor was not consulted ({reason}); this is a static-only result, "
            "re-run the audit when the model is reachable"
        ),
    )
    return dataclasses.replace(
        static,
        risk_level=_max_risk(risk, static.risk_level),
        verdict=stricter_verdict(verdict, static.verdict),
        summary=f"static-only (the LLM auditor failed): {static.summary}",
        findings=(*static.findings, warning),
        provider=STATIC_ONLY,
        model="",
        canary_status=None,
        created_at=time.time() if now is None else now,
        risk_reasons=(f"the LLM auditor failed: {reason}", *static.risk_reasons),
        fallback_reason=reason,
    )


def deep_audit(
    provider: AuditorProvider,
    plugin_dir: Path | str,
    content_hash: str,
    *,
    manifest: Manifest | None = None,
    static: AuditResult | None = None,
    rng: random.Random | None = None,
    now: float | None = None,
) -> AuditResult:
    """Audit the plugin in ``plugin_dir`` (whose tree hash is ``content_hash``) with a model.

    ``manifest`` is loaded and ``static`` computed (scan + lint) when not
    given; pass them when you have them, for the same tree. ``rng`` (default
    :class:`random.SystemRandom`) picks the canaries, their file and places,
    and the delimiter token. Raises :class:`PromptTooLargeError` for a plugin
    that does not fit the provider's budget and
    :class:`~caplet._errors.ProviderAuthError` when the provider refuses the
    key; any :class:`ProviderError` gives :func:`fallback_audit`'s result.
    """
    root = Path(plugin_dir)
    if manifest is None:
        manifest = load_manifest(root)
    if static is None:
        static = static_audit(
            manifest.name,
            content_hash,
            scan_tree(root, manifest.capabilities),
            lint_composition(manifest.capabilities),
            now=now,
            declared_capabilities=[c.declared for c in manifest.capabilities],
        )
    if static.content_hash != content_hash or static.plugin != manifest.name:
        raise AuditError(
            f"deep audit of plugin {manifest.name!r}: the static audit passed in is of "
            f"{static.plugin!r} at {static.content_hash}, not of this tree ({content_hash}); "
            "pass the static audit of the same snapshot"
        )
    if not static.declared_capabilities:
        static = dataclasses.replace(
            static, declared_capabilities=tuple(c.declared for c in manifest.capabilities)
        )
    rng = rng if rng is not None else random.SystemRandom()
    budget = provider.max_prompt_chars
    files = read_plugin_files(root, max_bytes=budget * _UTF8_MAX)
    python = [f for f in files if f.path.endswith(".py") and f.text is not None]
    if not python:
        raise AuditError(
            f"deep audit of plugin {manifest.name!r}: no readable Python file in {root} to "
            "plant the canaries in; the entry module must be UTF-8 Python source"
        )
    target = rng.choice(python)
    assert target.text is not None
    injection = inject_canaries(target.text, rng=rng)
    shown = tuple(
        dataclasses.replace(f, text=injection.source) if f.path == target.path else f for f in files
    )
    static_shown = tuple(
        dataclasses.replace(f, line=injection.injected_line(f.line))
        if f.file == target.path and f.line
        else f
        for f in static.findings
    )
    prompt = build_prompt(manifest, shown, static_shown, nonce=new_nonce(rng), max_chars=budget)
    label = f"{provider.name}:{provider.model}"
    try:
        answer = provider.complete(prompt.system, prompt.user)
    except ProviderError as exc:
        return fallback_audit(static, f"{label}: {exc}", now=now)
    report = parse_audit_response(answer)
    return judge(
        static,
        manifest,
        report,
        injection=injection,
        target=target.path,
        files=files,
        provider=provider.name,
        model=provider.model,
        now=now,
    )
