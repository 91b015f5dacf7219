"""The deep audit: static findings, canaries, one model answer, verification, verdict.

Seed 000's ``deepAudit``, in order:

1. the static audit (scanner + capability lint) is the floor: nothing the
   model says can lower the risk below it;
2. two canaries are planted in the plugin's Python files (two different
   files when there are several; :mod:`caplet._audit._canary`) and the
   prompt is built (:mod:`caplet._audit._prompt`), or refused when too large;
3. the provider answers within one deadline; a :class:`ProviderError`
   (unreachable, out of time, retries exhausted, an error status such as a
   content-policy refusal a plugin may be able to provoke) **fails closed**:
   a static-only result labelled with the reason, HIGH and reject, for
   manual review. Only the operator can choose a static-only audit instead
   (:func:`static_only_by_choice`), for that one audit;
4. the answer is parsed fail-closed (:mod:`caplet._audit._response`) and the
   canaries verified (:mod:`caplet._audit._canary_check`); then the verdict
   rules:

   * COMPROMISED (a canary missed, whatever else the answer says): CRITICAL,
     reject, description judged inaccurate, and a leading danger finding
     "AUDITOR COMPROMISED: ..."; the model's summary is not shown (it may be
     the plugin's words); identifiers it invented are reported as well;
   * UNRELIABLE (both canaries reported, but invented identifiers): a
     leading warning, LOW raised to MEDIUM;
   * the answer does not echo the tokens printed on the prompt's first and
     last lines, or one of its checkpoints between and inside the files (a
     server cut the prompt, and the model judged part of the plugin: auditor24,
     auditor27; :mod:`caplet._audit._echo`): a leading danger finding
     "AUDIT INCOMPLETE: ..." naming where the model went blind,
     at least HIGH, reject; a server that says it read far fewer prompt
     tokens than the prompt must cost is a failed model
     (:mod:`caplet._audit._prompt_read`);
   * nothing is dropped for quoting a canary: the quote is cut out of every
     finding, report, risk reason and the summary, and the rest is kept
     (a finding left with no words at all has nothing to keep);
   * every reported injection becomes a finding, danger when its text is
     really in the plugin (located to file:line, read as a model reads it:
     through invisible characters and across lines), a warning otherwise; a
     report that, once the canary quote is cut, has nothing of its own left
     was a report of the canary: where the text is, not how it reads,
     decides, so a plugin copying canary wording is still reported;
   * description judged inaccurate: LOW/MEDIUM raised to HIGH, one danger
     finding about the manifest, and a risk reason;
   * model line numbers are mapped back from the canary-injected files;
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

from caplet._audit._canary import CanaryInjection, inject_canaries
from caplet._audit._canary_check import (
    cut_canary_quotes,
    has_substance,
    verify_canaries,
)
from caplet._audit._canary_text import find_ids
from caplet._audit._echo import (
    RULE_PROMPT_CUT,
    Checkpoint,
    cut_finding,
    missed_checkpoints,
    unechoed_ends,
)
from caplet._audit._injections import RULE_INJECTION, located_injections
from caplet._audit._model import (
    STATIC_ONLY,
    AuditResult,
    CanaryStatus,
    Verdict,
    answered_name,
    stricter_verdict,
)
from caplet._audit._prompt import (
    PluginFile,
    build_prompt,
    new_nonce,
    read_plugin_files,
    text_lines,
)
from caplet._audit._prompt import (
    manifest_text as shown,
)
from caplet._audit._provider import AuditorProvider, NamesWhoAnswered, provider_endpoint
from caplet._audit._response import ModelReport, parse_audit_response
from caplet._audit._rules_digest import rules_digest
from caplet._audit._static import risk_for, static_audit, verdict_for
from caplet._capabilities._lint import lint_composition
from caplet._display import safe_line
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
    "RULE_NOT_SHOWN",
    "RULE_PROMPT_CUT",
    "RULE_STATIC_CHOSEN",
    "RULE_UNRELIABLE",
    "deep_audit",
    "fallback_audit",
    "judge",
    "static_only_by_choice",
]

RULE_COMPROMISED: Final = "CPL-AUDIT-001"
RULE_UNRELIABLE: Final = "CPL-AUDIT-002"
RULE_DESCRIPTION: Final = "CPL-AUDIT-003"
RULE_FALLBACK: Final = "CPL-AUDIT-007"
RULE_NOT_JUDGED: Final = "CPL-AUDIT-008"
RULE_STATIC_CHOSEN: Final = "CPL-AUDIT-009"
RULE_NOT_SHOWN: Final = "CPL-AUDIT-010"

#: Bytes per character at most in UTF-8: files bigger than this many times
#: the character budget cannot fit, so they are refused before being read.
_UTF8_MAX = 4


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


def _map_line(finding: Finding, injection: CanaryInjection, lengths: dict[str, int]) -> Finding:
    """Model line numbers refer to the files as shown; turn them into original ones."""
    file = _clean_path(finding.file)
    line = finding.line
    injected = injection.file(file)
    if injected is not None:
        line = injected.original_line(line)
    elif file in lengths:
        line = line if line <= lengths[file] else 0
    else:
        line = 0 if file else line
    return dataclasses.replace(finding, file=file, line=line)


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


def _not_shown_finding(unseen: Sequence[PluginFile]) -> Finding:
    """The files the model judged the plugin without (attack18: the operator is told)."""
    shown = ", ".join(f"{safe_line(file.path)} ({file.size} bytes)" for file in unseen[:10])
    more = f" and {len(unseen) - 10} more" if len(unseen) > 10 else ""
    return Finding(
        rule_id=RULE_NOT_SHOWN,
        severity=Severity.INFO,
        message=(
            f"the auditor model was not shown {len(unseen)} file{'s' if len(unseen) > 1 else ''} "
            f"it cannot read as text: {shown}{more}; it judged the plugin without them, so "
            "check what the code does with them"
        ),
    )


def _unreliable_finding(invented: Sequence[str]) -> Finding:
    return Finding(
        rule_id=RULE_UNRELIABLE,
        severity=Severity.WARNING,
        message=(
            f"AUDITOR UNRELIABLE: the model reported identifier(s) {', '.join(invented)} "
            "that are neither caplet's test injections nor in the plugin; its answer may be "
            "invented, so check its findings yourself"
        ),
    )


def _planted_in(injection: CanaryInjection) -> str:
    return " and ".join(dict.fromkeys(c.file for c in injection.canaries))


def _model_findings(
    report: ModelReport, injection: CanaryInjection, files: Sequence[PluginFile]
) -> tuple[Finding, ...]:
    """The model's findings with canary quotes cut out and lines mapped back."""
    lengths = {f.path: len(text_lines(f.text)) for f in files if f.text is not None}
    kept: list[Finding] = []
    for finding in report.findings:
        message = cut_canary_quotes(finding.message, injection.canaries)
        if not has_substance(message):
            continue  # it was nothing but a quote of a canary: nothing to keep
        excerpt = cut_canary_quotes(finding.excerpt, injection.canaries)
        cut = dataclasses.replace(finding, message=message, excerpt=excerpt)
        kept.append(_map_line(cut, injection, lengths))
    return tuple(kept)


