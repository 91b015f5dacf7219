"""Parsing the auditor model's answer, failing closed.

Seed 000 ("Response parsing"): tolerate Markdown fences, extract the JSON from
surrounding prose, validate every field, and fall back to a conservative
HIGH-risk, manual-review result when nothing usable comes back. The model's
answer is untrusted input like the plugin it describes (it may have been
steered by that plugin), so every field is checked and every doubt resolves
towards more caution:

* an invalid ``risk_level`` becomes HIGH; a finding severity is read in the
  schema's words or the usual words for them (``critical``/``high`` are
  danger, ``medium`` a warning, ``low`` info), and any other is danger; a
  finding without a string ``message`` falls back to its ``description``;
* a missing or invalid ``recommendation`` becomes ``reject``, with a reason;
* ``description_accurate`` is a boolean or a word for one (``"no"``,
  ``"false"``); anything else is "not judged" (``None``);
* what cannot be read (a judgement of the description that is missing or not
  a yes or no, findings that are not a list of objects with a message) is a
  check the model's answer does not make: the answer's risk is at least HIGH
  (steer22: a plugin's README asked the model for severities "as CVSS", a
  "yes"/"no" and findings grouped by severity; the model complied, canaries
  and all, and caplet read "critical" as a warning, "no" as not judged and the
  grouped findings as none, so the audit was MEDIUM or LOW, approvable);
* an answer with no JSON object in it is HIGH, reject, with one warning
  finding saying it could not be parsed; so is one with two verdicts (two
  objects, a repeated key, or one field under two of its spellings).

Every correction is recorded in :attr:`ModelReport.problems` so the report
can show it. Key names are also accepted in the seed's camelCase.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from caplet._audit._model import InjectionAttempt, Verdict, stricter_verdict
from caplet._audit._stated import stated_verdicts
from caplet._findings import Finding, RiskLevel, Severity

__all__ = [
    "RULE_MODEL_FINDING",
    "RULE_UNPARSEABLE",
    "ModelReport",
    "parse_audit_response",
]

#: Rule id of a finding the model reported.
RULE_MODEL_FINDING: Final = "CPL-AUDIT-006"
#: Rule id of the warning added when the answer could not be parsed.
RULE_UNPARSEABLE: Final = "CPL-AUDIT-005"

#: How many ``{`` positions are tried when looking for the object in prose;
#: bounds the work on a hostile answer full of braces.
_MAX_CANDIDATES = 500

_KEYS: Final = {
    "risk_level": ("risk_level", "riskLevel"),
    "summary": ("summary",),
    "description_accurate": ("description_accurate", "descriptionAccurate"),
    "capabilities_observed": (
        "capabilities_observed",
        "observed_capabilities",
        "capabilitiesObserved",
        "observedCapabilities",
    ),
    "findings": ("findings",),
    "injection_attempts": ("injection_attempts", "injectionAttempts"),
    "recommendation": ("recommendation",),
    "risk_reasons": ("risk_reasons", "riskReasons"),
    "prompt_start": ("prompt_start", "promptStart"),
    "prompt_end": ("prompt_end", "promptEnd"),
    "checkpoints": ("checkpoints",),
}
_ALL_KEYS: Final = frozenset(k for names in _KEYS.values() for k in names)
#: An answer key written as a JSON key, outside the one answer object.
_ANSWER_KEY: Final = re.compile("|".join(f'"{key}"\\s*:' for key in sorted(_ALL_KEYS)))


#: Words a model uses for the three severities (the schema's own first). Any other word
#: is danger: the severity is what the floor of the audit's risk is made of, and a model a
#: plugin asked to use its own scale (steer22) must not lower it by the asking.
_SEVERITY_WORDS: Final = {
    **dict.fromkeys(("danger", "critical", "high", "severe", "error", "fatal"), Severity.DANGER),
    **dict.fromkeys(("warning", "warn", "medium", "moderate"), Severity.WARNING),
    **dict.fromkeys(("info", "informational", "information", "low", "note"), Severity.INFO),
}

#: A judgement of the description written as a word instead of a JSON boolean.
_ACCURATE_WORDS: Final = {
    **dict.fromkeys(("true", "yes", "accurate"), True),
    **dict.fromkeys(("false", "no", "inaccurate", "not accurate"), False),
}

#: What a problem that fails the answer closed ends with (the report lists it as a reason).
_UNREAD: Final = "could not be read, so the audit is at least HIGH"


@dataclass(frozen=True, slots=True)
class ModelReport:
    """The validated content of one model answer.

    ``parsed`` is False when no JSON object could be found; then the report
    is the conservative fallback (HIGH, reject, one warning). Model findings
    carry rule id ``CPL-AUDIT-006`` and the line numbers *as the model gave
    them* (of the canary-injected source); the deep audit maps them back.
    """

    parsed: bool
    risk_level: RiskLevel
    summary: str
    description_accurate: bool | None
    observed_capabilities: tuple[str, ...]
    findings: tuple[Finding, ...]
    injection_attempts: tuple[InjectionAttempt, ...]
    recommendation: Verdict
    risk_reasons: tuple[str, ...]
    problems: tuple[str, ...] = ()
    #: What the model copied from the prompt's first and last lines ("" when it did not):
    #: the deep audit compares them with the tokens it printed there (auditor24).
    prompt_start: str = ""
    prompt_end: str = ""
    #: What the model copied from the prompt's checkpoint lines (auditor27).
    checkpoints: tuple[str, ...] = ()


class _RepeatedKeyError(ValueError):
    """A JSON object of the answer names one key twice (``json`` would keep the last)."""


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKeyError(key)
        found[key] = value
    return found


def _extract_object(text: str) -> tuple[dict[str, object], tuple[int, int]] | str:
    """The one JSON object in ``text`` that has an answer key and where it stands, or
    why there is none.

    Tries ``json.JSONDecoder.raw_decode`` at each ``{`` from the left: the
    first that decodes is the outermost object starting there (anything
    enclosing it would have started earlier). Objects without any of the
    answer's keys (a stray example in the prose) are skipped. Markdown
    fences are prose like any other: nothing is removed first, so a fence on
    the same line as the object (```` ```json {...} ``` ````, issue 14) is no
    different from one on a line of its own, and a fence inside a JSON
    string is left alone.

    The model answers with exactly one object (red-team round 4): a second
    one with an answer key after the first (a plugin asked for a
    "preliminary verdict" first, and the first counted), a key repeated in
    an object (``json`` keeps the last), or braces past the candidate
    budget that hide what follows, and the answer cannot be judged.
    """
    decoder = json.JSONDecoder(object_pairs_hook=_no_repeats)
    start = text.find("{")
    tries = 0
    chosen: dict[str, object] | None = None
    span = (0, 0)
    while start != -1:
        tries += 1
        if tries > _MAX_CANDIDATES:
            return f"more than {_MAX_CANDIDATES} '{{' to try; the answer must be one JSON object"
        try:
            value, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            # RecursionError: nesting deeper than the interpreter's stack, a
            # hostile answer; give up on this brace like on any bad JSON.
            start = text.find("{", start + 1)
            continue
        except _RepeatedKeyError as exc:
            return f"an object of the answer repeats the key {str(exc)!r}"
        except ValueError:
            # Not a JSONDecodeError: int() refuses more than sys.get_int_max_str_digits()
            # digits, and escaped the parser (attack18). No answer needs such a number.
            return (
                "a number in the answer is too long to read (more than "
                f"{sys.get_int_max_str_digits()} digits)"
            )
        if isinstance(value, dict) and _ALL_KEYS & value.keys():
            if chosen is not None:
                return "the answer holds more than one verdict object; it must hold exactly one"
            chosen, span = value, (start, end)
        start = text.find("{", end)
    if chosen is None:
        return "no JSON object with the expected keys was found"
    if _ANSWER_KEY.search(text, 0, span[0]) or _ANSWER_KEY.search(text, span[1]):
        # Another verdict that does not decode (cut off, broken) beside this one.
        return "the answer holds part of another verdict object; it must hold exactly one"
    for names in _KEYS.values():
        spelled = [name for name in names if name in chosen]
        if len(spelled) > 1:
            # One field under two accepted spellings is two verdicts in one object, like
            # a repeated key: the first counted, so a plugin asking the model for a
            # "legacy" risk_level of LOW beside its real riskLevel got LOW (attack13d).
            return (
                f"the answer gives {' and '.join(spelled)}, one field spelled twice; it must "
                "give each field once"
            )
    return chosen, span


def _get(obj: Mapping[str, object], field: str) -> object:
    for key in _KEYS[field]:
        if key in obj:
            return obj[key]
    return None


def _text_list(value: object, field: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{field} is not a list ({type(value).__name__}); ignored")
        return ()
    items = tuple(item.strip() for item in value if isinstance(item, str) and item.strip())
    if len(items) != len(value):
        problems.append(f"{field}: {len(value) - len(items)} entries were not text; dropped")
    return items


def _risk(value: object, problems: list[str]) -> RiskLevel:
    if isinstance(value, str):
        try:
            return RiskLevel.parse(value)
        except ValueError:
            pass
    problems.append(
        f"risk_level {value!r} is not one of LOW, MEDIUM, HIGH, CRITICAL; treated as HIGH"
    )
    return RiskLevel.HIGH


def _recommendation(value: object, problems: list[str]) -> Verdict:
    if isinstance(value, str):
        normal = "-".join(value.strip().lower().replace("_", " ").replace("-", " ").split())
        try:
            return Verdict(normal)
        except ValueError:
            pass
    problems.append(
        f"recommendation {value!r} is not approve, approve-with-conditions or reject; "
        "treated as reject"
    )
    return Verdict.REJECT


def _severity(value: object, problems: list[str], index: int) -> Severity:
    if isinstance(value, str):
        found = _SEVERITY_WORDS.get(" ".join(value.lower().split()))
        if found is not None:
            return found
    problems.append(
        f"findings[{index}].severity {value!r} is not danger, warning or info; treated as danger"
    )
    return Severity.DANGER


def _accurate(value: object, unread: list[str]) -> bool | None:
    """The judgement of the description: a boolean, or a word for one; else ``None``,
    noted in ``unread`` (a missing judgement is a check not made)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        found = _ACCURATE_WORDS.get(" ".join(value.lower().split()))
        if found is not None:
            return found
    unread.append(f"description_accurate {value!r} is not true or false: it {_UNREAD}")
    return None


def _line(value: object) -> int:
    # bool is an int subclass; a model writing "line": true meant nothing.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def _findings(value: object, problems: list[str], unread: list[str]) -> tuple[Finding, ...]:
    """The model's findings; what is not a list of objects with a message is ``unread``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        unread.append(f"findings is not a list ({type(value).__name__}): they {_UNREAD}")
        return ()
    found: list[Finding] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            unread.append(f"findings[{index}] is not an object: it {_UNREAD}")
            continue
        message = item.get("message")
        if not isinstance(message, str) or not message.strip():
            message = item.get("description")
        if not isinstance(message, str) or not message.strip():
            unread.append(f"findings[{index}] has no text message: it {_UNREAD}")
            continue
        file = item.get("file")
        excerpt = item.get("excerpt")
        found.append(
            Finding(
                rule_id=RULE_MODEL_FINDING,
                severity=_severity(item.get("severity"), problems, index),
                message=message.strip(),
                file=file.strip() if isinstance(file, str) else "",
                line=_line(item.get("line")),
                excerpt=excerpt.strip() if isinstance(excerpt, str) else "",
            )
        )
    return tuple(found)


def _attempts(value: object, problems: list[str]) -> tuple[InjectionAttempt, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"injection_attempts is not a list ({type(value).__name__}); ignored")
        return ()
    found: list[InjectionAttempt] = []
    for index, item in enumerate(value):
        if isinstance(item, str) and item.strip():
            found.append(InjectionAttempt(excerpt=item.strip()))
            continue
        if isinstance(item, dict):
            excerpt = item.get("excerpt", item.get("text"))
            reason = item.get("reason")
            excerpt_text = excerpt.strip() if isinstance(excerpt, str) else ""
            reason_text = reason.strip() if isinstance(reason, str) else ""
            if excerpt_text or reason_text:
                found.append(InjectionAttempt(excerpt=excerpt_text, reason=reason_text))
                continue
        problems.append(f"injection_attempts[{index}] has no excerpt or reason; dropped")
    return tuple(found)


def _echo(value: object) -> str:
    """A token the model copied from the prompt, as text ("" when it is not text)."""
    return value.strip() if isinstance(value, str) else ""


def _echoes(value: object) -> tuple[str, ...]:
    """The tokens the model copied from the checkpoint lines: a list's texts, or one
    text (a model may join them); anything else copies none (the check fails closed)."""
    if isinstance(value, str):
        return (value.strip(),)
    if isinstance(value, list):
        return tuple(item.strip() for item in value if isinstance(item, str))
    return ()


def _unparseable(why: str) -> ModelReport:
    return ModelReport(
        parsed=False,
        risk_level=RiskLevel.HIGH,
        summary="",
        description_accurate=None,
        observed_capabilities=(),
        findings=(
            Finding(
                rule_id=RULE_UNPARSEABLE,
                severity=Severity.WARNING,
                message=(
                    f"the auditor's answer could not be parsed ({why}); "
                    "review the plugin manually or re-run the audit (--fresh)"
                ),
            ),
        ),
        injection_attempts=(),
        recommendation=Verdict.REJECT,
        risk_reasons=(f"the auditor's answer could not be parsed ({why})",),
        problems=(why,),
    )


def parse_audit_response(text: str) -> ModelReport:
    """Validate the model's answer ``text`` into a :class:`ModelReport`; never raises.

    The answer should be one JSON object (see docs/auditing.md for the
    schema); fences and prose around it are tolerated.
    """
    if not text.strip():
        return _unparseable("the answer was empty")
    extracted = _extract_object(text)
    if isinstance(extracted, str):
        return _unparseable(extracted)
    obj, span = extracted
    problems: list[str] = []
    risk = _risk(_get(obj, "risk_level"), problems)
    summary_value = _get(obj, "summary")
    if isinstance(summary_value, str):
        summary = summary_value.strip()
    else:
        summary = ""
        problems.append("summary is missing or not text")
    unread: list[str] = []
    accurate = _accurate(_get(obj, "description_accurate"), unread)
    findings = _findings(_get(obj, "findings"), problems, unread)
    if unread:
        # A check the answer does not make is not a pass (steer22): the safe answer wins,
        # as it does for a missing risk_level or recommendation.
        risk = max(risk, RiskLevel.HIGH, key=lambda level: level.order)
        problems.extend(unread)
    recommendation = _recommendation(_get(obj, "recommendation"), problems)
    # A verdict the answer states anywhere else (nested, spelled otherwise, in text
    # around the object) counts too, the strictest winning (steer32, _stated).
    stated = stated_verdicts(
        obj,
        f"{text[: span[0]]}\n{text[span[1] :]}",
        read=frozenset(
            name
            for field in ("risk_level", "recommendation", "description_accurate")
            for name in _KEYS[field]
        ),
    )
    said = f" ({', '.join(stated.where[:6])})"
    if stated.risk is not None and stated.risk.order > risk.order:
        problems.append(
            f"the answer states a risk of {stated.risk.value} besides its risk_level "
            f"{risk.value}{said}; the highest risk it states counts"
        )
        risk = stated.risk
    if stated.verdict is not None and stated.verdict.order > recommendation.order:
        problems.append(
            f"the answer states the recommendation {stated.verdict.value} besides its "
            f"recommendation {recommendation.value}{said}; the strictest it states counts"
        )
        recommendation = stricter_verdict(recommendation, stated.verdict)
    if stated.inaccurate and accurate is not False:
        problems.append(
            f"the answer states the description is inaccurate besides its "
            f"description_accurate {accurate!r}{said}; the description counts as inaccurate"
        )
        accurate = False
    return ModelReport(
        parsed=True,
        risk_level=risk,
        summary=summary,
        description_accurate=accurate,
        observed_capabilities=_text_list(
            _get(obj, "capabilities_observed"), "capabilities_observed", problems
        ),
        findings=findings,
        injection_attempts=_attempts(_get(obj, "injection_attempts"), problems),
        recommendation=recommendation,
        risk_reasons=_text_list(_get(obj, "risk_reasons"), "risk_reasons", problems),
        problems=tuple(problems),
        prompt_start=_echo(_get(obj, "prompt_start")),
        prompt_end=_echo(_get(obj, "prompt_end")),
        checkpoints=_echoes(_get(obj, "checkpoints")),
    )
