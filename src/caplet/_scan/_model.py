"""Static-scan findings and reports."""

from __future__ import annotations

from dataclasses import dataclass

from caplet._severity import Severity

__all__ = ["Finding", "ScanReport"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the scanner (or the composition lint, or an auditor) noticed.

    ``file`` is relative to the scanned root (``""`` for findings about the
    manifest as a whole); ``line``/``column`` are 1-based (0 when unknown).
    ``capability`` names the capability kind (or exact capability) that would
    cover the behaviour, and ``covered`` says whether the plugin declares it;
    a covered finding has already had its severity lowered.
    """

    rule_id: str
    severity: Severity
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    excerpt: str = ""
    capability: str | None = None
    covered: bool = False

    def sort_key(self) -> tuple[int, str, int, int, str]:
        """Deterministic order: severity (danger first), file, line, column, rule."""
        return (self.severity.rank, self.file, self.line, self.column, self.rule_id)


@dataclass(frozen=True, slots=True)
class ScanReport:
    """All findings of one scan, sorted, plus what was scanned."""

    root: str
    findings: tuple[Finding, ...]
    files_scanned: int
    bytes_scanned: int

    @property
    def has_danger(self) -> bool:
        return any(f.severity is Severity.DANGER for f in self.findings)

    def uncovered_dangers(self) -> tuple[Finding, ...]:
        """Danger findings no declared capability covers: these refuse a load."""
        return tuple(f for f in self.findings if f.severity is Severity.DANGER and not f.covered)