def judge(
    static: AuditResult,
    manifest: Manifest,
    report: ModelReport,
    *,
    injection: CanaryInjection,
    files: Sequence[PluginFile],
    echo: tuple[str, str],
    checkpoints: Sequence[Checkpoint] = (),
    provider: str,
    model: str,
    now: float | None = None,
) -> AuditResult:
    """Apply the verdict rules (module docstring) to one parsed answer.

    ``injection`` holds the planted canaries, ``files`` the original
    (canary-free) plugin files, ``echo`` the tokens printed on the prompt's
    first and last lines and ``checkpoints`` those between its files, which the
    answer must copy.
    """
    canaries = injection.canaries
    known: set[str] = set()
    for file in files:
        if file.text is not None:
            known |= find_ids(file.text)
    known |= find_ids(manifest.description)
    status: CanaryStatus | None = None
    unknown: tuple[str, ...] = ()
    missed = 0
    if report.parsed:
        check = verify_canaries(
            canaries,
            report.injection_attempts,
            known=known,
            other_text=(
                report.summary,
                *report.risk_reasons,
                *report.observed_capabilities,
                *(f"{f.message}\n{f.excerpt}\n{f.file}" for f in report.findings),
            ),
        )
        status, unknown, missed = check.status, check.unknown_ids, len(check.missed)
    # What the agent reads of the manifest, as parsed, is the plugin's text too (attack18):
    # a quote of it is located at the manifest file, when its raw lines do not hold it.
    # The rest of the manifest block is shown as parsed too (steer22).
    manifest_text = PluginFile(path=manifest.path.name, text="\n".join(shown(manifest)), size=0)
    attempts, injection_findings = located_injections(
        report.injection_attempts, files, injection, manifest_text
    )
    model_findings = _model_findings(report, injection, files)

    risk = _max_risk(report.risk_level, static.risk_level)
    verdict = report.recommendation
    summary_said = cut_canary_quotes(report.summary, canaries)
    if not report.parsed:
        summary = "the auditor's answer could not be parsed; review the plugin manually"
    else:
        summary = summary_said or "(the auditor gave no summary)"
    accurate = report.description_accurate
    reasons = [
        cut
        for reason in report.risk_reasons
        if has_substance(cut := cut_canary_quotes(reason, canaries))
    ]
    reasons.extend(static.risk_reasons)
    reasons.extend(f"auditor answer: {problem}" for problem in report.problems if report.parsed)
    leading: list[Finding] = []
    extra: list[Finding] = []
    manifest_file = manifest.path.name

    if report.parsed and accurate is False:
        risk = _raise_to(risk, RiskLevel.HIGH)
        extra.append(_description_finding(manifest_file, manifest.description, summary_said))
        reasons.append(
            "the auditor judged the manifest's description inaccurate: it does not say what "
            "the code does"
        )
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

    unseen = [file for file in files if file.text is None]
    if report.parsed and unseen:
        extra.append(_not_shown_finding(unseen))
    merged = _dedupe((*static.findings, *extra, *injection_findings, *model_findings))
    risk = _max_risk(risk, _floor_of(merged))

    if status is CanaryStatus.COMPROMISED:
        leading.append(
            Finding(
                rule_id=RULE_COMPROMISED,
                severity=Severity.DANGER,
                message=(
                    f"AUDITOR COMPROMISED: the model did not report {missed} of the 2 test "
                    f"injections caplet planted in {_planted_in(injection)}; the plugin's "
                    "content may have manipulated it, so its assessment is not trusted; review "
                    "the plugin manually"
                ),
                file=canaries[0].file,
            )
        )
        if unknown:
            leading.append(_unreliable_finding(unknown))
        risk = RiskLevel.CRITICAL
        verdict = Verdict.REJECT
        accurate = False
        summary = (
            "not trusted: the auditor missed caplet's planted test injections "
            "(see the AUDITOR COMPROMISED finding)"
        )
        reasons.insert(0, "the auditor missed the planted test injections (compromised)")
    elif status is CanaryStatus.UNRELIABLE:
        leading.append(_unreliable_finding(unknown))
        risk = _raise_to(risk, RiskLevel.MEDIUM)
        reasons.insert(0, "the auditor reported identifiers that do not exist (unreliable)")

    # A model shown part of the prompt judged part of the plugin (auditor24): the
    # canaries catch it only when the lost part held one, so the prompt's two ends
    # carry tokens the answer must copy, and so do checkpoints between and inside its
    # files (a lost middle, attack26); an answer without one of them fails closed.
    unechoed = unechoed_ends(report.prompt_start, report.prompt_end, echo) if report.parsed else []
    blind = missed_checkpoints(report.checkpoints, checkpoints) if report.parsed else []
    if unechoed or blind:
        leading.insert(0, cut_finding(unechoed, blind, checkpoints))
        risk = _raise_to(risk, RiskLevel.HIGH)
        verdict = Verdict.REJECT
        if status is not CanaryStatus.COMPROMISED:
            summary = (
                "not trusted: the auditor was not shown the whole prompt "
                "(see the AUDIT INCOMPLETE finding)"
            )
        if unechoed:
            reasons.insert(
                0,
                f"the auditor did not echo the prompt's {' and '.join(unechoed)} line (cut prompt)",
            )
        if blind:
            reasons.insert(
                0,
                f"the auditor did not echo {len(blind)} of the prompt's "
                f"{len(checkpoints)} checkpoints (cut prompt)",
            )

    # The recommendation and the risk are one judgement, and approval gates on the risk:
    # a model that says "reject" beside a LOW risk is read at the least risk a reject
    # means, never at the lower of its two answers (a LOW-risk audit recommending reject
    # was approvable: attack13d's report).
    meant = risk_for(verdict)
    if meant.order > risk.order:
        reasons.append(
            f"the auditor recommends {verdict.value} beside a {risk.value} risk: "
            f"read as {meant.value}, the least risk its recommendation means"
        )
        risk = meant
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
        rules=rules_digest(),
    )


