"""The verdict (caplet._scan._verdict): severity by mode, escalation, de-duplication."""

from __future__ import annotations

from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode
from caplet._scan._verdict import file_finding, finish, judge


def test_a_capability_is_only_observed_in_a_package() -> None:
    plugin = judge("CPL-PROC-001", "os.system", ScanMode.PLUGIN, covered=False, capability=None)
    package = judge("CPL-PROC-001", "os.system", ScanMode.PACKAGE, covered=False, capability=None)
    assert plugin is not None
    assert plugin.severity is Severity.DANGER
    assert package is not None
    assert package.severity is Severity.INFO
    assert package.message.startswith("observed capability")


def test_no_capability_covers_a_threat() -> None:
    verdict = judge("CPL-THR-001", "exec", ScanMode.PLUGIN, covered=True, capability="proc.exec:x")
    assert verdict is not None
    assert verdict.severity is Severity.DANGER
    assert not verdict.covered


def test_an_escalated_signal_is_danger_and_says_why() -> None:
    verdict = judge(
        "CPL-AUD-001", "'x'", ScanMode.PLUGIN, covered=False, capability=None, escalation="because"
    )
    assert verdict is not None
    assert verdict.severity is Severity.DANGER
    assert "because" in verdict.message


def test_supply_chain_findings_are_dropped_in_packages() -> None:
    assert judge("CPL-SUP-001", "x", ScanMode.PACKAGE, covered=False, capability=None) is None
    assert file_finding("x.py", "CPL-SUP-001", "x", ScanMode.PACKAGE) == []


def test_finish_keeps_the_worst_of_duplicates() -> None:
    def finding(severity: Severity) -> Finding:
        return Finding("CPL-ENV-001", severity, "m", "a.py", 1, 1, "", None, False)

    [kept] = finish([finding(Severity.INFO), finding(Severity.DANGER)])
    assert kept.severity is Severity.DANGER
