"""The static-only audit: risk, verdict, summary and reasons from findings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from caplet._audit._model import STATIC_ONLY, Verdict
from caplet._audit._static import static_audit, verdict_for
from caplet._capabilities._model import ProcExecCapability
from caplet._errors import AuditError
from caplet._findings import Finding, RiskLevel, Severity
from caplet._scan._model import ScanReport
from caplet._scan._scanner import scan_tree

HASH = "sha256:" + "ab" * 32


def finding(
    rule_id: str,
    severity: Severity,
    *,
    covered: bool = False,
    file: str = "plugin.py",
    line: int = 1,
    message: str = "something; the fix",
) -> Finding:
    return Finding(
        rule_id=rule_id,
        severity=severity,
        message=message,
        file=file,
        line=line,
        covered=covered,
    )


def report(*findings: Finding) -> ScanReport:
    return ScanReport(root="/p", findings=findings, files_scanned=1, bytes_scanned=10)


@pytest.mark.parametrize(
    ("findings", "risk", "verdict"),
    [
        ((), RiskLevel.LOW, Verdict.APPROVE),
        ((finding("R-1", Severity.INFO),), RiskLevel.LOW, Verdict.APPROVE),
        ((finding("R-1", Severity.INFO, covered=True),), RiskLevel.LOW, Verdict.APPROVE),
        (
            (finding("R-1", Severity.WARNING),),
            RiskLevel.MEDIUM,
            Verdict.APPROVE_WITH_CONDITIONS,
        ),
        (
            (finding("R-1", Severity.DANGER, covered=True), finding("R-2", Severity.INFO)),
            RiskLevel.MEDIUM,
            Verdict.APPROVE_WITH_CONDITIONS,
        ),
        (
            (finding("R-1", Severity.DANGER), finding("R-2", Severity.WARNING)),
            RiskLevel.HIGH,
            Verdict.REJECT,
        ),
    ],
)
def test_risk_and_verdict(findings: tuple[Finding, ...], risk: RiskLevel, verdict: Verdict) -> None:
    result = static_audit("fs-read", HASH, report(*findings), now=1.0)
    assert (result.risk_level, result.verdict) == (risk, verdict)


@pytest.mark.parametrize(
    ("risk", "verdict"),
    [
        (RiskLevel.LOW, Verdict.APPROVE),
        (RiskLevel.MEDIUM, Verdict.APPROVE_WITH_CONDITIONS),
        (RiskLevel.HIGH, Verdict.REJECT),
        (RiskLevel.CRITICAL, Verdict.REJECT),
    ],
)
def test_verdict_for_every_risk(risk: RiskLevel, verdict: Verdict) -> None:
    assert verdict_for(risk) is verdict


def test_result_fields() -> None:
    result = static_audit("fs-read", HASH, report(finding("R-1", Severity.INFO)), now=1234.5)
    assert result.plugin == "fs-read"
    assert result.content_hash == HASH
    assert result.provider == STATIC_ONLY == "static-only"
    assert result.created_at == 1234.5
    assert result.description_accurate is None
    assert result.risk_reasons == ()


def test_now_defaults_to_the_current_time() -> None:
    before = time.time()
    result = static_audit("fs-read", HASH, report())
    assert result.created_at >= before


def test_lint_findings_are_merged_and_sorted() -> None:
    scan = report(
        finding("SCAN-W", Severity.WARNING, file="b.py", line=3),
        finding("SCAN-D", Severity.DANGER, file="b.py", line=9),
    )
    lint = [
        finding("LINT-I", Severity.INFO, file="", line=0),
        finding("LINT-W", Severity.WARNING, file="", line=0),
    ]
    result = static_audit("fs-read", HASH, scan, lint, now=0.0)
    assert [f.rule_id for f in result.findings] == ["SCAN-D", "LINT-W", "SCAN-W", "LINT-I"]


def test_lint_findings_alone_can_raise_the_risk() -> None:
    lint = [finding("CPL-LINT-001", Severity.WARNING, file="", line=0)]
    result = static_audit("fs-read", HASH, report(), lint, now=0.0)
    assert result.risk_level is RiskLevel.MEDIUM
    assert result.risk_reasons == ("CPL-LINT-001 warning at manifest: something",)


def test_summary_counts_findings_and_says_no_model() -> None:
    scan = report(
        finding("A", Severity.DANGER, line=1),
        finding("A", Severity.DANGER, line=2),
        finding("B", Severity.WARNING),
        finding("C", Severity.INFO, line=1),
        finding("C", Severity.INFO, line=2),
        finding("C", Severity.INFO, line=3),
    )
    result = static_audit("fs-read", HASH, scan, now=0.0)
    assert result.summary == (
        "static-only audit: 2 danger, 1 warning, 3 info findings; no model was consulted"
    )


def test_risk_reasons_one_line_per_rule_that_raised_the_risk() -> None:
    scan = report(
        finding("CPL-PROC-001", Severity.DANGER, line=7, message="os.system executes; fix"),
        finding("CPL-PROC-001", Severity.DANGER, line=9, message="os.system executes; fix"),
        finding("CPL-DYN-001", Severity.DANGER, file="x.py", line=2, message="eval runs; fix"),
        finding("CPL-FS-002", Severity.WARNING, message="open reads; fix"),
        finding("CPL-ENV-001", Severity.DANGER, covered=True, message="env (covered)"),
    )
    result = static_audit("fs-read", HASH, scan, now=0.0)
    # HIGH: only the uncovered dangers raised it, in finding order.
    assert result.risk_reasons == (
        "CPL-PROC-001 uncovered danger (x2) at plugin.py:7: os.system executes",
        "CPL-DYN-001 uncovered danger at x.py:2: eval runs",
    )


def test_medium_reasons_list_covered_dangers_and_warnings() -> None:
    scan = report(
        finding("CPL-PROC-001", Severity.DANGER, covered=True, message="runs git (covered)"),
        finding("CPL-FS-002", Severity.WARNING, line=4, message="open reads; fix"),
        finding("CPL-ENV-001", Severity.INFO, covered=True, message="env (covered)"),
    )
    result = static_audit("fs-read", HASH, scan, now=0.0)
    assert result.risk_reasons == (
        "CPL-PROC-001 danger at plugin.py:1: runs git (covered)",
        "CPL-FS-002 warning at plugin.py:4: open reads",
    )


@pytest.mark.parametrize(
    ("plugin", "content_hash", "expected"),
    [
        ("", HASH, "needs the plugin's name"),
        ("fs-read", "", "plugin 'fs-read' needs the content hash"),
    ],
)
def test_missing_identity_is_an_audit_error(plugin: str, content_hash: str, expected: str) -> None:
    with pytest.raises(AuditError, match=expected):
        static_audit(plugin, content_hash, report(), now=0.0)


def test_end_to_end_with_a_real_tree(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text(
        "import subprocess\n\ndef create_functions(config):\n"
        "    return {'git': {'status': lambda: subprocess.run(['git', 'status'])}}\n",
        encoding="utf-8",
    )
    git = ProcExecCapability(program="git", declared="proc.exec:git")
    covered = static_audit("git-tool", HASH, scan_tree(tmp_path, [git]), now=0.0)
    assert (covered.risk_level, covered.verdict) == (
        RiskLevel.MEDIUM,
        Verdict.APPROVE_WITH_CONDITIONS,
    )
    undeclared = static_audit("git-tool", HASH, scan_tree(tmp_path), now=0.0)
    assert (undeclared.risk_level, undeclared.verdict) == (RiskLevel.HIGH, Verdict.REJECT)
    assert undeclared.risk_reasons == (
        "CPL-PROC-001 uncovered danger at plugin.py:4: subprocess.run executes a program",
    )