def fallback_audit(static: AuditResult, reason: str, *, now: float | None = None) -> AuditResult:
    """The result when the configured model could not be consulted: fail closed.

    HIGH (CRITICAL stays CRITICAL) and reject, labelled static-only, with
    ``reason`` in ``fallback_reason`` and in a warning finding asking for a
    manual review. It never lets a plugin through that a model was meant to
    read: a plugin may be able to make the provider fail (a content-policy
    refusal), and a failure must not be cheaper than an honest review. The
    operator who wants a static-only audit says so
    (:func:`static_only_by_choice`).
    """
    warning = Finding(
        rule_id=RULE_FALLBACK,
        severity=Severity.WARNING,
        message=(
            f"the LLM auditor was not consulted ({reason}); this static-only result is HIGH "
            "risk until a person reviews the plugin: re-run the audit when the model answers, "
            "or choose a static-only audit on purpose (caplet audit/approve --static-only)"
        ),
    )
    return dataclasses.replace(
        static,
        risk_level=_max_risk(RiskLevel.HIGH, static.risk_level),
        verdict=Verdict.REJECT,
        summary=f"static-only (the LLM auditor failed; manual review needed): {static.summary}",
        findings=(*static.findings, warning),
        provider=STATIC_ONLY,
        model="",
        canary_status=None,
        created_at=time.time() if now is None else now,
        risk_reasons=(
            f"the LLM auditor failed, so the audit fails closed: {reason}",
            *static.risk_reasons,
        ),
        fallback_reason=reason,
    )


