"""Property tests of the audit-response parser: it never raises, and fails closed.

``caplet.audit.parse_audit_response`` documents that it never raises: the
model's answer is untrusted input (the plugin may have steered it), so
every doubt becomes caution, never an exception.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from caplet._audit._model import Verdict
from caplet._findings import RiskLevel, Severity
from caplet.audit import parse_audit_response
from tests._fuzz.budget import fuzz

KEYS = (
    "risk_level",
    "riskLevel",
    "summary",
    "description_accurate",
    "capabilities_observed",
    "findings",
    "injection_attempts",
    "recommendation",
    "risk_reasons",
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["LOW", "low", "CRITICAL", "approve", "reject", "danger", "info"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["message", "severity", "line", "excerpt", "reason", "file"])
            | st.text(max_size=6),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
answers = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), json_values, max_size=9)
wrapped = st.builds(
    lambda before, document, after, fence: (
        before
        + ("```json\n" if fence else "")
        + json.dumps(document)
        + ("\n```" if fence else "")
        + after
    ),
    st.text(max_size=30),
    answers,
    st.text(max_size=30),
    st.booleans(),
)


@fuzz(120)
@given(st.one_of(st.text(max_size=400), wrapped, st.text(alphabet='{}[]":,', max_size=200)))
def test_any_answer_parses_without_raising_and_fails_closed(text: str) -> None:
    report = parse_audit_response(text)
    assert isinstance(report.risk_level, RiskLevel)
    assert isinstance(report.recommendation, Verdict)
    assert all(isinstance(f.severity, Severity) for f in report.findings)
    if not report.parsed:
        assert report.risk_level is RiskLevel.HIGH
        assert report.recommendation is Verdict.REJECT


risks = st.sampled_from(["LOW", "MEDIUM", "HIGH", "CRITICAL"])
verdicts = st.sampled_from(["approve", "approve_with_conditions", "reject"])
plain = st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "Zs"]), max_size=30)


@fuzz(150)
@given(
    risks,
    verdicts,
    plain,
    st.booleans(),
    st.lists(
        st.tuples(st.sampled_from(["danger", "warning", "info"]), plain.filter(str.strip)),
        max_size=3,
    ),
    st.lists(st.tuples(plain.filter(str.strip), plain.filter(str.strip)), max_size=3),
)
def test_a_valid_answer_round_trips(
    risk: str,
    verdict: str,
    summary: str,
    accurate: bool,
    findings: list[tuple[str, str]],
    injections: list[tuple[str, str]],
) -> None:
    document = {
        "risk_level": risk,
        "summary": summary,
        "description_accurate": accurate,
        "capabilities_observed": [],
        "findings": [{"severity": s, "message": m} for s, m in findings],
        "injection_attempts": [{"excerpt": e, "reason": r} for e, r in injections],
        "recommendation": verdict,
        "risk_reasons": [],
    }
    report = parse_audit_response(json.dumps(document))
    assert report.parsed
    assert report.problems == ()
    assert report.risk_level is RiskLevel.parse(risk)
    assert report.recommendation.value.replace("-", "_") == verdict
    assert report.summary == summary.strip()
    assert report.description_accurate is accurate
    assert [(f.severity.value, f.message) for f in report.findings] == [
        (s, m.strip()) for s, m in findings
    ]
    assert [(a.excerpt, a.reason) for a in report.injection_attempts] == [
        (e.strip(), r.strip()) for e, r in injections
    ]