def static_only_by_choice(static: AuditResult, auditor: str) -> AuditResult:
    """A static-only audit the operator chose although ``auditor`` is configured.

    The static result itself (its risk and verdict), with an info finding and
    a summary that say no model read the plugin, by the operator's choice.
    """
    note = Finding(
        rule_id=RULE_STATIC_CHOSEN,
        severity=Severity.INFO,
        message=(
            f"static-only by the operator's choice: the configured LLM auditor {auditor} did "
            "not read this plugin, so nothing checked it for behaviour the scanner cannot see"
        ),
    )
    return dataclasses.replace(
        static,
        summary=f"static-only by choice ({auditor} not consulted): {static.summary}",
        findings=(*static.findings, note),
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
    :class:`random.SystemRandom`) picks the canaries, their files, forms and
    places, and the delimiter token. Raises :class:`PromptTooLargeError` for a plugin
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
    python = {f.path: f.text for f in files if f.path.endswith(".py") and f.text is not None}
    if not python:
        raise AuditError(
            f"deep audit of plugin {manifest.name!r}: no readable Python file in {root} to "
            "plant the canaries in; the entry module must be UTF-8 Python source"
        )
    injection = inject_canaries(python, rng=rng)
    shown = tuple(
        dataclasses.replace(f, text=injected.source)
        if (injected := injection.file(f.path)) is not None
        else f
        for f in files
    )
    static_shown = tuple(
        dataclasses.replace(f, line=injected.injected_line(f.line))
        if f.line and (injected := injection.file(f.file)) is not None
        else f
        for f in static.findings
    )
    prompt = build_prompt(
        manifest,
        shown,
        static_shown,
        nonce=new_nonce(rng),
        max_chars=budget,
        echo=(new_nonce(rng), new_nonce(rng)),
        rng=rng,
    )
    label = f"{provider.name}:{provider.model}"
    try:
        if isinstance(provider, NamesWhoAnswered):
            # Which model answered, as the server says: a gateway routes one name to
            # several models (by API key, by load), and a review is that model's (steer37).
            got = provider.answer_naming_model(prompt.system, prompt.user)
            answer, answered_as = got.text, answered_name(got.model)
        else:
            answer, answered_as = provider.complete(prompt.system, prompt.user), ""
    except ProviderError as exc:
        return fallback_audit(static, f"{label}: {exc}", now=now)
    report = parse_audit_response(answer)
    judged = judge(
        static,
        manifest,
        report,
        injection=injection,
        files=files,
        echo=(prompt.start_token, prompt.end_token),
        checkpoints=prompt.checkpoints,
        provider=provider.name,
        model=provider.model,
        now=now,
    )
    # Which server answered is part of what reviewed the content (steer35).
    return dataclasses.replace(
        judged, endpoint=provider_endpoint(provider), answered_as=answered_as
    )
